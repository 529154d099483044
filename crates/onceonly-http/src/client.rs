//! The HTTP client every destination request goes through: rustls with the
//! system's trusted roots (rustls-native-certs, which also reads
//! `SSL_CERT_FILE` / `SSL_CERT_DIR`), plus an optional PEM file of extra
//! certificate authorities for private CAs (`--ca-cert`).

use std::path::Path;
use std::time::Duration;

/// A client with `request_timeout` per request, no redirects followed (a
/// redirect could resend a payload elsewhere), no proxy, and the CAs of
/// `ca_cert` trusted next to the system's.
pub fn build_client(
    request_timeout: Duration,
    ca_cert: Option<&Path>,
) -> onceonly::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .timeout(request_timeout)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy();
    if let Some(path) = ca_cert {
        for cert in read_ca_file(path)? {
            builder = builder.add_root_certificate(cert);
        }
    }
    builder
        .build()
        .map_err(|e| onceonly::Error::Invalid(format!("HTTP client: {}", error_chain(&e))))
}

/// The certificates of a PEM file, or an error naming the file.
fn read_ca_file(path: &Path) -> onceonly::Result<Vec<reqwest::Certificate>> {
    let shown = path.display();
    let pem = std::fs::read(path).map_err(|e| {
        onceonly::Error::Invalid(format!("--ca-cert {shown}: cannot read the file: {e}"))
    })?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
        onceonly::Error::Invalid(format!(
            "--ca-cert {shown}: not a PEM certificate file: {e}"
        ))
    })?;
    if certs.is_empty() {
        return Err(onceonly::Error::Invalid(format!(
            "--ca-cert {shown}: the file holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        )));
    }
    Ok(certs)
}

/// An error with its causes, which reqwest keeps out of its own message
/// (such as "invalid peer certificate: UnknownIssuer").
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}
