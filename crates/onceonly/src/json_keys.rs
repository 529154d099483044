//! JSON text that names a key twice in one object.
//!
//! serde_json keeps the last of duplicate keys, so `{"a":1,"a":2}` would be
//! stored as `{"a":2}` with nobody told. Every client refuses such a payload
//! instead (`protocol/corpus/payloads.json`, `refused`): which of the two
//! the sender meant is not ours to guess.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::error::{Error, Result};

/// Refuses `text` (JSON) when an object in it, at any depth, names a key
/// twice: [`Error::Invalid`] naming the key and the object's path (`$`,
/// `$.items[2]`). Text that is not JSON passes: parsing it says why.
pub fn refuse_duplicate_keys(text: &str) -> Result<()> {
    let mut de = serde_json::Deserializer::from_str(text);
    match (Walk { path: "$" }).deserialize(&mut de) {
        Err(e) if e.is_data() => Err(Error::Invalid(format!("payload {e}"))),
        _ => Ok(()),
    }
}

/// Walks one JSON value, remembering where it is.
struct Walk<'p> {
    path: &'p str,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        for i in 0.. {
            let path = format!("{}[{i}]", self.path);
            if seq.next_element_seed(Walk { path: &path })?.is_none() {
                break;
            }
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = format!("{}.{key}", self.path);
            if !seen.insert(key) {
                let shown = serde_json::Value::from(path[self.path.len() + 1..].to_owned());
                return Err(de::Error::custom(format!(
                    "has the duplicate key {shown} in the object at {}; each key may appear once",
                    self.path
                )));
            }
            map.next_value_seed(Walk { path: &path })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_named_with_their_object() {
        for (text, said) in [
            (
                r#"{"a":1,"a":2}"#,
                r#"duplicate key "a" in the object at $;"#,
            ),
            (
                r#"{"x":[{},{"b":1,"c":2,"b":3}]}"#,
                r#"duplicate key "b" in the object at $.x[1];"#,
            ),
            (
                r#"{"q\"":1,"q\u0022":2}"#,
                r#"duplicate key "q\"" in the object at $;"#,
            ),
        ] {
            let err = refuse_duplicate_keys(text).unwrap_err().to_string();
            assert!(err.contains(said), "{text}: {err}");
        }
    }

    #[test]
    fn distinct_keys_and_non_json_pass() {
        for text in [
            r#"{"a":1,"b":{"a":1}}"#,
            "[1,[2]]",
            "\"a\"",
            "{not json",
            "",
        ] {
            assert!(refuse_duplicate_keys(text).is_ok(), "{text}");
        }
    }
}
