//! The one error type of the protocol crate.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::fault::FaultPoint;
use crate::record::{Record, UnknownState};

/// A boxed error from a local effect (the source of [`Error::LocalEffect`]).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Everything that can go wrong while guarding an operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Input that can never be valid: an empty or oversized key, a bad job type,
    /// a payload that is not JSON.
    #[error("invalid input: {0}")]
    Invalid(String),

    /// The same (job type, operation key) arrived with another payload.
    /// A repeat carries the same payload; this is a different operation reusing a key.
    #[error("operation {job_type}:{op_key} exists with another payload (stored fingerprint {stored}, this one {offered})")]
    PayloadMismatch {
        /// Job type of the operation.
        job_type: String,
        /// Operation key that was reused.
        op_key: String,
        /// Fingerprint of the payload already recorded.
        stored: String,
        /// Fingerprint of the payload offered now.
        offered: String,
    },

    /// This worker no longer holds the claim: another worker took it over or an
    /// operator changed the row. Nothing was written; the row is as it now stands.
    #[error("lost the claim on {}:{} (held token {token}); the row is now {} with token {}", record.job_type, record.op_key, record.state, record.token)]
    LostClaim {
        /// The token this worker held.
        token: i64,
        /// The row as it now stands.
        record: Box<Record>,
    },

    /// A fenced write expected the row in one state and found it changed.
    #[error("{}:{} moved meanwhile: it is now {} with token {} (expected token {expected_token})", record.job_type, record.op_key, record.state, record.token)]
    Moved {
        /// The token the caller expected.
        expected_token: i64,
        /// The row as it now stands.
        record: Box<Record>,
    },

    /// No record for this job type and key.
    #[error("no operation {job_type}:{op_key}")]
    NotFound {
        /// Job type asked for.
        job_type: String,
        /// Operation key asked for.
        op_key: String,
    },

    /// A timing rule of docs/DESIGN.md section 4 is broken; the worker must not start.
    #[error("timing rule broken: {0}")]
    Timing(String),

    /// The database could not be reached. The URL has its password redacted.
    #[error("database {url} unreachable: {reason}")]
    Unreachable {
        /// The URL, password redacted.
        url: String,
        /// What the driver said.
        reason: String,
    },

    /// The database refused or failed a statement; [`DbError::kind`] says
    /// how (a constraint, a serialization failure, a timeout, other), and
    /// its source is the driver's error.
    #[error(transparent)]
    Db(#[from] DbError),

    /// A database error known only by its text (callers outside the stores
    /// that have no kind to give; the stores return [`Error::Db`]).
    #[error("database error: {0}")]
    Database(String),

    /// A row kept changing under an operation that re-reads and retries
    /// (a cancel racing workers); nothing was written. Try again.
    #[error("{job_type}:{op_key} kept changing while {doing}; try again")]
    Contended {
        /// Job type.
        job_type: String,
        /// Operation key.
        op_key: String,
        /// What was being done.
        doing: &'static str,
    },

    /// A fault injected at a named point (tests and the replay harness): the
    /// worker stopped there as if its process had died.
    #[error("injected crash at {0}")]
    InjectedCrash(FaultPoint),

    /// A local effect returned an error: its transaction rolled back, so
    /// neither its writes nor the claim were kept. The user's own error is
    /// the source.
    #[error("local effect of {job_type}:{op_key} failed, its transaction rolled back: {source}")]
    LocalEffect {
        /// Job type of the operation.
        job_type: String,
        /// Operation key.
        op_key: String,
        /// What the effect returned.
        #[source]
        source: BoxError,
    },

    /// The effect did not finish within the job timeout and was stopped.
    #[error("effect timed out after {0:?}")]
    Timeout(Duration),
}

/// `Result` with the protocol's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How a database statement failed: what the caller can do next depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DbErrorKind {
    /// A constraint refused the write (unique, not null, check, foreign key).
    Constraint,
    /// A serialization failure or deadlock (PostgreSQL), or the file busy
    /// or locked (SQLite): the transaction may be retried.
    Serialization,
    /// A statement, lock or pool wait timed out.
    Timeout,
    /// The database refuses this for good: it is read-only, the user lacks
    /// the privilege, or a table or schema is missing. Retrying cannot
    /// help; a person must mend the database (a worker stops, naming it).
    Permanent,
    /// Anything else (a bad row, a driver fault, a stopped writer).
    Other,
}

impl fmt::Display for DbErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DbErrorKind::Constraint => "constraint violated",
            DbErrorKind::Serialization => "serialization failure",
            DbErrorKind::Timeout => "timed out",
            DbErrorKind::Permanent => "refused for good",
            DbErrorKind::Other => "database error",
        })
    }
}

/// A database error with its kind and its cause. Cheap to clone (the
/// cause is shared), so one failed batch statement can fail each item.
#[derive(Debug, Clone)]
pub struct DbError {
    kind: DbErrorKind,
    message: String,
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl DbError {
    /// An error of `kind`, saying `message` (what was being done), caused by `source`.
    pub fn new(
        kind: DbErrorKind,
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            kind,
            message: message.into(),
            source: Some(Arc::new(source)),
        }
    }

    /// An error of `kind` with no underlying cause.
    pub fn msg(kind: DbErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// How it failed.
    pub fn kind(&self) -> DbErrorKind {
        self.kind
    }

    /// What was being done, and the driver's words.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for DbError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<UnknownState> for Error {
    fn from(e: UnknownState) -> Self {
        Error::Invalid(e.to_string())
    }
}

impl Error {
    /// A database error of kind [`DbErrorKind::Other`] with no driver cause
    /// (a statement that answered what it never should).
    pub fn db_other(message: impl Into<String>) -> Error {
        Error::Db(DbError::msg(DbErrorKind::Other, message))
    }

    /// Whether the database refuses for good ([`DbErrorKind::Permanent`]:
    /// read-only, permission denied, a table missing), so that retrying
    /// cannot help. A lost connection or a busy file is not: it passes.
    pub fn is_permanent_db_error(&self) -> bool {
        self.db_kind() == Some(DbErrorKind::Permanent)
    }

    /// The database error's kind, when this is one ([`Error::Db`]).
    pub fn db_kind(&self) -> Option<DbErrorKind> {
        match self {
            Error::Db(e) => Some(e.kind()),
            _ => None,
        }
    }
}
