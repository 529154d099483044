//! The one error type of the protocol crate.

use std::time::Duration;

use crate::record::Record;

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

    /// Any other database error.
    #[error("database error: {0}")]
    Database(String),

    /// A fault injected at a named point (tests and the replay harness): the
    /// worker stopped there as if its process had died.
    #[error("injected crash at {0}")]
    InjectedCrash(crate::fault::FaultPoint),

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
        source: crate::guard::BoxError,
    },

    /// The effect did not finish within the job timeout and was stopped.
    #[error("effect timed out after {0:?}")]
    Timeout(Duration),
}

/// `Result` with the protocol's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
