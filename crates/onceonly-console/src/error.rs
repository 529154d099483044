//! What a page answers when it cannot show what was asked.

use askama::Template;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};

use crate::filters;

/// Why the console refused to start or a page failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsoleError {
    /// The settings are unsafe or invalid (listening beyond loopback without
    /// a token, a short token).
    #[error("{0}")]
    Refused(String),
    /// Listening or serving failed.
    #[error("console: {0}")]
    Io(#[source] std::io::Error),
    /// The database answered with an error.
    #[error(transparent)]
    Database(#[from] onceonly::Error),
    /// The request names something that does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The request is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// The request is not allowed (read-only, a failed CSRF check).
    #[error("{0}")]
    Forbidden(String),
}

#[derive(Template)]
#[template(path = "message.html")]
struct Message<'a> {
    title: &'a str,
    text: String,
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        let (status, title) = match &self {
            ConsoleError::NotFound(_) => (StatusCode::NOT_FOUND, "Not found"),
            ConsoleError::BadRequest(_) => (StatusCode::BAD_REQUEST, "Bad request"),
            ConsoleError::Forbidden(_) => (StatusCode::FORBIDDEN, "Refused"),
            ConsoleError::Refused(_) => (StatusCode::FORBIDDEN, "Refused"),
            ConsoleError::Io(_) | ConsoleError::Database(_) => {
                tracing::error!(error = %self, "console page failed");
                (StatusCode::INTERNAL_SERVER_ERROR, "Error")
            }
        };
        let page = Message {
            title,
            text: self.to_string(),
        };
        match page.render() {
            Ok(html) => (status, Html(html)).into_response(),
            Err(_) => (status, self.to_string()).into_response(),
        }
    }
}
