//! An HTTPS listener for axum: TCP accepted here, each TLS handshake done on
//! its own task (a slow or failed handshake blocks no other connection),
//! finished streams handed to `axum::serve`.

use std::net::SocketAddr;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// A server certificate chain and its key, both PEM.
#[derive(Debug, Clone)]
pub struct TlsIdentity {
    /// The certificate chain, leaf first.
    pub cert_chain_pem: String,
    /// The leaf's private key.
    pub key_pem: String,
}

impl TlsIdentity {
    /// Reads the chain and key from two PEM files.
    pub fn from_files(cert: &std::path::Path, key: &std::path::Path) -> std::io::Result<Self> {
        Ok(Self {
            cert_chain_pem: std::fs::read_to_string(cert)?,
            key_pem: std::fs::read_to_string(key)?,
        })
    }

    fn server_config(&self) -> std::io::Result<rustls::ServerConfig> {
        let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
        let chain = CertificateDer::pem_slice_iter(self.cert_chain_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(format!("certificate chain: {e}")))?;
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
            .map_err(|e| invalid(format!("private key: {e}")))?;
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| invalid(e.to_string()))
    }
}

/// Accepted TLS connections, for `axum::serve`.
pub struct TlsListener {
    addr: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<tokio::net::TcpStream>, SocketAddr)>,
}

impl TlsListener {
    /// Serves TLS with `identity` on `listener`.
    pub fn new(listener: TcpListener, identity: &TlsIdentity) -> std::io::Result<Self> {
        let acceptor = TlsAcceptor::from(Arc::new(identity.server_config()?));
        let addr = listener.local_addr()?;
        let (tx, ready) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let Ok((tcp, peer)) = listener.accept().await else {
                    // Out of file descriptors, say: let some close.
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    continue;
                };
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    // A client that does not trust us hangs up here.
                    if let Ok(tls) = acceptor.accept(tcp).await {
                        let _ = tx.send((tls, peer)).await;
                    }
                });
            }
        });
        Ok(Self { addr, ready })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<tokio::net::TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(conn) => conn,
            // The accept loop never ends while the listener lives.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}
