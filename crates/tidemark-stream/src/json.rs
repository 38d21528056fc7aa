//! The fields a pipeline reads from one JSON object, without building the object.
//!
//! A JSON Lines record is parsed once, in place: only the fields the config names are kept —
//! strings borrowed from the line when they hold no escape, integers as their digits, other
//! numbers and booleans as `serde_json`'s `Value` would print them — and every other field is
//! skipped without allocating. That is most of the cost of a JSON record (a `Value` map allocates a
//! node and a string per field).

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

/// One wanted field's value.
#[derive(Debug, PartialEq)]
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
}
