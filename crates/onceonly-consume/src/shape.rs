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

/// The largest body a consumer takes, in bytes: 256 KiB, SQS's classic
/// message limit. The payload is stored in the operation record and sent
/// to the destination; a larger body is poison, its size named.
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// Why a message can never be processed (it goes to the dead letters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Poison {
    /// The reason, for the log line and the dead letter.
    pub reason: String,
    /// The key as found when there was one but it was unusable (a bad key,
    /// a non-string value: its JSON text); for the log line.
    pub key: Option<String>,
}

impl Poison {
    fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            key: None,
        }
    }

    fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }
}

impl fmt::Display for Poison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl KeyFrom {
    /// The operation a message carries, or why it has none.
    pub fn operation(&self, message: &impl Message) -> Result<Operation, Poison> {
        let size = message.body().len();
        if size > MAX_BODY_BYTES {
            return Err(Poison::new(format!(
                "the body is {size} bytes, over the limit of {MAX_BODY_BYTES} bytes (256 KiB)"
            )));
        }
        let body: Value = serde_json::from_slice(message.body())
            .map_err(|e| Poison::new(format!("the body is not JSON: {e}")))?;
        let (key, payload) = match self {
            KeyFrom::Envelope => envelope(body)?,
            KeyFrom::Header(name) => {
                if let Some(why) = message.header_unusable(name) {
                    return Err(Poison::new(format!("no key: {name:?} is {why}")));
                }
                let key = message.header(name).ok_or_else(|| {
                    Poison::new(format!("no key: the message has no {name:?} header"))
                })?;
                (key, Payload::from_value(&body))
            }
            KeyFrom::Field(pointer) => {
                let key = match body.pointer(pointer) {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Number(n)) => n.to_string(),
                    Some(other) => {
                        return Err(Poison::new(format!(
                            "no key: the body's {pointer} is {other}, not a string or number"
                        ))
                        .with_key(other.to_string()))
                    }
                    None => return Err(Poison::new(format!("no key: the body has no {pointer}"))),
                };
                (key, Payload::from_value(&body))
            }
        };
        if let Err(e) = validate_op_key(&key) {
            return Err(Poison::new(format!("bad key: {e}")).with_key(key));
        }
        Ok(Operation { key, payload })
    }
}

fn envelope(body: Value) -> Result<(String, Payload), Poison> {
    let Value::Object(mut fields) = body else {
        return Err(Poison::new(
            "no key: the body is not a {\"key\": ..., \"payload\": ...} object",
        ));
    };
    let key = match fields.remove("key") {
        Some(Value::String(s)) => s,
        Some(other) => {
            return Err(
                Poison::new(format!("no key: \"key\" is {other}, not a string"))
                    .with_key(other.to_string()),
            )
        }
        None => return Err(Poison::new("no key: the body has no \"key\"")),
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
        shape.operation(&Msg(body, None)).unwrap_err().reason
    }

    #[test]
    fn a_bad_key_is_kept_for_the_log_line() {
        let bad = KeyFrom::Envelope
            .operation(&Msg("{\"key\":\"ord\\u0007er\"}", None))
            .unwrap_err();
        assert!(bad.reason.starts_with("bad key: "), "{}", bad.reason);
        assert_eq!(bad.key.as_deref(), Some("ord\u{7}er"));
        let number = KeyFrom::Envelope
            .operation(&Msg(r#"{"key":7}"#, None))
            .unwrap_err();
        assert_eq!(number.key.as_deref(), Some("7"));
        let missing = KeyFrom::Envelope
            .operation(&Msg(r#"{"payload":1}"#, None))
            .unwrap_err();
        assert_eq!(missing.key, None);
    }

    #[test]
    fn a_body_over_256_kib_is_poison_naming_its_size() {
        let at_limit = format!(
            "{{\"key\":\"k\",\"payload\":\"{}\"}}",
            "x".repeat(MAX_BODY_BYTES - 30)
        );
        assert!(at_limit.len() <= MAX_BODY_BYTES);
        let at_limit: &'static str = Box::leak(at_limit.into_boxed_str());
        assert!(KeyFrom::Envelope.operation(&Msg(at_limit, None)).is_ok());
        let over = format!(
            "{{\"key\":\"k\",\"payload\":\"{}\"}}",
            "x".repeat(MAX_BODY_BYTES)
        );
        let size = over.len();
        let over: &'static str = Box::leak(over.into_boxed_str());
        let why = why(&KeyFrom::Envelope, over);
        assert_eq!(
            why,
            format!("the body is {size} bytes, over the limit of 262144 bytes (256 KiB)")
        );
    }

    #[test]
    fn an_unusable_attribute_names_its_type() {
        struct NumberAttr;
        impl Message for NumberAttr {
            fn body(&self) -> &[u8] {
                b"{}"
            }
            fn header(&self, _: &str) -> Option<String> {
                None
            }
            fn header_unusable(&self, _: &str) -> Option<String> {
                Some("a Number attribute; an operation key must be a String attribute".into())
            }
            fn id(&self) -> String {
                "m1".into()
            }
            fn deliveries(&self) -> u64 {
                1
            }
        }
        let why = KeyFrom::Header("op".into())
            .operation(&NumberAttr)
            .unwrap_err()
            .reason;
        assert_eq!(
            why,
            "no key: \"op\" is a Number attribute; an operation key must be a String attribute"
        );
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
