//! A certificate authority made on the spot, and a server certificate it
//! signs for 127.0.0.1 and localhost: for the HTTPS tests, the relay
//! benchmark over HTTPS, and the `test_ca` example that CI uses to run the
//! replay and crash tests over HTTPS.

use crate::tls_listener::TlsIdentity;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};

/// A fresh CA (PEM) and a server identity it signed.
pub struct TestCa {
    /// The CA certificate, PEM: what a client must trust.
    pub ca_pem: String,
    /// The server's certificate and key.
    pub server: TlsIdentity,
}

/// Makes a CA and a server certificate for 127.0.0.1 and localhost.
/// Panics only if rcgen cannot sign (it always can with these parameters).
pub fn make() -> TestCa {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "onceonly test CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let mut server_params =
        CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
    server_params
        .distinguished_name
        .push(DnType::CommonName, "onceonly test destination");
    let server_key = KeyPair::generate().unwrap();
    let server = server_params.signed_by(&server_key, &ca, &ca_key).unwrap();
    TestCa {
        ca_pem: ca.pem(),
        server: TlsIdentity {
            cert_chain_pem: server.pem(),
            key_pem: server_key.serialize_pem(),
        },
    }
}
