//! The fields a pipeline reads from one JSON object, without building the object.
//!
//! A JSON Lines record is parsed once, in place: only the fields the config names are kept —
//! strings borrowed from the line when they hold no escape, integers as their digits, other
//! numbers and booleans as `serde_json`'s `Value` would print them — and every other field is
//! skipped without allocating. That is most of the cost of a JSON record (a `Value` map allocates a
//! node and a string per field).
//!
//! Most log lines are flat objects of strings and integers without escapes, and for those a
//! first pass ([`flat_fields`]) reads the line as bytes: a loop per string that stops at a
//! quote, a backslash or a control character, and the number grammar of RFC 8259, section 6.
//! It gives up (`None`) on anything else — an escape, a nested value, a float it would have
//! to print, any error — and `serde_json` reads the line as before, so a line it accepts
//! gives the same fields, and a bad line the same error. On `examples/requests.toml`'s lines
//! a record's extraction (the JSON read, then its time, key and item) went from 2,496 to
//! 1,744 instructions (callgrind; docs/history/benchmarks-2026-12-04.md, "A JSON fast pass").

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

/// One wanted field's value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Field<'a> {
    /// A string, a number or a boolean, as text.
    Text(Cow<'a, str>),
    /// Another kind of value (null, array, object): what it was.
    Other(&'static str),
}

/// What the fast pass saw of a wanted field: its field, or a float, whose text it lost.
enum Seen<'a> {
    Field(Field<'a>),
    Float,
}

/// The fast pass's visitor: strings borrowed, integers as their digits.
struct FieldVisitor;

impl<'de> Visitor<'de> for FieldVisitor {
    type Value = Seen<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Seen<'de>, E> {
        Ok(Seen::Field(Field::Text(Cow::Borrowed(v))))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Seen<'de>, E> {
        Ok(Seen::Field(Field::Text(Cow::Owned(v.to_string()))))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Seen<'de>, E> {
        Ok(Seen::Field(Field::Text(Cow::Owned(v))))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Seen<'de>, E> {
        Ok(Seen::Field(Field::Text(Cow::Owned(v.to_string()))))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Seen<'de>, E> {
        Ok(Seen::Field(Field::Text(Cow::Owned(v.to_string()))))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Seen<'de>, E> {
        // A fraction, an exponent or an integer past 64 bits: which, only its text says.
        Ok(Seen::Float)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Seen<'de>, E> {
        Ok(Seen::Field(Field::Text(Cow::Borrowed(if v {
            "true"
        } else {
            "false"
        }))))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Seen<'de>, E> {
        Ok(Seen::Field(Field::Other("null")))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Seen<'de>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Seen::Field(Field::Other("an array")))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Seen<'de>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Seen::Field(Field::Other("an object")))
    }
}

/// A wanted field's value: by the fast visitor, or (`raw`) from the value's own text.
struct FieldSeed {
    raw: bool,
}

impl<'de> DeserializeSeed<'de> for FieldSeed {
    type Value = Seen<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Seen<'de>, D::Error> {
        if !self.raw {
            return d.deserialize_any(FieldVisitor);
        }
        let raw: &'de RawValue = Deserialize::deserialize(d)?;
        field_of(raw.get())
            .map(Seen::Field)
            .map_err(de::Error::custom)
    }
}

/// A field from its value's JSON text (one valid JSON value, no surrounding space).
fn field_of(text: &str) -> Result<Field<'_>, String> {
    Ok(match text.as_bytes().first() {
        // Without a backslash a string's text between its quotes is the string.
        Some(b'"') if !text.contains('\\') => Field::Text(Cow::Borrowed(&text[1..text.len() - 1])),
        Some(b'"') => Field::Text(Cow::Owned(
            serde_json::from_str::<String>(text).map_err(|e| e.to_string())?,
        )),
        Some(b't') => Field::Text(Cow::Borrowed("true")),
        Some(b'f') => Field::Text(Cow::Borrowed("false")),
        Some(b'n') => Field::Other("null"),
        Some(b'[') => Field::Other("an array"),
        Some(b'{') => Field::Other("an object"),
        _ => Field::Text(number(text)?),
    })
}

/// A number's text as a key or an item. An integer keeps its digits at any size (`-0` is
/// `0`): read as a float past 64 bits, distinct ids would merge. A number with a fraction or
/// an exponent is a 64-bit float, written as `serde_json` writes one (so `1.50` and `1.5` are
/// one item, and so are two that round to one float).
fn number(text: &str) -> Result<Cow<'_, str>, String> {
    if !text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) {
        return Ok(Cow::Borrowed(if text == "-0" { "0" } else { text }));
    }
    let v: f64 = text.parse().map_err(|e| format!("{text}: {e}"))?;
    match serde_json::Number::from_f64(v) {
        Some(n) => Ok(Cow::Owned(n.to_string())),
        None => Err(format!("number out of range: {text}")),
    }
}

/// A key of the object, borrowed when it holds no escape.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Cow<'de, str>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_string()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// Reads the object's fields named in `wanted` into `out` (index for index; a later
/// duplicate field wins, as in a `serde_json` map), skipping the rest; `raw`: read each from
/// its text. Sets `floats` when the fast pass met a float.
struct ObjectVisitor<'w, 'o, 'a> {
    wanted: &'w [String],
    out: &'o mut Vec<Option<Field<'a>>>,
    raw: bool,
    floats: &'o mut bool,
}

impl<'de, 'w, 'o> Visitor<'de> for ObjectVisitor<'w, 'o, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(k) = map.next_key_seed(KeySeed)? {
            match self.wanted.iter().position(|w| *w == *k) {
                Some(i) => match map.next_value_seed(FieldSeed { raw: self.raw })? {
                    Seen::Field(f) => self.out[i] = Some(f),
                    Seen::Float => *self.floats = true,
                },
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// Parses `line` as one JSON object, setting `out[i]` to the value of field `wanted[i]` (or
/// `None` when the object has no such field). A line whose wanted fields hold a float (rare
/// for keys and items) is read again, those fields from their text (see `number`).
pub(crate) fn fields<'a>(
    line: &'a str,
    wanted: &[String],
    out: &mut Vec<Option<Field<'a>>>,
) -> Result<(), serde_json::Error> {
    if flat_fields(line, wanted, out).is_some() {
        return Ok(());
    }
    serde_fields(line, wanted, out)
}

/// [`fields`] by `serde_json`, for every line.
fn serde_fields<'a>(
    line: &'a str,
    wanted: &[String],
    out: &mut Vec<Option<Field<'a>>>,
) -> Result<(), serde_json::Error> {
    let mut floats = false;
    for raw in [false, true] {
        out.clear();
        out.resize_with(wanted.len(), || None);
        let mut d = serde_json::Deserializer::from_str(line);
        d.deserialize_map(ObjectVisitor {
            wanted,
            out,
            raw,
            floats: &mut floats,
        })?;
        d.end()?;
        if !floats {
            break;
        }
    }
    Ok(())
}

/// A value of a flat object, as the fast pass reads it.
enum FlatValue<'a> {
    Text(&'a str),
    Integer(&'a str),
    Float,
    True,
    False,
    Null,
}

/// A position in a line, for the fast pass.
struct Cursor<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    /// Skips JSON's whitespace: space, tab, line feed, carriage return.
    fn whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek() == Some(byte)).then(|| self.at += 1)
    }

    /// A string's text, after its opening quote: `None` at an escape or a control character
    /// (which `serde_json` decodes or refuses) or at the end of the line.
    #[inline(always)]
    fn string(&mut self) -> Option<&'a str> {
        let start = self.at;
        let rest = self.text.as_bytes().get(start..)?;
        let len = string_end(rest)?;
        if rest[len] != b'"' {
            return None;
        }
        self.at = start + len + 1;
        self.text.get(start..start + len)
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
        self.at - start
    }

    /// A number by RFC 8259's grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    fn number(&mut self) -> Option<FlatValue<'a>> {
        let start = self.at;
        let _ = self.eat(b'-');
        match self.peek()? {
            b'0' => self.at += 1,
            b'1'..=b'9' => {
                self.digits();
            }
            _ => return None,
        }
        let mut integer = true;
        if self.eat(b'.').is_some() {
            integer = false;
            (self.digits() > 0).then_some(())?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            integer = false;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            (self.digits() > 0).then_some(())?;
        }
        Some(if integer {
            FlatValue::Integer(self.text.get(start..self.at)?)
        } else {
            FlatValue::Float
        })
    }

    fn literal(&mut self, word: &str, value: FlatValue<'a>) -> Option<FlatValue<'a>> {
        let rest = self.text.as_bytes().get(self.at..)?;
        rest.starts_with(word.as_bytes()).then_some(())?;
        self.at += word.len();
        Some(value)
    }

    /// A value that is not an object or an array.
    fn value(&mut self) -> Option<FlatValue<'a>> {
        match self.peek()? {
            b'"' => {
                self.at += 1;
                self.string().map(FlatValue::Text)
            }
            b'-' | b'0'..=b'9' => self.number(),
            b't' => self.literal("true", FlatValue::True),
            b'f' => self.literal("false", FlatValue::False),
            b'n' => self.literal("null", FlatValue::Null),
            _ => None,
        }
    }
}

/// The position of the first `"`, `\\` or control character (below 0x20) in `bytes`, eight
/// bytes at a time: in a word `w`, `(w - 0x0101…) & !w & 0x8080…` marks its zero bytes, `x`
/// with `w ^ x·0x0101…`, and bytes below `n` (≤ 0x80) with `n·0x0101…`; marks above a marked
/// byte may be borrows, so only the lowest is read, and it is exact.
#[inline(always)]
fn string_end(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let zero = |v: u64| v.wrapping_sub(ONES) & !v;
    let mut chunks = bytes.chunks_exact(8);
    let mut at = 0;
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        let marks = (zero(w ^ (ONES * u64::from(b'"')))
            | zero(w ^ (ONES * u64::from(b'\\')))
            | (w.wrapping_sub(ONES * 0x20) & !w))
            & HIGHS;
        if marks != 0 {
            return Some(at + (marks.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let tail = chunks.remainder();
    let i = tail
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
    Some(at + i)
}

/// [`fields`] for a flat object whose strings hold no escape and whose wanted values are not
/// floats; `None` (with `out` in any state) for any other line, valid or not.
fn flat_fields<'a>(
    line: &'a str,
    wanted: &[String],
    out: &mut Vec<Option<Field<'a>>>,
) -> Option<()> {
    out.clear();
    out.resize_with(wanted.len(), || None);
    let mut c = Cursor { text: line, at: 0 };
    c.whitespace();
    c.eat(b'{')?;
    c.whitespace();
    if c.eat(b'}').is_none() {
        loop {
            c.eat(b'"')?;
            let name = c.string()?;
            c.whitespace();
            c.eat(b':')?;
            c.whitespace();
            let value = c.value()?;
            // The first wanted name that matches, as the object visitor picks it. Names are
            // short and often of one length: the first byte settles most before a `memcmp`.
            let matches = |w: &String| w.as_bytes().first() == name.as_bytes().first() && w == name;
            if let Some(i) = wanted.iter().position(matches) {
                out[i] = Some(match value {
                    FlatValue::Text(t) => Field::Text(Cow::Borrowed(t)),
                    // Past 20 digits serde_json reads a float, and past f64's range refuses
                    // the line: its pass decides.
                    FlatValue::Integer(t) if t.len() > 20 => return None,
                    FlatValue::Integer(t) => Field::Text(number(t).ok()?),
                    // Its text as a float would print: the slow pass's.
                    FlatValue::Float => return None,
                    FlatValue::True => Field::Text(Cow::Borrowed("true")),
                    FlatValue::False => Field::Text(Cow::Borrowed("false")),
                    FlatValue::Null => Field::Other("null"),
                });
            }
            c.whitespace();
            if c.eat(b',').is_some() {
                c.whitespace();
                continue;
            }
            c.eat(b'}')?;
            break;
        }
    }
    c.whitespace();
    (c.at == line.len()).then_some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wanted_fields_as_serde_json_values_print_them() {
        let wanted: Vec<String> = ["a", "b", "c", "d", "e", "f"].map(String::from).to_vec();
        let mut out = Vec::new();
        let line = r#"{"x": {"y": [1, 2]}, "a": "s", "b": 3, "c": -2.5, "d": true, "e": "q\"t", "a": "later", "f": null}"#;
        fields(line, &wanted, &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        for (i, w) in wanted.iter().enumerate() {
            let expected = match &v[w] {
                serde_json::Value::String(s) => Field::Text(Cow::Owned(s.clone())),
                serde_json::Value::Null => Field::Other("null"),
                other => Field::Text(Cow::Owned(other.to_string())),
            };
            assert_eq!(out[i].as_ref(), Some(&expected), "{w}");
        }
        assert!(matches!(out[0], Some(Field::Text(Cow::Borrowed("later")))));
        for bad in [
            "[1]",
            "{",
            "{\"a\": 1} x",
            "\"a\"",
            "",
            "{\"a\": 1e999}",
            "{\"a\": 01}",
        ] {
            assert!(fields(bad, &wanted, &mut out).is_err(), "{bad:?}");
        }
    }

    /// Integers keep their digits at any size, so ids past 64 bits stay distinct; floats are
    /// floats. Against the exact texts.
    #[test]
    fn integers_keep_their_digits_and_floats_are_floats() {
        let wanted = vec!["v".to_string()];
        for (value, text) in [
            ("12345678901234567890123", "12345678901234567890123"),
            ("12345678901234567890124", "12345678901234567890124"),
            ("18446744073709551616", "18446744073709551616"),
            ("-18446744073709551617", "-18446744073709551617"),
            ("18446744073709551615", "18446744073709551615"),
            ("-9223372036854775808", "-9223372036854775808"),
            ("-0", "0"),
            ("7", "7"),
            ("1.50", "1.5"),
            ("1e3", "1000.0"),
            ("0.1", "0.1"),
            ("0.10000000000000001", "0.1"),
            ("\"a\\u00e9\"", "aé"),
            (" \"sp\" ", "sp"),
        ] {
            let line = format!("{{\"v\": {value}}}");
            let mut out = Vec::new();
            fields(&line, &wanted, &mut out).unwrap();
            assert_eq!(out[0], Some(Field::Text(Cow::Borrowed(text))), "{value}");
        }
    }

    /// The fast pass's own cases, against values written out by hand: it takes the flat
    /// lines logs are made of, and leaves everything else to `serde_json`.
    #[test]
    fn the_fast_pass_reads_flat_lines_and_gives_up_on_the_rest() {
        let wanted: Vec<String> = ["time", "user", "n", "ok", "gone"]
            .map(String::from)
            .to_vec();
        let mut out = Vec::new();
        let line = " {\"time\":\"2023-11-14T22:13:20Z\", \"user\" : \"é,1\",\"skip\":[1,{\"a\":2}]\
                    ,\"n\":-0,\"ok\":false,\"f\":-1.5e+3,\"gone\":null,\"user\":\"bob\"}\r";
        // A nested value that is not wanted still sends the line to serde_json.
        assert_eq!(flat_fields(line, &wanted, &mut out), None);
        let flat = line.replace("[1,{\"a\":2}]", "12");
        assert_eq!(flat_fields(&flat, &wanted, &mut out), Some(()));
        let text = |t: &'static str| Some(Field::Text(Cow::Borrowed(t)));
        assert_eq!(
            out,
            vec![
                text("2023-11-14T22:13:20Z"),
                text("bob"),
                text("0"),
                text("false"),
                Some(Field::Other("null")),
            ]
        );
        for given_up in [
            "{\"user\":\"a\\\"b\"}",
            "{\"user\":\"a\tb\"}",
            "{\"n\":1.5}",
            "{\"n\":123456789012345678901}",
            "{\"n\":01}",
            "{\"n\":1.}",
            "{\"n\":-}",
            "{\"x\":tru}",
            "{\"x\":1,}",
            "{\"x\":1} 2",
            "{\"x\" 1}",
            "[]",
            "{\"us\\u0065r\":1}",
            "",
        ] {
            assert_eq!(
                flat_fields(given_up, &wanted, &mut out),
                None,
                "{given_up:?}"
            );
        }
    }

    /// An integer past `f64`'s range: `serde_json` refuses it where a key or item wants it.
    const NINES: &str = "9999999999999999999999999999999999999999999999999999999999999999999999\
        9999999999999999999999999999999999999999999999999999999999999999999999999999999999999999\
        9999999999999999999999999999999999999999999999999999999999999999999999999999999999999999\
        9999999999999999999999999999999999999999999999999999999999999999999999999999999999999999";

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]

        /// Flat objects of valid members only (names repeat, values of every kind), so that
        /// the fast pass reads most of them: it reads them as `serde_json` does.
        #[test]
        fn flat_objects_read_as_serde_json_reads_them(
            members in proptest::collection::vec(
                (
                    proptest::sample::select(vec!["a", "b", "x", "é", "a"]),
                    proptest::sample::select(vec!["", " ", "\t", "\r\n"]),
                    proptest::sample::select(vec![
                        "\"s\"", "\"\"", "\"é∑\"", "\"10.0.0.2\"", "0", "-0", "7", "-12",
                        "18446744073709551616", "-9223372036854775809", "12345678901234567890",
                        NINES, "true", "false", "null", "1.5", "\"q\\\"t\"",
                    ]),
                ),
                0..6,
            ),
        ) {
            let body: Vec<String> = members
                .iter()
                .map(|(name, space, value)| format!("{space}\"{name}\"{space}:{space}{value}{space}"))
                .collect();
            let line = format!("{{{}}}", body.join(","));
            let wanted: Vec<String> = ["a", "b", "é"].map(String::from).to_vec();
            let (mut fast, mut slow) = (Vec::new(), Vec::new());
            let slow_result = serde_fields(&line, &wanted, &mut slow);
            if flat_fields(&line, &wanted, &mut fast).is_some() {
                proptest::prop_assert!(slow_result.is_ok(), "{line:?}: {slow_result:?}");
                proptest::prop_assert_eq!(&fast, &slow, "{:?}", line);
            }
        }

        /// Lines built from valid and broken pieces: whatever the fast pass reads,
        /// `serde_json` reads the same, and `fields` agrees with `serde_json` on every line.
        #[test]
        fn the_fast_pass_agrees_with_serde_json(
            open in proptest::sample::select(vec!["{", "{", " {", "", "[", "{{"]),
            members in proptest::collection::vec(
                (
                    proptest::sample::select(vec![
                        "\"a\"", "\"b\"", "\"x\"", "\"é\"", "\"a\"", "\"\\u0061\"", "a", "\"a",
                    ]),
                    proptest::sample::select(vec!["", " ", "\t", "\r\n", "\u{a0}"]),
                    proptest::sample::select(vec![":", ":", ":", "", "::"]),
                    proptest::sample::select(vec![
                        "\"s\"", "\"\"", "\"é∑\"", "\"q\\\"t\"", "\"tab\there\"", "\"\\u00e9\"",
                        "0", "-0", "7", "-12", "01", "1.5", "1.50", "1e3", "-2E-2", "1.", "-",
                        "1e", "18446744073709551616", "-9223372036854775809", "1e999", NINES, "true",
                        "false", "null", "tru", "nul", "[1, 2]", "{\"a\": 1}", "\"open",
                    ]),
                    proptest::sample::select(vec![",", ",", " , ", "", ",,"]),
                ),
                0..5,
            ),
            close in proptest::sample::select(vec!["}", "}", "} ", "}\r", "", "}x", "}}"]),
        ) {
            let mut line = open.to_string();
            for (i, (name, space, colon, value, comma)) in members.iter().enumerate() {
                if i > 0 {
                    line.push_str(comma);
                }
                line.push_str(name);
                line.push_str(space);
                line.push_str(colon);
                line.push_str(space);
                line.push_str(value);
            }
            line.push_str(close);
            let wanted: Vec<String> = ["a", "b", "é"].map(String::from).to_vec();
            let (mut fast, mut slow, mut both) = (Vec::new(), Vec::new(), Vec::new());
            let slow_result = serde_fields(&line, &wanted, &mut slow);
            if flat_fields(&line, &wanted, &mut fast).is_some() {
                proptest::prop_assert!(slow_result.is_ok(), "{line:?}: {slow_result:?}");
                proptest::prop_assert_eq!(&fast, &slow, "{:?}", line);
            }
            let result = fields(&line, &wanted, &mut both);
            proptest::prop_assert_eq!(
                result.map_err(|e| e.to_string()),
                slow_result.map_err(|e| e.to_string())
            );
            if result_ok(&line, &wanted) {
                proptest::prop_assert_eq!(&both, &slow, "{:?}", line);
            }
        }
    }

    proptest::proptest! {
        /// The word-at-a-time search finds what a byte loop finds, wherever the byte sits.
        #[test]
        fn string_end_finds_what_a_byte_loop_finds(
            bytes in proptest::collection::vec(
                proptest::sample::select(vec![
                    b'a', b' ', b'"', b'\\', 0x1f, 0x20, 0x00, 0x7f, 0x80, 0xc3, 0xa9, 0xff, b'!', b']',
                ]),
                0..40,
            ),
        ) {
            let want = bytes.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20);
            proptest::prop_assert_eq!(string_end(&bytes), want);
        }
    }

    fn result_ok(line: &str, wanted: &[String]) -> bool {
        serde_fields(line, wanted, &mut Vec::new()).is_ok()
    }
}
