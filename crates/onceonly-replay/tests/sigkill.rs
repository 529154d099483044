//! The SIGKILL path, end to end, on SQLite and on PostgreSQL: the harness
//! starts real worker processes (this test binary, re-run as a worker),
//! kills them with SIGKILL at each point, redelivers after the lease (the
//! clock is moved) and counts, for every demo job.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use onceonly::db_url::DbKind;
use onceonly::Store;
use onceonly_postgres::{PgOptions, PgStore};
use onceonly_replay::demo::{DemoConn, DemoJob, DemoKind};
use onceonly_replay::{
    worker, Death, Harness, Progress, Reconnect, Report, Scenario, Verdict, WorkerCommand,
    WorkerRequest,
};
use onceonly_sqlite::SqliteStore;
use sqlx::Connection;

const ENV_DB: &str = "ONCEONLY_REPLAY_TEST_DB";
const ENV_SCHEMA: &str = "ONCEONLY_REPLAY_TEST_SCHEMA";
const ENV_KIND: &str = "ONCEONLY_REPLAY_TEST_KIND";
const ENV_JOB: &str = "ONCEONLY_REPLAY_TEST_JOB";
const ENV_HTTP: &str = "ONCEONLY_REPLAY_TEST_HTTP";

use onceonly_sqlx::test_db::pg_url;

/// Not a test: the worker process the harness starts (this binary, running
/// only this function). Ignored, so a normal test run does not count it as
/// a passing test; the harness runs it with `--ignored`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the worker process of the SIGKILL tests, not a test"]
async fn replay_worker_entry() {
    let Some(request) = WorkerRequest::from_env().unwrap() else {
        return;
    };
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} not set"));
    let kind = DemoKind::parse(&var(ENV_KIND)).unwrap();
    let http = std::env::var(ENV_HTTP).ok();
    let job = DemoJob::attach(kind, &var(ENV_JOB), http.as_deref()).unwrap();
    let db = var(ENV_DB);
    let err = match DbKind::of(&db).unwrap() {
        DbKind::Sqlite => {
            let store = SqliteStore::connect(&db).await.unwrap();
            worker::serve(&job, store, &request).await.unwrap_err()
        }
        DbKind::Postgres => {
            let options = PgOptions::default().schema(var(ENV_SCHEMA));
            let store = PgStore::connect_with(&db, options).await.unwrap();
            worker::serve(&job, store, &request).await.unwrap_err()
        }
        DbKind::MySql => {
            let store = onceonly_mysql::MySqlStore::connect(&db).await.unwrap();
            worker::serve(&job, store, &request).await.unwrap_err()
        }
    };
    panic!("the worker was not killed: {err}");
}

fn worker_command(db: &str, schema: Option<&str>, job: &DemoJob) -> WorkerCommand {
    let mut command = WorkerCommand::new(std::env::current_exe().unwrap())
        .arg("--exact")
        .arg("replay_worker_entry")
        .arg("--ignored")
        .arg("--nocapture")
        .arg("--test-threads=1")
        .env(ENV_DB, db)
        .env(ENV_KIND, job.kind().name())
        .env(ENV_JOB, &job.spec().job_type);
    if let Some(schema) = schema {
        command = command.env(ENV_SCHEMA, schema);
    }
    if let Some(url) = job.base_url() {
        command = command.env(ENV_HTTP, url);
    }
    command
}

/// Every demo job, every scenario, 5 concurrent runs with 2 workers.
async fn run_all<S>(db: &str, schema: Option<&str>, store: S, prefix: &str) -> Report
where
    S: Reconnect,
    S::Conn: DemoConn,
{
    let mut report = Report::default();
    for kind in DemoKind::ALL {
        let job = DemoJob::start(kind, &format!("{prefix}.{}", kind.name()))
            .await
            .unwrap();
        job.prepare(&store).await.unwrap();
        let command = worker_command(db, schema, &job);
        let harness = Harness::new(store.clone(), job)
            .runs(5)
            .workers(&[2])
            .worker_command(command)
            .on_progress(Arc::new(|p: &Progress<'_>| {
                if p.detail.is_none() {
                    eprintln!("[{}/{}] {}", p.done + 1, p.total, p.label);
                }
            }));
        report.merge(harness.run().await.unwrap());
        harness.job().clear(&store).await.unwrap();
    }
    report
}

fn assert_sigkill_evidence(report: &Report) {
    print!("{}", report.table());
    let killed: Vec<_> = report
        .entries
        .iter()
        .filter(|e| {
            matches!(
                e.scenario(),
                Scenario::Crash {
                    death: Death::Sigkill,
                    ..
                }
            )
        })
        .collect();
    assert_eq!(
        killed.len(),
        2 * DemoKind::ALL.len(),
        "two SIGKILL points per demo job"
    );
    for e in &killed {
        assert_eq!(
            e.verdict,
            Verdict::Pass,
            "{} [{}]: {:?} {:?}",
            e.label(),
            e.kind,
            e.failures,
            e.notes
        );
        assert!(
            e.checks
                .iter()
                .any(|c| c.name.contains("SIGKILL") && c.passed && c.detail.contains("signal 9")),
            "{} [{}] shows no SIGKILL: {:?}",
            e.label(),
            e.kind,
            e.checks
        );
    }
    // Killed after its effect and redelivered, the naive opaque job acts twice.
    for e in killed
        .iter()
        .filter(|e| e.kind.starts_with("opaque") && e.number == 4)
    {
        let naive = e.naive.as_ref().map_or(0, |n| n.total);
        assert_eq!(naive, 2, "naive {} [{}]", e.label(), e.kind);
    }
    assert!(report.passed(), "{}", report.table());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("replay.db").display());
    let store = SqliteStore::connect(&db).await.unwrap();
    store.migrate().await.unwrap();
    let report = tokio::time::timeout(
        Duration::from_secs(300),
        run_all(&db, None, store, "sigkill"),
    )
    .await
    .expect("the suite finishes");
    assert_sigkill_evidence(&report);
}

/// A schema the PostgreSQL store tests' sweep also recognises and drops
/// once old: `t_<seconds>_<random>`, in hex.
fn new_schema() -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let random = now.subsec_nanos() ^ std::process::id().rotate_left(16);
    format!("t_{:08x}_{random:08x}", now.as_secs())
}

/// Why PostgreSQL cannot be reached, if it cannot.
async fn pg_unavailable(url: &str) -> Option<String> {
    match tokio::time::timeout(Duration::from_secs(3), sqlx::PgConnection::connect(url)).await {
        Ok(Ok(conn)) => {
            let _ = conn.close().await;
            None
        }
        Ok(Err(e)) => Some(e.to_string()),
        Err(_) => Some("no answer within 3s".to_owned()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_on_postgres() {
    let url = pg_url();
    if !onceonly_sqlx::test_db::PG.ready("sigkill_on_postgres", pg_unavailable(&url).await) {
        return;
    }
    let schema = new_schema();
    let store = PgStore::connect_with(&url, PgOptions::default().schema(&schema))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let report = tokio::time::timeout(
        Duration::from_secs(300),
        run_all(&url, Some(&schema), store.clone(), &schema),
    )
    .await
    .expect("the suite finishes");
    assert_sigkill_evidence(&report);
    let drop = format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE");
    sqlx::query(&drop).execute(store.pool()).await.unwrap();
}
