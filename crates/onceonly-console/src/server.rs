//! The HTTP server under the console's routes. `axum::serve` sets no read
//! deadline, so a client that opens sockets and sends half a request holds
//! them as long as it likes; here each connection is served by hyper with
//! its header read timeout, and every request body must arrive whole
//! within a limit. Each request carries the peer's address
//! (`ConnectInfo`), which the login throttle keys on.

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use axum::http::header::CONNECTION;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tower::ServiceExt;

/// The largest request body the console reads: its forms are a few
/// hundred bytes.
pub(crate) const MAX_BODY_BYTES: usize = 64 * 1024;

/// Accepts connections on `listener` and serves `app` on each until the
/// process stops. A connection whose request headers have not all arrived
/// within `header_timeout` (counted from the connection, or from the end
/// of its previous request) is closed.
pub(crate) async fn run(listener: tokio::net::TcpListener, app: Router, header_timeout: Duration) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors, most likely: wait for some to
                // close rather than spin.
                tracing::warn!(error = %e, "console: accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let service = app
            .clone()
            .map_request(move |mut req: axum::http::Request<Incoming>| {
                req.extensions_mut().insert(ConnectInfo(peer));
                req
            });
        tokio::spawn(async move {
            let served = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service))
                .await;
            if let Err(e) = served {
                tracing::debug!(%peer, error = %e, "console: connection closed");
            }
        });
    }
}

/// Reads the request body whole, within `limit` and at most
/// [`MAX_BODY_BYTES`], before the handler runs. tower-http's body timeout
/// restarts at every chunk, so a client trickling a byte at a time would
/// never meet it; this is one deadline for the whole body.
pub(crate) async fn body_within(limit: Duration, req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    let peer = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    match tokio::time::timeout(limit, axum::body::to_bytes(body, MAX_BODY_BYTES)).await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Ok(Err(_)) => (
            StatusCode::PAYLOAD_TOO_LARGE,
            [(CONNECTION, "close")],
            format!("the request body is over {MAX_BODY_BYTES} bytes, or was cut short"),
        )
            .into_response(),
        Err(_) => {
            tracing::warn!(client = ?peer, ?limit, "console: request body not sent in time; connection closed");
            (
                StatusCode::REQUEST_TIMEOUT,
                [(CONNECTION, "close")],
                format!(
                    "the request body did not arrive within {}",
                    humantime::format_duration(limit)
                ),
            )
                .into_response()
        }
    }
}
