//! Template filters: `shown` writes a value from outside (a key, a
//! destination's reference or error, an owner) with its control characters
//! escaped (onceonly::escape_controls), before the HTML escaping every
//! value gets, so a bidi override or an ESC cannot disguise a row.

use std::fmt::Display;

/// `{{ value|shown }}`.
pub fn shown<T: Display>(value: T, _: &dyn askama::Values) -> askama::Result<String> {
    Ok(onceonly::escape_controls(&value.to_string()).into_owned())
}
