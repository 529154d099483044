//! JSON text that names a key twice in one object.
//!
//! serde_json keeps the last of duplicate keys, so `{"a":1,"a":2}` would be
//! stored as `{"a":2}` with nobody told. Every client refuses such a payload
//! instead (`protocol/corpus/payloads.json`, `refused`): which of the two
//! the sender meant is not ours to guess.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// Parses JSON `text` as serde_json does, except that an object naming a
/// key twice, at any depth, is refused: [`Error::Invalid`] naming the key
/// and the object's path (`$`, `$.items[2]`). One pass: the value is built
/// while the keys are checked.
pub fn parse(text: &str) -> Result<Value> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = Walk::ROOT
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v));
    value.map_err(|e| {
        if e.is_data() {
            Error::Invalid(format!("payload {e}"))
        } else {
            Error::Invalid(format!("payload is not valid JSON: {e}"))
        }
    })
}

/// Refuses `text` (JSON) when an object in it, at any depth, names a key
/// twice, as [`parse`] does. Text that is not JSON passes: parsing it says
/// why.
pub fn refuse_duplicate_keys(text: &str) -> Result<()> {
    match parse(text) {
        Err(e @ Error::Invalid(_)) if e.to_string().contains("duplicate key") => Err(e),
        _ => Ok(()),
    }
}

/// Builds one JSON value, remembering where it is: a step below its
/// parent, written out as a path only for an error.
#[derive(Clone, Copy)]
struct Walk<'a> {
    step: Step<'a>,
    parent: Option<&'a Walk<'a>>,
}

#[derive(Clone, Copy)]
enum Step<'a> {
    Root,
    Key(&'a str),
    Index(usize),
}

impl<'a> Walk<'a> {
    const ROOT: Walk<'static> = Walk {
        step: Step::Root,
        parent: None,
    };

    fn below(&'a self, step: Step<'a>) -> Walk<'a> {
        Walk {
            step,
            parent: Some(self),
        }
    }

    /// `$`, `$.items[2]`, ...
    fn path(&self) -> String {
        let mut path = self.parent.map(Walk::path).unwrap_or_default();
        match self.step {
            Step::Root => path.push('$'),
            Step::Key(key) => {
                path.push('.');
                path.push_str(key);
            }
            Step::Index(i) => path.push_str(&format!("[{i}]")),
        }
        path
    }
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::from(n))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::from(n))
    }
    fn visit_f64<E>(self, x: f64) -> Result<Value, E> {
        Ok(Value::from(x))
    }
    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }
    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self.below(Step::Index(items.len())))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            match object.entry(key) {
                Entry::Occupied(seen) => {
                    return Err(de::Error::custom(format!(
                        "has the duplicate key {} in the object at {}; each key may appear once",
                        Value::from(seen.key().as_str()),
                        self.path()
                    )))
                }
                Entry::Vacant(slot) => {
                    let value = map.next_value_seed(self.below(Step::Key(slot.key())))?;
                    slot.insert(value);
                }
            }
        }
        Ok(Value::Object(object))
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
