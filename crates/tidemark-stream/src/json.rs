//! The fields a pipeline reads from one JSON object, without building the object.
//!
//! A JSON Lines record is parsed once, in place: only the fields the config names are kept —
//! strings borrowed from the line when they hold no escape, numbers and booleans as their
//! JSON text (what `serde_json`'s `Value` would print) — and every other field is skipped
//! without allocating. That is most of the cost of a JSON record (a `Value` map allocates a
//! node and a string per field).

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

/// One wanted field's value.
#[derive(Debug, PartialEq)]
pub(crate) enum Field<'a> {
    /// A string, a number or a boolean, as text.
    Text(Cow<'a, str>),
    /// Another kind of value (null, array, object): what it was.
    Other(&'static str),
}

struct FieldVisitor;

impl<'de> Visitor<'de> for FieldVisitor {
    type Value = Field<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Field<'de>, E> {
        Ok(Field::Text(Cow::Borrowed(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Field<'de>, E> {
        Ok(Field::Text(Cow::Owned(v.to_string())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Field<'de>, E> {
        Ok(Field::Text(Cow::Owned(v)))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Field<'de>, E> {
        Ok(Field::Text(Cow::Owned(v.to_string())))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Field<'de>, E> {
        Ok(Field::Text(Cow::Owned(v.to_string())))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Field<'de>, E> {
        // The text serde_json's Value prints for a float (so keys stay as they were).
        Ok(Field::Text(Cow::Owned(
            serde_json::Number::from_f64(v).map_or_else(|| v.to_string(), |n| n.to_string()),
        )))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Field<'de>, E> {
        Ok(Field::Text(Cow::Borrowed(if v { "true" } else { "false" })))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Field<'de>, E> {
        Ok(Field::Other("null"))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Field<'de>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Field::Other("an array"))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Field<'de>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Field::Other("an object"))
    }
}

struct FieldSeed;

impl<'de> DeserializeSeed<'de> for FieldSeed {
    type Value = Field<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Field<'de>, D::Error> {
        d.deserialize_any(FieldVisitor)
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
/// duplicate field wins, as in a `serde_json` map), skipping the rest.
struct ObjectVisitor<'w, 'o, 'a> {
    wanted: &'w [String],
    out: &'o mut Vec<Option<Field<'a>>>,
}

impl<'de, 'w, 'o> Visitor<'de> for ObjectVisitor<'w, 'o, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(k) = map.next_key_seed(KeySeed)? {
            match self.wanted.iter().position(|w| *w == *k) {
                Some(i) => self.out[i] = Some(map.next_value_seed(FieldSeed)?),
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// Parses `line` as one JSON object, setting `out[i]` to the value of field `wanted[i]` (or
/// `None` when the object has no such field).
pub(crate) fn fields<'a>(
    line: &'a str,
    wanted: &[String],
    out: &mut Vec<Option<Field<'a>>>,
) -> Result<(), serde_json::Error> {
    out.clear();
    out.resize_with(wanted.len(), || None);
    let mut d = serde_json::Deserializer::from_str(line);
    d.deserialize_map(ObjectVisitor { wanted, out })?;
    d.end()
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
        for bad in ["[1]", "{", "{\"a\": 1} x", "\"a\"", ""] {
            assert!(fields(bad, &wanted, &mut out).is_err(), "{bad:?}");
        }
    }
}
