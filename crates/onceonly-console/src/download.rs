//! An operation's payload or result, whole, as a JSON file: the operation
//! page shows only the first part of a large one.

use axum::extract::{Query, State};
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use onceonly::operator::OperatorStore;
use onceonly::{Error, Record};
use serde::Deserialize;

use crate::auth::Operator;
use crate::error::ConsoleError;
use crate::Shared;

#[derive(Deserialize)]
pub(crate) struct OpQuery {
    job: String,
    key: String,
}

/// GET /op/payload?job=J&key=K
pub(crate) async fn payload<S: OperatorStore>(
    app: State<Shared<S>>,
    op: Operator,
    q: Query<OpQuery>,
) -> Result<Response, ConsoleError> {
    download(app, op, q, "payload", |r| r.payload).await
}

/// GET /op/result?job=J&key=K
pub(crate) async fn result<S: OperatorStore>(
    app: State<Shared<S>>,
    op: Operator,
    q: Query<OpQuery>,
) -> Result<Response, ConsoleError> {
    download(app, op, q, "result", |r| r.result).await
}

async fn download<S: OperatorStore>(
    State(app): State<Shared<S>>,
    _logged_in: Operator,
    Query(q): Query<OpQuery>,
    part: &str,
    pick: fn(Record) -> Option<String>,
) -> Result<Response, ConsoleError> {
    let record = match onceonly::ops::get(&app.store, &q.job, &q.key).await {
        Ok(snap) => snap.record,
        Err(e @ Error::NotFound { .. }) => {
            return Err(ConsoleError::NotFound(format!(
                "{e}: no record (purged, or never enqueued or claimed)"
            )))
        }
        Err(e) => return Err(e.into()),
    };
    let Some(json) = pick(record) else {
        return Err(ConsoleError::NotFound(format!(
            "{}:{} has no {part}",
            q.job, q.key
        )));
    };
    // A fixed file name: the job type and key may hold any character.
    let disposition = format!("attachment; filename=\"onceonly-{part}.json\"");
    Ok((
        [
            (CONTENT_TYPE, "application/json".to_owned()),
            (CONTENT_DISPOSITION, disposition),
        ],
        json,
    )
        .into_response())
}
