//! Bounded retry of work that met a deadlock (1213, the server rolled the
//! transaction back) or a lock wait timeout (1205). The work is run again
//! from its first statement, so a retried claim decides by its own
//! affected-row count, never by what the failed attempt did.
//!
//! Only work the store runs on its own connections is retried: in the
//! user's transaction a deadlock has rolled back the user's writes too, so
//! the error goes to the caller.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::errors::is_transient;

/// Attempts at most, the first included.
pub const MAX_ATTEMPTS: u32 = 5;

/// Runs `work` until it succeeds, fails otherwise, or has been tried
/// [`MAX_ATTEMPTS`] times; waits a little longer before each retry, and
/// counts each in `retries`.
pub(crate) async fn retried<T, F, Fut>(
    what: &str,
    retries: &AtomicU64,
    mut work: F,
) -> Result<T, sqlx::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, sqlx::Error>>,
{
    let mut attempt = 1;
    loop {
        match work().await {
            Err(e) if is_transient(&e) && attempt < MAX_ATTEMPTS => {
                tracing::debug!(what, attempt, error = %e, "retrying after a lock conflict");
                retries.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5 * u64::from(attempt))).await;
                attempt += 1;
            }
            done => return done,
        }
    }
}
