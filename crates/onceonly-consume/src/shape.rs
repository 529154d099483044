//! Where a message's operation key and payload come from.
//!
//! The default ([`KeyFrom::Envelope`]) is the line format of `onceonly
//! enqueue --jsonl`: the body is `{"key": "...", "payload": ...}`, the
//! payload optional. Messages a system already sends can be read as they
//! are: the key from a header or message attribute ([`KeyFrom::Header`]) or
//! from a field of the body ([`KeyFrom::Field`], a JSON pointer), the whole
//! body being the payload.

use std::fmt;
use std::str::FromStr;

use onceonly::{validate_op_key, Payload};
use serde_json::Value;

use crate::broker::Message;
use crate::error::Error;

/// Where the operation key is taken from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum KeyFrom {
    /// The body is `{"key": "...", "payload": ...}` (payload optional).
    #[default]
    Envelope,
    /// A header (JetStream) or string message attribute (SQS); the whole
    /// body is the payload.
    Header(String),
    /// A string or number in the body at this JSON pointer (`/order/id`);
    /// the whole body is the payload.
    Field(String),
}

impl FromStr for KeyFrom {
    type Err = Error;

    /// `envelope`, `header:NAME` or `field:/json/pointer`.
    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = || {
            Error::Invalid(format!(
                "--key-from {s:?}: one of envelope, header:NAME, field:/json/pointer"
            ))
        };
        match s.split_once(':') {
            None if s == "envelope" => Ok(KeyFrom::Envelope),
            Some(("header", name)) if !name.is_empty() => Ok(KeyFrom::Header(name.to_owned())),
            Some(("field", pointer)) if pointer.starts_with('/') => {
                Ok(KeyFrom::Field(pointer.to_owned()))
            }
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for KeyFrom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyFrom::Envelope => f.write_str("envelope"),
            KeyFrom::Header(name) => write!(f, "header:{name}"),
            KeyFrom::Field(pointer) => write!(f, "field:{pointer}"),
        }
    }
}

/// A message's operation key and payload.
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    /// The operation key.
    pub key: String,
    /// The payload, canonical, with its fingerprint.
    pub payload: Payload,
}

/// Why a message can never be processed (it goes to the dead letters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Poison(pub String);

impl fmt::Display for Poison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl KeyFrom {
    /// The operation a message carries, or why it has none.
    pub fn operation(&self, message: &impl Message) -> Result<Operation, Poison> {
        let body: Value = serde_json::from_slice(message.body())
            .map_err(|e| Poison(format!("the body is not JSON: {e}")))?;
        let (key, payload) = match self {
            KeyFrom::Envelope => envelope(body)?,
            KeyFrom::Header(name) => {
                let key = message
                    .header(name)
                    .ok_or_else(|| Poison(format!("no key: the message has no {name:?} header")))?;
                (key, Payload::from_value(&body))
            }
            KeyFrom::Field(pointer) => {
                let key = match body.pointer(pointer) {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Number(n)) => n.to_string(),
                    Some(other) => {
                        return Err(Poison(format!(
                            "no key: the body's {pointer} is {other}, not a string or number"
                        )))
                    }
                    None => return Err(Poison(format!("no key: the body has no {pointer}"))),
                };
                (key, Payload::from_value(&body))
            }
        };
        validate_op_key(&key).map_err(|e| Poison(format!("bad key: {e}")))?;
        Ok(Operation { key, payload })
    }
}

fn envelope(body: Value) -> Result<(String, Payload), Poison> {
    let Value::Object(mut fields) = body else {
        return Err(Poison(
            "no key: the body is not a {\"key\": ..., \"payload\": ...} object".into(),
        ));
    };
    let key = match fields.remove("key") {
        Some(Value::String(s)) => s,
        Some(other) => return Err(Poison(format!("no key: \"key\" is {other}, not a string"))),
        None => return Err(Poison("no key: the body has no \"key\"".into())),
    };
    let payload = match fields.remove("payload") {
        None | Some(Value::Null) => Payload::none(),
        Some(value) => Payload::from_value(&value),
    };
    Ok((key, payload))
}

/// An envelope body for `key` and `payload`, as [`KeyFrom::Envelope`] reads it.
pub fn envelope_body(key: &str, payload: &Value) -> Vec<u8> {
    serde_json::json!({ "key": key, "payload": payload })
        .to_string()
        .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Msg(&'static str, Option<(&'static str, &'static str)>);

    impl Message for Msg {
        fn body(&self) -> &[u8] {
            self.0.as_bytes()
        }
        fn header(&self, name: &str) -> Option<String> {
            self.1
                .filter(|(n, _)| *n == name)
                .map(|(_, v)| v.to_owned())
        }
        fn id(&self) -> String {
            "m1".into()
        }
        fn deliveries(&self) -> u64 {
            1
        }
    }

    fn why(shape: &KeyFrom, body: &'static str) -> String {
        shape.operation(&Msg(body, None)).unwrap_err().0
    }

    #[test]
    fn envelope_takes_key_and_payload() {
        let op = KeyFrom::Envelope
            .operation(&Msg(r#"{"key":"order-1","payload":{"b":2,"a":1}}"#, None))
            .unwrap();
        assert_eq!(op.key, "order-1");
        assert_eq!(op.payload, Payload::parse(r#"{"a":1,"b":2}"#).unwrap());
        let bare = KeyFrom::Envelope
            .operation(&Msg(r#"{"key":"order-1"}"#, None))
            .unwrap();
        assert_eq!(bare.payload, Payload::none());
    }

    #[test]
    fn poison_names_why() {
        assert!(why(&KeyFrom::Envelope, "{nope").contains("not JSON"));
        assert!(why(&KeyFrom::Envelope, r#"{"payload":1}"#).contains("no \"key\""));
        assert!(why(&KeyFrom::Envelope, r#"{"key":7}"#).contains("not a string"));
        assert!(why(&KeyFrom::Envelope, r#"[1]"#).contains("not a {"));
        assert!(why(&KeyFrom::Envelope, r#"{"key":""}"#).contains("bad key"));
        assert!(why(&KeyFrom::Header("k".into()), "{}").contains("no \"k\" header"));
        assert!(why(&KeyFrom::Field("/id".into()), r#"{"x":1}"#).contains("no /id"));
    }

    #[test]
    fn header_and_field_take_the_whole_body() {
        let body = r#"{"id":42,"amount":3}"#;
        let by_header = KeyFrom::Header("op".into())
            .operation(&Msg(body, Some(("op", "order-42"))))
            .unwrap();
        let by_field = KeyFrom::Field("/id".into())
            .operation(&Msg(body, None))
            .unwrap();
        assert_eq!(by_header.key, "order-42");
        assert_eq!(by_field.key, "42");
        assert_eq!(by_header.payload, by_field.payload);
        assert_eq!(by_field.payload, Payload::parse(body).unwrap());
    }

    #[test]
    fn key_from_parses_and_prints() {
        for text in ["envelope", "header:op-key", "field:/order/id"] {
            assert_eq!(text.parse::<KeyFrom>().unwrap().to_string(), text);
        }
        for bad in ["", "header:", "field:id", "body"] {
            assert!(bad.parse::<KeyFrom>().is_err(), "{bad}");
        }
    }
}
