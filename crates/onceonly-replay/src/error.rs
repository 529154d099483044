//! The harness's one error type.

/// What can stop the harness itself (a scenario whose job misbehaves is not
/// an error: it is a failed entry in the [`crate::Report`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The store or the guard refused (bad spec, unreachable database, ...).
    #[error(transparent)]
    Store(#[from] onceonly::Error),

    /// A worker process could not be started, did not reach its point, or
    /// could not be killed.
    #[error("worker process: {0}")]
    Worker(String),

    /// The job's own code (its probe, its naive version) failed.
    #[error("job: {0}")]
    Job(String),

    /// The harness pauses a worker inside the guard's fault hook, which
    /// needs a multi-thread tokio runtime.
    #[error("the replay harness needs a multi-thread tokio runtime (use #[tokio::test(flavor = \"multi_thread\")] or the default #[tokio::main])")]
    Runtime,
}

/// `Result` with the harness's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
