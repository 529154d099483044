//! Moving the WAL's pages into the database file, off the writer's path.
//!
//! By default SQLite checkpoints inside the COMMIT that crosses 1000 WAL
//! pages, and a checkpoint syncs the file: every caller waiting on that group
//! waited for the disk (p99 of a keyed operation at concurrency 16: 6.3 ms
//! with it, 1.0 ms without). Here a thread of its own, on a connection of its
//! own, runs a PASSIVE checkpoint (which never blocks the writer) shortly
//! after commits happened. The writer keeps an automatic checkpoint at a
//! larger size as a backstop, should this thread fall behind.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

/// How often the thread looks for new commits.
const EVERY: Duration = Duration::from_millis(100);

/// WAL pages after which the writer checkpoints by itself (about 40 MB).
pub(crate) const BACKSTOP_PAGES: i64 = 10_000;

/// Commits the writer made; the checkpointer runs when it moved.
#[derive(Debug, Default)]
pub(crate) struct Commits(AtomicU64);

impl Commits {
    pub(crate) fn count(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn seen(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Starts the thread; it ends once `commits` is dropped (the writer ended).
pub(crate) fn start(path: &Path, commits: &Arc<Commits>) -> Result<(), onceonly::BoxError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    let commits = Arc::downgrade(commits);
    std::thread::Builder::new()
        // At most 15 characters: the kernel cuts thread names there (top -H).
        .name("onceonly-ckpt".into())
        .spawn(move || run(&conn, &commits))?;
    Ok(())
}

fn run(conn: &Connection, commits: &Weak<Commits>) {
    let mut checkpointed_at = 0;
    loop {
        std::thread::sleep(EVERY);
        let Some(commits) = commits.upgrade() else {
            return;
        };
        let now = commits.seen();
        if now == checkpointed_at {
            continue;
        }
        checkpointed_at = now;
        // PASSIVE: copies what no reader still needs, waits for no one. A
        // failure is left to the next round and to the writer's backstop.
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::debug!(error = %e, "SQLite checkpoint failed; retrying later");
        }
    }
}
