//! Writes a test CA and a server certificate it signed into a directory:
//! `ca.pem`, `server.pem`, `server.key`. CI serves the test destination
//! with them (ONCEONLY_TEST_TLS_CERT/KEY) and trusts `ca.pem`
//! (SSL_CERT_FILE) to run the replay and crash tests over HTTPS.
//!
//! `cargo run -p onceonly-http --example test_ca -- DIR`

use onceonly_http::test_ca;

fn main() -> std::io::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .expect("usage: test_ca DIR (writes ca.pem, server.pem, server.key)");
    let dir = std::path::Path::new(&dir);
    std::fs::create_dir_all(dir)?;
    let ca = test_ca::make();
    std::fs::write(dir.join("ca.pem"), &ca.ca_pem)?;
    std::fs::write(dir.join("server.pem"), &ca.server.cert_chain_pem)?;
    std::fs::write(dir.join("server.key"), &ca.server.key_pem)?;
    println!("{}", dir.display());
    Ok(())
}
