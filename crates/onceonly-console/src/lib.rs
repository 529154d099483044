//! The onceonly operator console: held and stuck operations, resolved from a
//! web page.
//!
//! Server-rendered pages (axum, askama templates checked at compile time; no
//! script, no front-end build; the style sheet is in the binary): an
//! overview of counts and rates, the held and stuck lists, one operation with
//! its audit trail and the actions legal from its state. Every action calls
//! the same library functions as the CLI (`onceonly::ops`,
//! `onceonly::operator`), fenced on the state and token the page showed.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use onceonly_console::{Options, serve};
//! let store = onceonly_sqlite::SqliteStore::connect("sqlite://onceonly.db").await?;
//! let options = Options::new("sqlite://onceonly.db");
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8090").await?;
//! serve(store, options, listener).await?;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

mod actions;
mod auth;
mod download;
mod error;
mod filters;
mod pages;
mod reports;
mod server;
mod throttle;
mod view;

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::{get, post};
use axum::Router;
use onceonly::operator::OperatorStore;
use onceonly_http::HttpDestination;

pub use error::ConsoleError;
pub use throttle::LoginThrottle;

/// How the console runs. Its `Debug` output shows neither the token nor the
/// database's password.
#[derive(Clone)]
pub struct Options {
    /// The token a person gives at login. Required to listen beyond loopback.
    pub token: Option<String>,
    /// Show everything, change nothing: no action forms, every action refused.
    pub read_only: bool,
    /// Where a completed operation is withdrawn when cancelled.
    pub destination: Option<HttpDestination>,
    /// The database, as shown on pages and in log lines: its password
    /// masked, its query options left out (one may carry a password).
    pub database: String,
    /// How far back the overview counts finished records and audit events.
    pub window: Duration,
    /// Rows per page of the held and stuck lists.
    pub page_size: u32,
    /// The settings file (`onceonly.toml`) the check page reads, afresh on
    /// every view.
    pub config: Option<PathBuf>,
    /// The user's table the repeats page reports on (in the same database).
    pub repeats: Option<onceonly_tools::repeats::Request>,
    /// How long a connection may take to send a request's headers (from
    /// its start, or from the end of its previous request) before it is
    /// closed: a client holding half-sent requests holds no socket longer.
    pub header_timeout: Duration,
    /// How long a request's body may take to arrive whole; a slower one is
    /// answered 408 and its connection closed.
    pub body_timeout: Duration,
    /// How wrong tokens slow down the address they come from.
    pub login_throttle: LoginThrottle,
    /// The database URL itself, for the repeats report's own read-only
    /// connection; never shown or logged.
    db_url: Secret,
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("read_only", &self.read_only)
            .field(
                "destination",
                &self.destination.as_ref().map(|d| d.base_url()),
            )
            .field("database", &self.database)
            .field("window", &self.window)
            .field("page_size", &self.page_size)
            .field("config", &self.config)
            .field("repeats", &self.repeats)
            .field("header_timeout", &self.header_timeout)
            .field("body_timeout", &self.body_timeout)
            .field("login_throttle", &self.login_throttle)
            .finish_non_exhaustive()
    }
}

/// A string kept out of `Debug` output.
#[derive(Clone)]
struct Secret(String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl Options {
    /// Defaults for the database at `db_url`: no token, read-write, no
    /// destination, a one-hour window, 50 rows a page, 10 seconds for a
    /// request's headers and 10 for its body, the default login throttle.
    pub fn new(db_url: &str) -> Self {
        Self {
            token: None,
            read_only: false,
            destination: None,
            database: view::database_shown(db_url),
            window: Duration::from_secs(3600),
            page_size: 50,
            config: None,
            repeats: None,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            login_throttle: LoginThrottle::default(),
            db_url: Secret(db_url.to_owned()),
        }
    }
}

/// Refuses to listen at `addr` beyond loopback without a token: anyone who
/// can reach the port could resolve operations.
pub fn check_listen(addr: SocketAddr, options: &Options) -> Result<(), ConsoleError> {
    if !addr.ip().is_loopback() && options.token.is_none() {
        return Err(ConsoleError::Refused(format!(
            "refusing to listen on {addr} without a token: beyond loopback every page needs one \
             (set ONCEONLY_CONSOLE_TOKEN or --token), or listen on 127.0.0.1"
        )));
    }
    if options.token.as_deref().is_some_and(|t| t.trim().len() < 8) {
        return Err(ConsoleError::Refused(
            "the console token must be at least 8 characters".into(),
        ));
    }
    Ok(())
}

/// What every handler shares.
pub(crate) struct App<S> {
    pub store: S,
    pub options: Options,
    pub sessions: auth::Sessions,
    pub throttle: throttle::Throttle,
}

pub(crate) type Shared<S> = Arc<App<S>>;

/// The console's routes on `store`. Serve them with [`serve`]: it sets the
/// header read timeout and gives each request the client's address, which
/// the login throttle counts wrong tokens by.
pub fn router<S: OperatorStore + Clone>(store: S, options: Options) -> Router {
    let body_timeout = options.body_timeout;
    let app = Arc::new(App {
        store,
        sessions: auth::Sessions::default(),
        throttle: throttle::Throttle::new(options.login_throttle),
        options,
    });
    Router::new()
        .route("/", get(pages::overview::<S>))
        .route("/held", get(pages::held::<S>))
        .route("/stuck", get(pages::stuck::<S>))
        .route("/op", get(pages::operation::<S>))
        .route("/op/payload", get(download::payload::<S>))
        .route("/op/result", get(download::result::<S>))
        .route("/op/resolve", post(actions::resolve::<S>))
        .route("/op/cancel", post(actions::cancel::<S>))
        .route("/check", get(reports::check::<S>))
        .route("/repeats", get(reports::repeats::<S>))
        .route("/login", get(auth::login_page::<S>).post(auth::login::<S>))
        .route("/logout", post(auth::logout::<S>))
        .route("/console.css", get(view::stylesheet))
        .layer(axum::middleware::from_fn(move |req, next| {
            server::body_within(body_timeout, req, next)
        }))
        .layer(axum::middleware::map_response(view::security_headers))
        .with_state(app)
}

/// Serves the console on `listener` until the process stops, each
/// connection with [`Options::header_timeout`].
pub async fn serve<S: OperatorStore + Clone>(
    store: S,
    options: Options,
    listener: tokio::net::TcpListener,
) -> Result<(), ConsoleError> {
    let addr = listener.local_addr().map_err(ConsoleError::Io)?;
    check_listen(addr, &options)?;
    tracing::info!(%addr, read_only = options.read_only, database = %options.database, "console listening");
    let header_timeout = options.header_timeout;
    server::run(listener, router(store, options), header_timeout).await;
    Ok(())
}
