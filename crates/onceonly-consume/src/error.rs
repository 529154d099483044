//! The crate's error: a broker call that failed, a broken timing rule, bad
//! settings, or the guard's own error.

/// A boxed cause from a broker client.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What went wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A call to the broker failed; `what` names the call and the queue.
    #[error("{what}: {source}")]
    Broker {
        /// The call and the queue or stream it was for.
        what: String,
        /// The client's error.
        #[source]
        source: BoxError,
    },
    /// The broker's redelivery settings break docs/DESIGN.md section 4's
    /// rules against the job's timeout and lease; every broken rule is
    /// named with both values.
    #[error("refusing to consume: {0}")]
    Timing(String),
    /// Settings that cannot work (no dead-letter queue, a bad option).
    #[error("{0}")]
    Invalid(String),
    /// The guard's error.
    #[error(transparent)]
    Core(#[from] onceonly::Error),
}

impl Error {
    /// A failed broker call, keeping its cause.
    pub fn broker(what: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Error::Broker {
            what: what.into(),
            source: source.into(),
        }
    }
}

/// The crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
