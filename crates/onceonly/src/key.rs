//! Identity of an operation: job type, operation key, payload fingerprint.

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// Longest operation key accepted, in bytes.
pub const MAX_KEY_BYTES: usize = 512;
/// Longest job type accepted, in bytes.
pub const MAX_JOB_TYPE_BYTES: usize = 128;

/// Checks a job type: `[A-Za-z0-9_.-]+`, at most [`MAX_JOB_TYPE_BYTES`].
pub fn validate_job_type(job_type: &str) -> Result<()> {
    if job_type.is_empty() {
        return Err(Error::Invalid("job type is empty".into()));
    }
    if job_type.len() > MAX_JOB_TYPE_BYTES {
        return Err(Error::Invalid(format!(
            "job type is {} bytes, the limit is {MAX_JOB_TYPE_BYTES}",
            job_type.len()
        )));
    }
    if let Some(bad) = job_type
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Err(Error::Invalid(format!(
            "job type {job_type:?} has {bad:?}; only letters, digits, '_', '.' and '-' are allowed"
        )));
    }
    Ok(())
}

/// Checks an operation key: non-empty UTF-8 of at most [`MAX_KEY_BYTES`],
/// without control characters (Unicode category Cc: U+0000-U+001F and
/// U+007F-U+009F) and not beginning or ending with a space. A key travels in
/// an HTTP header (`Idempotency-Key`), in log lines and on the operator's
/// screen: a header cannot carry a control character, and its value loses
/// the spaces at its ends, so `"a "` would reach the destination as `"a"`,
/// another operation's key. Every client refuses the same keys
/// (`protocol/corpus/keys.json`).
pub fn validate_op_key(op_key: &str) -> Result<()> {
    if op_key.is_empty() {
        return Err(Error::Invalid("operation key is empty".into()));
    }
    if op_key.len() > MAX_KEY_BYTES {
        return Err(Error::Invalid(format!(
            "operation key is {} bytes, the limit is {MAX_KEY_BYTES}",
            op_key.len()
        )));
    }
    if let Some((at, bad)) = op_key.char_indices().find(|(_, c)| c.is_control()) {
        return Err(Error::Invalid(format!(
            "operation key has the control character U+{:04X} at byte {at}; keys may not contain control characters",
            bad as u32
        )));
    }
    if op_key.starts_with(' ') || op_key.ends_with(' ') {
        return Err(Error::Invalid(format!(
            "operation key {op_key:?} begins or ends with a space; an HTTP header would drop it"
        )));
    }
    Ok(())
}

/// The key a destination dedups on, the same for every attempt of one
/// operation: `JOB_TYPE:OP_KEY`.
pub fn idempotency_key(job_type: &str, op_key: &str) -> String {
    format!("{job_type}:{op_key}")
}

/// A payload as onceonly stores it: canonical JSON text plus its fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payload {
    /// Canonical JSON (object keys sorted), or `None` for a job without input.
    pub json: Option<String>,
    /// Hex SHA-256 of the canonical JSON; of the empty string when there is none.
    pub fingerprint: String,
}

impl Payload {
    /// No payload. Every delivery of the operation must then carry none.
    pub fn none() -> Self {
        Self::from_canonical(None)
    }

    /// Parses JSON text, naming the problem when it is not JSON or when an
    /// object in it names a key twice.
    pub fn parse(text: &str) -> Result<Self> {
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| Error::Invalid(format!("payload is not valid JSON: {e}")))?;
        crate::json_keys::refuse_duplicate_keys(text)?;
        Ok(Self::from_value(&value))
    }

    /// From a JSON value. Key order does not change the fingerprint.
    pub fn from_value(value: &serde_json::Value) -> Self {
        // serde_json's Map is ordered by key, so to_string is canonical.
        Self::from_canonical(Some(value.to_string()))
    }

    fn from_canonical(json: Option<String>) -> Self {
        let digest = Sha256::digest(json.as_deref().unwrap_or("").as_bytes());
        Self {
            json,
            fingerprint: hex::encode(digest),
        }
    }

    /// The payload a record holds, as stored.
    pub fn stored(record: &crate::record::Record) -> Self {
        Self {
            json: record.payload.clone(),
            fingerprint: record.fingerprint.clone(),
        }
    }

    /// The payload as a JSON value (`null` when there is none).
    pub fn value(&self) -> serde_json::Value {
        self.json
            .as_deref()
            .and_then(|j| serde_json::from_str(j).ok())
            .unwrap_or(serde_json::Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_types_follow_the_documented_alphabet() {
        assert!(validate_job_type("send_email.v2-x").is_ok());
        assert!(validate_job_type("").is_err());
        assert!(validate_job_type("send email").is_err());
        assert!(validate_job_type("a:b").is_err());
    }

    #[test]
    fn keys_are_non_empty_and_at_most_512_bytes() {
        assert!(validate_op_key("order-1").is_ok());
        assert!(validate_op_key(&"é".repeat(256)).is_ok());
        assert!(validate_op_key("").is_err());
        assert!(validate_op_key(&"x".repeat(513)).is_err());
        assert!(validate_op_key("a\0b").is_err());
        for bad in ["a\nb", "\x01", "a\x7f", "a\r\n", "a\u{85}"] {
            let err = validate_op_key(bad).unwrap_err().to_string();
            assert!(err.contains("control character"), "{bad:?}: {err}");
        }
        assert!(validate_op_key("a b").is_ok());
        assert!(validate_op_key(" a").is_err());
        assert!(validate_op_key("a ").is_err());
    }

    #[test]
    fn fingerprint_ignores_key_order_but_not_values() {
        let a = Payload::parse(r#"{"a":1,"b":2}"#).unwrap();
        let b = Payload::parse(r#"{ "b":2, "a":1 }"#).unwrap();
        let c = Payload::parse(r#"{"a":1,"b":3}"#).unwrap();
        assert_eq!(a.fingerprint, b.fingerprint);
        assert_ne!(a.fingerprint, c.fingerprint);
        assert_ne!(a.fingerprint, Payload::none().fingerprint);
    }

    #[test]
    fn malformed_payload_names_the_problem() {
        let err = Payload::parse("{not json").unwrap_err().to_string();
        assert!(err.contains("not valid JSON"), "{err}");
    }
}
