//! What a destination may answer: the rules an external reference and a
//! result meet before they are stored (docs/DESIGN.md section 6, "Answers"),
//! and how a value from outside is shown without letting its control
//! characters act on a terminal. The cases every client runs alike are in
//! `protocol/corpus/answers.json`.

use std::borrow::Cow;
use std::fmt;

/// The longest external reference stored, in bytes of UTF-8.
pub const MAX_REFERENCE_BYTES: usize = 2048;
/// The longest result stored, in bytes of its JSON text.
pub const MAX_RESULT_BYTES: usize = 65536;

/// Which part of an answer broke a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerPart {
    /// The external reference.
    Reference,
    /// The result (its JSON text as stored).
    Result,
}

/// An answer that breaks a rule: the destination broke the protocol, and
/// the value is not stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerError {
    /// Longer than the limit.
    TooLong {
        /// Which part.
        part: AnswerPart,
        /// Its length in bytes.
        bytes: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// Holds a control character.
    Control {
        /// Which part.
        part: AnswerPart,
        /// The character.
        found: char,
        /// Its byte offset.
        at: usize,
        /// The value's start, escaped for display.
        shown: String,
    },
}

impl AnswerError {
    /// The stable name of the broken rule (`too_long`, `control`), as the
    /// corpus names it.
    pub fn rule(&self) -> &'static str {
        match self {
            Self::TooLong { .. } => "too_long",
            Self::Control { .. } => "control",
        }
    }
}

impl fmt::Display for AnswerPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Reference => "external reference",
            Self::Result => "result",
        })
    }
}

impl fmt::Display for AnswerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLong { part, bytes, limit } => write!(
                f,
                "the destination's {part} is {bytes} bytes, over the limit of {limit}: \
                 it breaks the protocol and is not stored"
            ),
            Self::Control {
                part,
                found,
                at,
                shown,
            } => write!(
                f,
                "the destination's {part} holds control character U+{:04X} at byte {at} \
                 (\"{shown}\"): it breaks the protocol and is not stored",
                u32::from(*found)
            ),
        }
    }
}

impl std::error::Error for AnswerError {}

/// A control character in the sense of the answer rules and of
/// [`escape_controls`]: Unicode Cc (U+0000-U+001F, U+007F-U+009F) and the
/// bidirectional controls that reorder what a terminal shows (U+061C,
/// U+200E, U+200F, U+202A-U+202E, U+2066-U+2069).
pub fn is_control(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Checks an external reference: at most [`MAX_REFERENCE_BYTES`], no
/// control character.
pub fn check_reference(reference: &str) -> Result<(), AnswerError> {
    check(AnswerPart::Reference, reference, MAX_REFERENCE_BYTES)
}

/// Checks a result's JSON text as it would be stored: at most
/// [`MAX_RESULT_BYTES`], no control character (JSON's own escapes, such
/// as `\n`, are text and pass).
pub fn check_result(text: &str) -> Result<(), AnswerError> {
    check(AnswerPart::Result, text, MAX_RESULT_BYTES)
}

fn check(part: AnswerPart, text: &str, limit: usize) -> Result<(), AnswerError> {
    if text.len() > limit {
        return Err(AnswerError::TooLong {
            part,
            bytes: text.len(),
            limit,
        });
    }
    match text.char_indices().find(|(_, c)| is_control(*c)) {
        None => Ok(()),
        Some((at, found)) => Err(AnswerError::Control {
            part,
            found,
            at,
            shown: escape_controls(&shown_start(text)).into_owned(),
        }),
    }
}

/// The first 80 characters, for a message.
fn shown_start(text: &str) -> String {
    let mut s: String = text.chars().take(80).collect();
    if s.len() < text.len() {
        s.push('…');
    }
    s
}

/// `text` with every control character ([`is_control`]) written as an
/// escape: `\n`, `\r`, `\t`, `\0`, `\x1b` below U+0100, `\u{202e}` above.
/// Borrowed when there is nothing to escape. Every place that prints a
/// value from outside (a destination's answer, a key, an error) shows it
/// through this, so no byte of it moves the cursor, rings, or reorders
/// the line.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\0' => out.push_str("\\0"),
            c if is_control(c) && u32::from(c) < 0x100 => {
                out.push_str(&format!("\\x{:02x}", u32::from(c)))
            }
            c if is_control(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_moves_a_terminal_and_leaves_the_rest() {
        assert_eq!(
            escape_controls("a\0b\x1b[31mc\rd\ne\x07\u{202e}f"),
            "a\\0b\\x1b[31mc\\rd\\ne\\x07\\u{202e}f"
        );
        assert!(matches!(escape_controls("plain é 😀"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_message_names_the_rule_and_shows_the_value_escaped() {
        let e = check_reference("id\x1b[2J").unwrap_err();
        assert_eq!(e.rule(), "control");
        let text = e.to_string();
        assert!(text.contains("U+001B at byte 2"), "{text}");
        assert!(text.contains("id\\x1b[2J"), "{text}");
        assert!(!text.contains('\x1b'), "{text}");
        let long = "x".repeat(MAX_REFERENCE_BYTES + 1);
        assert!(check_reference(&long)
            .unwrap_err()
            .to_string()
            .contains("2049 bytes, over the limit of 2048"));
    }
}
