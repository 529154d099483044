//! Values read from the environment: kept out of Debug output and blanked
//! out of messages; and the HMAC signing that uses one.

use std::collections::BTreeMap;

use reqwest::header::HeaderName;

/// HMAC-SHA256 of each send's body in a header.
#[derive(Clone)]
pub struct Signing {
    /// The header.
    pub header: HeaderName,
    /// Before the hex digest.
    pub prefix: String,
    pub(super) secret: String,
}

impl std::fmt::Debug for Signing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signing")
            .field("header", &self.header)
            .field("prefix", &self.prefix)
            .field("secret", &"[secret]")
            .finish()
    }
}

impl Signing {
    /// The header value for `body`.
    pub fn sign(&self, body: &[u8]) -> String {
        use hmac::{Hmac, Mac};
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(self.secret.as_bytes())
            .expect("HMAC takes a key of any length");
        mac.update(body);
        format!(
            "{}{}",
            self.prefix,
            hex::encode(mac.finalize().into_bytes())
        )
    }
}

/// The values of the environment variables a shape names. They are
/// secrets: shown nowhere, and blanked out of every message.
#[derive(Clone, Default)]
pub struct Secrets(pub(super) BTreeMap<String, String>);

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

impl Secrets {
    /// The values by variable name.
    pub fn values(&self) -> &BTreeMap<String, String> {
        &self.0
    }

    /// `text` with every secret value replaced by `[secret]`.
    pub fn redact(&self, text: String) -> String {
        self.0
            .values()
            .filter(|v| !v.is_empty())
            .fold(text, |t, secret| t.replace(secret.as_str(), "[secret]"))
    }
}
