//! The store's own connection, on a thread of its own, committing in groups.
//!
//! sqlx-sqlite hops to a worker thread for every statement and pings the
//! connection on every pool release; at a few statements per operation those
//! hops, not SQLite, set the pace (about 2k guarded ops/s here). The writer
//! runs each call as one closure on one dedicated connection, and the calls
//! that arrive while it works share one `BEGIN IMMEDIATE ... COMMIT` (group
//! commit). Each call runs in its own savepoint, so a failing call undoes only
//! its own writes, and hears back only after the COMMIT: nothing is reported
//! written that is not committed.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use onceonly::{BoxError, Error, Result};
use rusqlite::{Connection, OpenFlags};
use tokio::sync::oneshot;

/// Calls sharing one transaction at most; bounds how long one commit waits.
const MAX_GROUP: usize = 256;

/// Tells a caller how the group's commit went.
type Finish = Box<dyn FnOnce(std::result::Result<(), &str>) + Send>;
/// One call: run on the connection (`None`: the transaction could not
/// start), then finish once the group's fate is known.
type Call = Box<dyn FnOnce(Option<&Connection>) -> Finish + Send>;

/// A handle on the writer thread; clones share it, and the thread ends when
/// the last handle is dropped.
#[derive(Clone)]
pub(crate) struct Writer {
    calls: mpsc::Sender<Call>,
    /// Named in errors.
    path: String,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").field("path", &self.path).finish()
    }
}

impl Writer {
    /// Opens `path` (which must exist, in WAL mode) and starts the thread.
    pub(crate) fn open(path: &Path, busy_timeout: Duration) -> std::result::Result<Self, BoxError> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(busy_timeout)?;
        // Per connection: WAL with NORMAL loses nothing committed when the
        // process dies (power loss of the machine can lose the last commits).
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.set_prepared_statement_cache_capacity(32);
        let (calls, queue) = mpsc::channel();
        std::thread::Builder::new()
            .name("onceonly-sqlite".into())
            .spawn(move || serve(&conn, &queue))?;
        Ok(Self {
            calls,
            path: path.display().to_string(),
        })
    }

    /// Runs `f` on the writer's connection inside the current group
    /// transaction and returns its value once that transaction committed.
    pub(crate) async fn call<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel::<Result<T>>();
        let call: Call = Box::new(move |conn| {
            // Not run (`None`) only when the transaction could not start,
            // and then the finish is told why.
            let outcome = conn.map(|conn| in_savepoint(conn, f));
            Box::new(move |committed| {
                let answer = match (outcome, committed) {
                    (Some(Ok(value)), Ok(())) => Ok(value),
                    (Some(Err(e)), Ok(())) => Err(Error::Database(e.to_string())),
                    (_, Err(why)) => Err(Error::Database(why.to_owned())),
                    (None, Ok(())) => Err(Error::Database("the call was not run".into())),
                };
                // The caller may have gone (its future dropped): nothing to tell.
                let _ = reply.send(answer);
            })
        });
        let stopped =
            || Error::Database(format!("the SQLite writer for {} has stopped", self.path));
        self.calls.send(call).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// The thread: take every call waiting, run them in one transaction, commit,
/// then answer them all.
fn serve(conn: &Connection, queue: &mpsc::Receiver<Call>) {
    let mut group = Vec::with_capacity(MAX_GROUP);
    while let Ok(first) = queue.recv() {
        group.push(first);
        while group.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(call) => group.push(call),
                Err(_) => break,
            }
        }
        if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
            let why = format!("could not start a transaction: {e}");
            for call in group.drain(..) {
                call(None)(Err(&why));
            }
            continue;
        }
        let finishes: Vec<Finish> = group.drain(..).map(|call| call(Some(conn))).collect();
        match conn.execute_batch("COMMIT") {
            Ok(()) => finishes.into_iter().for_each(|finish| finish(Ok(()))),
            Err(e) => {
                // A failed COMMIT may leave the transaction open; end it so
                // the next group starts clean.
                let _ = conn.execute_batch("ROLLBACK");
                let why = format!("commit failed, nothing of this call was written: {e}");
                finishes.into_iter().for_each(|finish| finish(Err(&why)));
            }
        }
    }
}

/// Runs `f` so that its writes are undone if it fails, keeping the group's.
fn in_savepoint<T>(
    conn: &Connection,
    f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    conn.prepare_cached("SAVEPOINT call")?.execute([])?;
    match f(conn) {
        Ok(value) => {
            conn.prepare_cached("RELEASE call")?.execute([])?;
            Ok(value)
        }
        Err(e) => {
            conn.execute_batch("ROLLBACK TO call; RELEASE call")?;
            Err(e)
        }
    }
}
