//! Which SQS message attributes can carry an operation key
//! (`--key-from header:NAME`): String ones only (`String` or a custom
//! `String.x` type). A Number attribute is text too, but SQS may change how
//! it is written (`42` vs `42.0`), and a Binary one is not text; either is
//! poison with its type named, not silently read.

/// The key text of an attribute of `data_type`, or why it cannot be one.
#[cfg_attr(not(feature = "sqs"), allow(dead_code))]
pub(crate) fn key_text(data_type: &str, string_value: Option<&str>) -> Result<String, String> {
    let is_string = data_type == "String" || data_type.starts_with("String.");
    match string_value {
        Some(text) if is_string => Ok(text.to_owned()),
        _ => Err(format!(
            "a {data_type} attribute; an operation key must be a String attribute"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_string_attributes_carry_a_key() {
        assert_eq!(key_text("String", Some("order-1")).unwrap(), "order-1");
        assert_eq!(key_text("String.uuid", Some("u-1")).unwrap(), "u-1");
        let number = key_text("Number", Some("42")).unwrap_err();
        assert!(number.contains("a Number attribute"), "{number}");
        assert!(number.contains("must be a String attribute"), "{number}");
        let binary = key_text("Binary", None).unwrap_err();
        assert!(binary.contains("a Binary attribute"), "{binary}");
    }
}
