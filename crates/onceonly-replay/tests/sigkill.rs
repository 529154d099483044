//! The SIGKILL path, end to end: the harness starts real worker processes
//! (this test binary, re-run as a worker), kills them with SIGKILL at each
//! point, redelivers after the lease and counts, for every demo job.

use std::time::Duration;

use onceonly::Store;
use onceonly_replay::demo::{DemoJob, DemoKind};
use onceonly_replay::worker;
use onceonly_replay::{
    Death, Harness, Reconnect, Report, Scenario, Verdict, WorkerCommand, WorkerRequest,
};
use onceonly_sqlite::SqliteStore;

const ENV_DB: &str = "ONCEONLY_REPLAY_TEST_DB";
const ENV_KIND: &str = "ONCEONLY_REPLAY_TEST_KIND";
const ENV_JOB: &str = "ONCEONLY_REPLAY_TEST_JOB";
const ENV_HTTP: &str = "ONCEONLY_REPLAY_TEST_HTTP";

/// Not a test: the worker process the harness starts (this binary, running
/// only this function). Without a request in the environment it does nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_worker_entry() {
    let Some(request) = WorkerRequest::from_env().unwrap() else {
        return;
    };
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} not set"));
    let kind = DemoKind::parse(&var(ENV_KIND)).unwrap();
    let http = std::env::var(ENV_HTTP).ok();
    let job = DemoJob::attach(kind, &var(ENV_JOB), http.as_deref()).unwrap();
    let db = var(ENV_DB);
    let err = if db.starts_with("sqlite:") {
        let store = SqliteStore::connect(&db).await.unwrap();
        worker::serve(&job, store, &request).await.unwrap_err()
    } else {
        panic!("this worker knows SQLite only: {db}")
    };
    panic!("the worker was not killed: {err}");
}

fn worker_command(db: &str, job: &DemoJob) -> WorkerCommand {
    let mut command = WorkerCommand::new(std::env::current_exe().unwrap())
        .arg("--exact")
        .arg("replay_worker_entry")
        .arg("--nocapture")
        .arg("--test-threads=1")
        .env(ENV_DB, db)
        .env(ENV_KIND, job.kind().name())
        .env(ENV_JOB, &job.spec().job_type);
    if let Some(url) = job.base_url() {
        command = command.env(ENV_HTTP, url);
    }
    command
}

async fn run_all<S>(db: &str, store: S) -> Report
where
    S: Reconnect,
    S::Conn: onceonly_replay::demo::DemoConn,
{
    let mut report = Report::default();
    for kind in DemoKind::ALL
        .into_iter()
        .filter(|k| std::env::var("ONLY").map_or(true, |o| o == k.name()))
    {
        let job = DemoJob::start(kind, &format!("sigkill.{}", kind.name()))
            .await
            .unwrap();
        job.prepare(&store).await.unwrap();
        let command = worker_command(db, &job);
        let harness = Harness::new(store.clone(), job)
            .runs(5)
            .workers(&[2])
            .worker_command(command)
            .on_progress(std::sync::Arc::new(|p: &onceonly_replay::Progress<'_>| {
                eprintln!(
                    "[{}/{}] {} {}",
                    p.done + 1,
                    p.total,
                    p.label,
                    p.detail.unwrap_or("")
                );
            }));
        report.merge(harness.run().await.unwrap());
    }
    report
}

fn assert_sigkill_evidence(report: &Report) {
    print!("{}", report.table());
    for e in &report.entries {
        println!(
            "{} [{}] {}ms: {:?}",
            e.label(),
            e.kind,
            e.elapsed_ms,
            e.notes
        );
    }
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
    // The naive opaque job dying after its effect, then redelivered, acts twice.
    let naive_twice = killed
        .iter()
        .filter(|e| e.kind.starts_with("opaque") && e.number == 4)
        .all(|e| e.naive.as_ref().is_some_and(|n| n.total == 2));
    assert!(
        naive_twice,
        "the naive version should act twice after a SIGKILL after its effect"
    );
    assert!(report.passed(), "{}", report.table());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("replay.db").display());
    let store = SqliteStore::connect(&db).await.unwrap();
    store.migrate().await.unwrap();
    let report = tokio::time::timeout(Duration::from_secs(600), run_all(&db, store))
        .await
        .expect("the suite finishes");
    assert_sigkill_evidence(&report);
}
