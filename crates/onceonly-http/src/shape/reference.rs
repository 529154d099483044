//! Where an answer carries the created item's reference.

use reqwest::header::{HeaderMap, HeaderName};

/// Where an answer carries the item's reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reference {
    /// A JSON pointer into the body (a string or a number).
    JsonPointer(String),
    /// A response header; a relative URL (Location) is made absolute.
    Header(HeaderName),
    /// The answer carries none (a webhook's 200).
    None,
}

impl Reference {
    pub(super) fn parse(text: &str, field: &str) -> Result<Self, String> {
        if text == "none" {
            Ok(Self::None)
        } else if let Some(name) = text.strip_prefix("header:") {
            HeaderName::try_from(name.trim())
                .map(Self::Header)
                .map_err(|_| format!("{field}: {name:?} is not a header name"))
        } else if text.starts_with('/') {
            Ok(Self::JsonPointer(text.to_owned()))
        } else {
            Err(format!(
                "{field}: {text:?} is not a JSON pointer (\"/id\"), \"header:NAME\" or \"none\""
            ))
        }
    }

    /// The reference in an answer, if it is there.
    pub(super) fn find(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        url: Option<&reqwest::Url>,
    ) -> Option<String> {
        match self {
            Self::JsonPointer(pointer) => {
                let json: serde_json::Value = serde_json::from_slice(body).ok()?;
                match json.pointer(pointer)? {
                    serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
                    serde_json::Value::Number(n) => Some(n.to_string()),
                    _ => None,
                }
            }
            Self::Header(name) => {
                let value = headers.get(name)?.to_str().ok()?.trim();
                if value.is_empty() {
                    return None;
                }
                match url.and_then(|u| u.join(value).ok()) {
                    Some(absolute) if *name == reqwest::header::LOCATION => {
                        Some(absolute.to_string())
                    }
                    _ => Some(value.to_owned()),
                }
            }
            Self::None => None,
        }
    }

    /// The reference is read from the body (a cut body cannot give it).
    pub(super) fn in_body(&self) -> bool {
        matches!(self, Self::JsonPointer(_))
    }

    /// How a missing reference is named in an error.
    pub(super) fn describe(&self) -> String {
        match self {
            Self::JsonPointer(p) if p == "/id" => "an id".to_owned(),
            Self::JsonPointer(p) => format!("a reference at JSON pointer {p}"),
            Self::Header(h) => format!("a {h} header"),
            Self::None => "a reference".to_owned(),
        }
    }
}
