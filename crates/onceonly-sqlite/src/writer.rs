//! The store's own connection, on a thread of its own, committing in groups.
//!
//! sqlx-sqlite hops to a worker thread for every statement and pings the
//! connection on every pool release; at a few statements per operation those
//! hops, not SQLite, set the pace (about 2k guarded ops/s here). The writer
//! runs each call as one closure on one dedicated connection, and the calls
//! that arrive while it works share one `BEGIN IMMEDIATE ... COMMIT` (group
//! commit). A failing call undoes only its own writes (a single statement is
//! atomic; a call of several runs in a savepoint), and every call hears back
//! only after the COMMIT: nothing is reported written that is not committed.

use std::path::Path;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use onceonly::{BoxError, DbError, DbErrorKind, Error, Result};
use rusqlite::{Connection, OpenFlags};
use tokio::sync::oneshot;

use crate::checkpoint::{self, Commits};

/// Calls sharing one transaction at most; bounds how long one commit waits.
const MAX_GROUP: usize = 256;

/// How long the thread looks for the next call before it sleeps.
const SPIN: Duration = Duration::from_micros(50);

/// Tells a caller how the group's commit went.
type Finish = Box<dyn FnOnce(std::result::Result<(), &DbError>) + Send>;

/// Runs on the connection inside the group's transaction (`None`: it could
/// not start), then finishes once the group's fate is known.
type Write = Box<dyn FnOnce(Option<&Connection>) -> Finish + Send>;

enum Call {
    /// A call that may write.
    Write(Write),
    /// Run after the group, outside any transaction, so that a long read
    /// (a listing) does not hold the file's write lock.
    Read(Box<dyn FnOnce(&Connection) + Send>),
}

/// The writer's page cache at most, in KiB (SQLite's default: 2 MiB). A
/// claim and its completion touch pages all over the history, so a cache
/// as large as the file (64 MiB before) grew with it: peak memory 20 MiB
/// at 20k operations, 72 MiB at 200k. Pages it drops are still in the
/// operating system's cache, a `pread` away, and at 4 MiB the keyed c16
/// bench was no slower at 20k or 200k (docs/benchmarks.md) while peak
/// memory stayed within 7% of the 20k figure.
const PAGE_CACHE_KIB: i64 = 4_096;

/// A handle on the writer thread; clones share it, and the thread ends when
/// the last handle is dropped.
#[derive(Clone)]
pub(crate) struct Writer {
    calls: mpsc::Sender<Call>,
    /// Named in errors.
    path: String,
    /// The thread's commits, counted.
    #[cfg(test)]
    commits: Arc<Commits>,
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
        conn.pragma_update(None, "cache_size", -PAGE_CACHE_KIB)?;
        conn.pragma_update(None, "wal_autocheckpoint", checkpoint::BACKSTOP_PAGES)?;
        let commits = Arc::new(Commits::default());
        checkpoint::start(path, &commits)?;
        let (calls, queue) = mpsc::channel();
        #[cfg(test)]
        let counted = commits.clone();
        std::thread::Builder::new()
            .name("onceonly-write".into())
            .spawn(move || serve(&conn, &queue, &commits))?;
        Ok(Self {
            calls,
            path: path.display().to_string(),
            #[cfg(test)]
            commits: counted,
        })
    }

    /// Runs `f`, which writes with one statement at most, on the writer's
    /// connection inside the current group transaction, and returns its
    /// value once that transaction committed. A single statement is atomic in
    /// SQLite, so `f` needs no savepoint of its own: a failed statement wrote
    /// nothing. (Should decoding its returned row fail after it wrote, the
    /// write stays, as if the caller had died right after it: the record's
    /// token and lease settle that like any crash.)
    pub(crate) async fn call<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        self.write(false, f).await
    }

    /// Like [`Writer::call`] for an `f` that writes with several statements:
    /// it runs in a savepoint, so that if it fails, none of them is kept.
    pub(crate) async fn call_atomic<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        self.write(true, f).await
    }

    async fn write<T, F>(&self, savepoint: bool, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel::<Result<T>>();
        let call = Call::Write(Box::new(move |conn| {
            // Not run (`None`) only when the transaction could not start,
            // and then the finish is told why.
            let outcome = conn.map(|conn| match savepoint {
                true => in_savepoint(conn, f),
                false => f(conn),
            });
            Box::new(move |committed| {
                let answer = match (outcome, committed) {
                    (Some(Ok(value)), Ok(())) => Ok(value),
                    (Some(Err(e)), Ok(())) => Err(db_error(e, "a statement failed").into()),
                    (_, Err(why)) => Err(why.clone().into()),
                    (None, Ok(())) => {
                        Err(DbError::msg(DbErrorKind::Other, "the call was not run").into())
                    }
                };
                // The caller may have gone (its future dropped): nothing to tell.
                let _ = reply.send(answer);
            })
        }));
        self.send(call, answer).await
    }

    /// Runs the read-only `f` on the writer's connection, outside any
    /// transaction (each statement sees the file as last committed).
    pub(crate) async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel::<Result<T>>();
        let call = Call::Read(Box::new(move |conn| {
            let _ = reply.send(f(conn).map_err(|e| db_error(e, "a read failed").into()));
        }));
        self.send(call, answer).await
    }

    async fn send<T>(&self, call: Call, answer: oneshot::Receiver<Result<T>>) -> Result<T> {
        let stopped = || {
            let why = format!("the SQLite writer for {} has stopped", self.path);
            Error::Db(DbError::msg(DbErrorKind::Other, why))
        };
        self.calls.send(call).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// The thread: open a transaction, run every write call as it arrives,
/// commit once none is waiting, answer them all, then run the reads.
///
/// A group keeps taking calls while it runs, so the callers answered by one
/// commit join the next group together: taking only the calls waiting when
/// a group starts splits callers into cohorts that alternate, each paying
/// for its own commit (keyed c16: groups of ~8 calls instead of 16).
fn serve(conn: &Connection, queue: &mpsc::Receiver<Call>, commits: &Commits) {
    let mut reads = Vec::new();
    while let Ok(first) = next_call(queue) {
        let mut group = Group::default();
        let mut call = Some(first);
        while let Some(next) = call {
            match next {
                Call::Write(write) => group.run(conn, write),
                Call::Read(read) => reads.push(read),
            }
            // A group that could not begin takes no more: the next call
            // tries a transaction of its own.
            if group.len() >= MAX_GROUP || group.failed_to_begin.is_some() {
                break;
            }
            call = queue.try_recv().ok();
        }
        group.commit(conn, commits);
        reads.drain(..).for_each(|read| read(conn));
    }
}

/// The next call, looked for a short while before sleeping: a caller's
/// next call often follows its answer within microseconds, and a thread
/// that sleeps costs a wake-up on both sides.
fn next_call(queue: &mpsc::Receiver<Call>) -> std::result::Result<Call, mpsc::RecvError> {
    match poll(queue, SPIN)? {
        Some(call) => Ok(call),
        None => queue.recv(),
    }
}

/// A call waiting, or arriving within `wait` (looked for without sleeping);
/// `None` if none came.
fn poll(
    queue: &mpsc::Receiver<Call>,
    wait: Duration,
) -> std::result::Result<Option<Call>, mpsc::RecvError> {
    let until = std::time::Instant::now() + wait;
    loop {
        match queue.try_recv() {
            Ok(call) => return Ok(Some(call)),
            Err(mpsc::TryRecvError::Disconnected) => return Err(mpsc::RecvError),
            Err(mpsc::TryRecvError::Empty) if std::time::Instant::now() < until => {
                std::thread::yield_now();
            }
            Err(mpsc::TryRecvError::Empty) => return Ok(None),
        }
    }
}

/// The write calls of one transaction, begun with the first of them.
#[derive(Default)]
struct Group {
    /// How each call is answered once the transaction's fate is known.
    finishes: Vec<Finish>,
    /// `BEGIN` failed: every call of the group is told why.
    failed_to_begin: Option<DbError>,
}

impl Group {
    fn len(&self) -> usize {
        self.finishes.len()
    }

    /// Runs `write` inside the transaction, beginning it first if needed.
    fn run(&mut self, conn: &Connection, write: Write) {
        if self.finishes.is_empty() {
            if let Err(e) = run(conn, "BEGIN IMMEDIATE") {
                self.failed_to_begin = Some(db_error(e, "could not start a transaction"));
            }
        }
        let conn = self.failed_to_begin.is_none().then_some(conn);
        self.finishes.push(write(conn));
    }

    /// Commits, counts the commit in `commits`, then answers every call.
    fn commit(self, conn: &Connection, commits: &Commits) {
        if self.finishes.is_empty() {
            return;
        }
        if let Some(why) = &self.failed_to_begin {
            self.finishes
                .into_iter()
                .for_each(|finish| finish(Err(why)));
            return;
        }
        match run(conn, "COMMIT") {
            Ok(()) => {
                commits.count();
                self.finishes.into_iter().for_each(|finish| finish(Ok(())));
            }
            Err(e) => {
                // A failed COMMIT may leave the transaction open; end it so
                // the next group starts clean.
                let _ = conn.execute_batch("ROLLBACK");
                let why = db_error(e, "commit failed, nothing of this call was written");
                self.finishes
                    .into_iter()
                    .for_each(|finish| finish(Err(&why)));
            }
        }
    }
}

/// A SQLite error with its kind: a constraint, the file busy or locked
/// (serialization), refused for good (read-only, permission, a missing
/// table), or other; `doing` says what failed.
pub(crate) fn db_error(e: rusqlite::Error, doing: &str) -> DbError {
    use rusqlite::ErrorCode as C;
    let kind = match e.sqlite_error_code() {
        Some(C::ConstraintViolation) => DbErrorKind::Constraint,
        Some(C::DatabaseBusy | C::DatabaseLocked) => DbErrorKind::Serialization,
        Some(C::ReadOnly | C::PermissionDenied | C::AuthorizationForStatementDenied) => {
            DbErrorKind::Permanent
        }
        _ if onceonly_sqlx::is_missing_schema(&e.to_string()) => DbErrorKind::Permanent,
        _ => DbErrorKind::Other,
    };
    DbError::new(kind, format!("{doing}: {e}"), e)
}

/// One statement without arguments, prepared once per connection.
fn run(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

/// Runs `f` so that its writes are undone if it fails, keeping the group's.
fn in_savepoint<T>(
    conn: &Connection,
    f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    run(conn, "SAVEPOINT call")?;
    match f(conn) {
        Ok(value) => {
            run(conn, "RELEASE call")?;
            Ok(value)
        }
        Err(e) => {
            conn.execute_batch("ROLLBACK TO call; RELEASE call")?;
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SQLite's refusals keep their kind: a constraint, and the file locked
    /// by another connection (retry), each with rusqlite's error as source.
    #[test]
    fn sqlite_errors_keep_their_kind_and_cause() {
        use std::error::Error as _;
        let (_dir, path) = file_with_table();
        let conn = Connection::open(&path).unwrap();
        let null = conn
            .execute("INSERT INTO t (x) VALUES (NULL)", [])
            .unwrap_err();
        let e = db_error(null, "insert");
        assert_eq!(e.kind(), DbErrorKind::Constraint, "{e}");
        assert!(e.source().is_some());

        let holder = Connection::open(&path).unwrap();
        holder.execute_batch("BEGIN IMMEDIATE").unwrap();
        conn.busy_timeout(Duration::ZERO).unwrap();
        let busy = conn.execute_batch("BEGIN IMMEDIATE").unwrap_err();
        let e = db_error(busy, "begin");
        assert_eq!(e.kind(), DbErrorKind::Serialization, "{e}");
        holder.execute_batch("ROLLBACK").unwrap();
    }

    fn file_with_table() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.db");
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.execute_batch("CREATE TABLE t (x INTEGER NOT NULL)")
            .unwrap();
        (dir, path)
    }

    fn rows(path: &Path) -> Vec<i64> {
        let conn = Connection::open(path).unwrap();
        let mut stmt = conn.prepare("SELECT x FROM t ORDER BY x").unwrap();
        let xs = stmt.query_map([], |r| r.get(0)).unwrap();
        xs.collect::<rusqlite::Result<_>>().unwrap()
    }

    #[tokio::test]
    async fn a_failing_call_undoes_only_its_own_writes() {
        let (_dir, path) = file_with_table();
        let writer = Writer::open(&path, Duration::from_secs(5)).unwrap();
        // Sent together, so most share a transaction with the failing one.
        let calls: Vec<_> = (0..50_i64)
            .map(|x| {
                let writer = writer.clone();
                tokio::spawn(async move {
                    writer
                        .call_atomic(move |c| {
                            c.execute("INSERT INTO t (x) VALUES (?1)", [x])?;
                            if x == 25 {
                                c.execute("INSERT INTO no_such_table VALUES (1)", [])?;
                            }
                            Ok(x)
                        })
                        .await
                })
            })
            .collect();
        let mut results = Vec::new();
        for call in calls {
            results.push(call.await.unwrap());
        }
        let failed: Vec<_> = results.iter().filter(|r| r.is_err()).collect();
        assert_eq!(failed.len(), 1, "only the bad call fails: {results:?}");
        assert!(failed[0]
            .as_ref()
            .unwrap_err()
            .to_string()
            .contains("no_such_table"));
        let expected: Vec<i64> = (0..50).filter(|x| *x != 25).collect();
        assert_eq!(rows(&path), expected, "every other call's row is committed");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_arriving_while_a_group_runs_join_its_commit() {
        use std::future::Future;
        let (_dir, path) = file_with_table();
        let writer = Writer::open(&path, Duration::from_secs(5)).unwrap();
        let (running, started) = oneshot::channel();
        let (go, held) = mpsc::channel::<()>();
        let first = writer.clone();
        let slow = tokio::spawn(async move {
            first
                .call(move |c| {
                    let n = c.execute("INSERT INTO t (x) VALUES (0)", [])?;
                    // Keep the group open until the calls below are queued.
                    let _ = running.send(());
                    let _ = held.recv();
                    Ok(n)
                })
                .await
        });
        started.await.unwrap();
        let mut later: Vec<_> = (1..=10_i64)
            .map(|x| {
                Box::pin(writer.call(move |c| c.execute("INSERT INTO t (x) VALUES (?1)", [x])))
            })
            .collect();
        for call in &mut later {
            // The first poll queues the call; its answer comes later.
            std::future::poll_fn(|cx| {
                let _ = call.as_mut().poll(cx);
                std::task::Poll::Ready(())
            })
            .await;
        }
        go.send(()).unwrap();
        slow.await.unwrap().unwrap();
        for call in later {
            call.await.unwrap();
        }
        assert_eq!(rows(&path), (0..=10).collect::<Vec<_>>());
        assert_eq!(
            writer.commits.seen(),
            1,
            "all eleven calls shared one commit"
        );
    }

    #[tokio::test]
    async fn a_call_waits_for_another_connections_write_lock() {
        let (_dir, path) = file_with_table();
        let writer = Writer::open(&path, Duration::from_secs(10)).unwrap();
        let other = Connection::open(&path).unwrap();
        other
            .execute_batch("BEGIN IMMEDIATE; INSERT INTO t (x) VALUES (1)")
            .unwrap();
        let holder = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            other.execute_batch("COMMIT").unwrap();
        });
        let wrote = writer
            .call(|c| c.execute("INSERT INTO t (x) VALUES (2)", []))
            .await;
        holder.join().unwrap();
        assert_eq!(wrote.unwrap(), 1, "the call waited instead of failing busy");
        assert_eq!(rows(&path), vec![1, 2]);
    }

    #[tokio::test]
    async fn a_read_runs_outside_the_write_lock() {
        let (_dir, path) = file_with_table();
        let writer = Writer::open(&path, Duration::from_millis(100)).unwrap();
        let other = Connection::open(&path).unwrap();
        // Another connection holds the write lock for longer than the
        // writer's busy timeout: a write fails busy, a read goes through.
        other
            .execute_batch("BEGIN IMMEDIATE; INSERT INTO t (x) VALUES (1)")
            .unwrap();
        let read = writer
            .read(|c| c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0)))
            .await;
        let write = writer
            .call(|c| c.execute("INSERT INTO t (x) VALUES (2)", []))
            .await;
        other.execute_batch("COMMIT").unwrap();
        assert_eq!(read.unwrap(), 0, "the read saw the last commit");
        let busy = write.unwrap_err().to_string();
        assert!(busy.contains("locked") || busy.contains("busy"), "{busy}");
    }

    #[tokio::test]
    async fn commits_reach_the_database_file_long_before_the_wal_fills() {
        let (_dir, path) = file_with_table();
        let writer = Writer::open(&path, Duration::from_secs(5)).unwrap();
        writer
            .call(|c| c.execute("INSERT INTO t (x) VALUES (7)", []))
            .await
            .unwrap();
        // `immutable=1` reads the database file alone, not the WAL: the row
        // is there once a checkpoint copied it.
        let file_only = format!("file:{}?immutable=1", path.display());
        let started = std::time::Instant::now();
        loop {
            let conn = Connection::open_with_flags(
                &file_only,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
            )
            .unwrap();
            let in_file: i64 = conn
                .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
                .unwrap();
            if in_file == 1 {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "one commit was never checkpointed into the file"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
