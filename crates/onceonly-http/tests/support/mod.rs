//! A destination written on a bare TCP socket, for answers no framework
//! would send: a body far longer than any limit (declared by
//! Content-Length, or chunked without end). It records each request's head
//! and counts the bytes it managed to write.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the server answers.
#[derive(Debug, Clone)]
pub enum Reply {
    /// `status` with this body.
    Body(u16, String),
    /// `status` declaring `Content-Length: length`, then writing that many
    /// bytes of `{"id":"a1","pad":"xxxx...` (never valid JSON).
    Huge(u16, u64),
    /// `status`, chunked, chunks of `{"id":"a1"` padding for ever.
    Endless(u16),
}

/// A running server.
pub struct RawServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Each request's head (request line and headers), lower-cased names.
    pub heads: Arc<Mutex<Vec<String>>>,
    /// Body bytes written to clients, all requests together.
    pub written: Arc<AtomicU64>,
}

impl RawServer {
    /// Listens on `ip` (a free port) answering every request with `reply`.
    pub async fn start(ip: &str, reply: Reply) -> Self {
        let listener = TcpListener::bind((ip, 0)).await.expect("bind");
        let addr = listener.local_addr().unwrap();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let written = Arc::new(AtomicU64::new(0));
        let (h, w) = (heads.clone(), written.clone());
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (h, w, reply) = (h.clone(), w.clone(), reply.clone());
                tokio::spawn(async move { serve(socket, reply, h, w).await });
            }
        });
        Self {
            addr,
            heads,
            written,
        }
    }

    /// `http://ADDR`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How many requests arrived.
    pub fn requests(&self) -> usize {
        self.heads.lock().unwrap().len()
    }
}

async fn serve(
    mut socket: TcpStream,
    reply: Reply,
    heads: Arc<Mutex<Vec<String>>>,
    written: Arc<AtomicU64>,
) {
    let Some(head) = read_head(&mut socket).await else {
        return;
    };
    heads.lock().unwrap().push(head);
    let reason = "X";
    match reply {
        Reply::Body(status, body) => {
            let text = format!(
                "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(text.as_bytes()).await;
        }
        Reply::Huge(status, length) => {
            let head = format!(
                "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {length}\r\nconnection: close\r\n\r\n{{\"id\":\"a1\",\"pad\":\""
            );
            if socket.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let block = vec![b'x'; 64 * 1024];
            let mut left = length.saturating_sub(18);
            while left > 0 {
                let n = left.min(block.len() as u64) as usize;
                if socket.write_all(&block[..n]).await.is_err() {
                    return;
                }
                written.fetch_add(n as u64, Ordering::Relaxed);
                left -= n as u64;
            }
        }
        Reply::Endless(status) => {
            let head = format!(
                "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
            );
            if socket.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let first = b"{\"id\":\"a1\",\"pad\":\"";
            let chunk = |data: &[u8]| {
                let mut c = format!("{:x}\r\n", data.len()).into_bytes();
                c.extend_from_slice(data);
                c.extend_from_slice(b"\r\n");
                c
            };
            if socket.write_all(&chunk(first)).await.is_err() {
                return;
            }
            let block = chunk(&vec![b'x'; 64 * 1024]);
            loop {
                if socket.write_all(&block).await.is_err() {
                    return;
                }
                written.fetch_add(64 * 1024, Ordering::Relaxed);
            }
        }
    }
}

/// The request's head; its body (if any) is read and dropped.
async fn read_head(socket: &mut TcpStream) -> Option<String> {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut have = data.len() - end;
    while have < length {
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 {
            break;
        }
        have += n;
    }
    Some(head)
}
