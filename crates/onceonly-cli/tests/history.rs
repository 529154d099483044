//! `onceonly history` through the real binary, on SQLite and PostgreSQL: a
//! worker dies holding a claim, another takes it over into held, a person
//! resolves it with `onceonly resolve`, and the history shows both, in order,
//! under the record's current state; a job that fails twice then succeeds
//! shows its two retries.

mod common;

use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use onceonly::{
    EffectCtx, EffectFn, EffectKind, EffectOutcome, Error, FaultAction, FaultPoint, Guard, JobSpec,
    Outcome, Payload, StalePolicy, Store,
};
use serde_json::Value;

/// Runs the binary as the OS user `user` (the actor `resolve` records).
fn oo_as(user: &str, db: &str, args: &[&str]) -> Output {
    Command::new(bin())
        .env("USER", user)
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .unwrap()
}

fn spec(job: &str) -> JobSpec {
    JobSpec::new(job, EffectKind::Opaque(StalePolicy::Hold))
        .lease(Duration::from_secs(30))
        .timeout(Duration::from_secs(10))
}

/// `onceonly history --json` of one operation, each line parsed: the
/// record, then its events.
fn history_json(db: &str, job: &str, key: &str) -> Vec<Value> {
    let out = oo(db, &["history", "--job", job, "--key", key, "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}
async fn hold_then_resolve<S: Store + Clone>(db: &str, store: S) {
    let job = unique_job("history");
    let payload = Payload::parse(r#"{"order": 42}"#).unwrap();
    let effect = EffectFn(|_ctx: EffectCtx| async move { EffectOutcome::done_with_ref("mail-42") });
    onceonly::ops::enqueue(&store, &job, "op", &payload, None)
        .await
        .unwrap();

    // The first worker dies right after its claim.
    let dying = Guard::new(store.clone(), spec(&job))
        .unwrap()
        .with_owner("worker-dead")
        .with_fault_hook(Arc::new(|at| {
            if at == FaultPoint::AfterClaim {
                FaultAction::Crash
            } else {
                FaultAction::Continue
            }
        }));
    let err = dying.run("op", &payload, &effect).await.unwrap_err();
    assert!(matches!(err, Error::InjectedCrash(_)), "{err}");

    // Past its lease, the next delivery holds it for a person. (The shifted
    // clock is this process's: the take-over's time reads 31s later than the
    // resolve's, which the binary times with no shift. Order is by id.)
    store.clock_offset().advance(Duration::from_secs(31));
    let sweeper = Guard::new(store.clone(), spec(&job))
        .unwrap()
        .with_owner("worker-sweeper");
    let outcome = sweeper.run("op", &payload, &effect).await.unwrap();
    assert!(matches!(outcome, Outcome::Held { .. }), "{outcome:?}");

    let out = oo_as(
        "carol",
        db,
        &[
            "resolve",
            "--job",
            &job,
            "--key",
            "op",
            "--as",
            "queued",
            "--reason",
            "not in the mail log",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));

    // The table: the state line first, then the take-over, then the resolve.
    let out = oo(db, &["history", "--job", &job, "--key", "op"]);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with(&format!("{job}:op is queued (token 2")),
        "{stdout}"
    );
    let event = |name: &str| {
        lines
            .iter()
            .skip(1)
            .position(|l| l.contains(name))
            .map(|i| i + 1)
    };
    let (take_over, resolved) = (event("take_over"), event("resolved"));
    match (take_over, resolved) {
        (Some(t), Some(r)) if t < r => {
            for want in ["worker-sweeper", "claimed -> held", "stale token 1"] {
                assert!(lines[t].contains(want), "{want}: {stdout}");
            }
            for want in ["carol", "held -> queued", "not in the mail log"] {
                assert!(lines[r].contains(want), "{want}: {stdout}");
            }
        }
        _ => panic!("take-over then resolve expected:\n{stdout}"),
    }
    assert!(stdout.contains("2 events"), "{stdout}");

    // JSON lines: the record, then each event, oldest first.
    let rows = history_json(db, &job, "op");
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert_eq!(
        (&rows[0]["kind"], &rows[0]["state"], &rows[0]["token"]),
        (&"record".into(), &"queued".into(), &2.into())
    );
    let events: Vec<(&str, &str, i64, &str, &str)> = rows[1..]
        .iter()
        .map(|e| {
            assert_eq!(e["kind"], "event", "{e}");
            assert!(e["at"].as_str().is_some_and(|t| t.ends_with('Z')), "{e}");
            (
                e["event"].as_str().unwrap(),
                e["actor"].as_str().unwrap(),
                e["token"].as_i64().unwrap(),
                e["from_state"].as_str().unwrap(),
                e["to_state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        events,
        [
            ("take_over", "worker-sweeper", 2, "claimed", "held"),
            ("resolved", "carol", 2, "held", "queued"),
        ]
    );
    assert!(rows[1]["id"].as_i64() < rows[2]["id"].as_i64());

    // No such operation: exit 1, saying so.
    let out = oo(db, &["history", "--job", &job, "--key", "nope"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("no operation {job}:nope")),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_shows_hold_then_resolve_on_sqlite() {
    let (db, store) = migrated_sqlite().await;
    hold_then_resolve(&db, store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_shows_hold_then_resolve_on_postgres() {
    let Some((url, store)) = migrated_postgres("history_shows_hold_then_resolve_on_postgres").await
    else {
        return;
    };
    hold_then_resolve(&url, store).await;
}

/// A job that fails twice (not sent), then succeeds: `history` shows both
/// retries, each with its attempt, reason and when it was due again, in the
/// table and in `--json`, under the completed record.
async fn retries_then_done<S: Store + Clone>(db: &str, store: S) {
    let job = unique_job("retries");
    let payload = Payload::parse(r#"{"order": 7}"#).unwrap();
    let mut spec = JobSpec::new(&job, EffectKind::Keyed);
    spec.max_retries = 0; // one try per claim: each failure releases it
    let worker = Guard::new(store.clone(), spec).unwrap().with_owner("w");
    for (n, why) in [(1, "connection refused"), (2, "503 from the destination")] {
        let effect =
            EffectFn(move |_ctx: EffectCtx| async move { EffectOutcome::NotSent(why.into()) });
        let outcome = worker.run("op", &payload, &effect).await.unwrap();
        assert!(
            matches!(outcome, Outcome::RetryLater { .. }),
            "try {n}: {outcome:?}"
        );
        store
            .clock_offset()
            .advance(Duration::from_millis(500 * n + 1));
    }
    let effect = EffectFn(|_ctx: EffectCtx| async move { EffectOutcome::done_with_ref("mail-7") });
    let outcome = worker.run("op", &payload, &effect).await.unwrap();
    assert!(matches!(outcome, Outcome::Done { .. }), "{outcome:?}");

    let out = oo(db, &["history", "--job", &job, "--key", "op"]);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with(&format!("{job}:op is completed (token 3, attempts 3")),
        "{stdout}"
    );
    let retries: Vec<&&str> = lines.iter().filter(|l| l.contains(" retry ")).collect();
    assert_eq!(retries.len(), 2, "{stdout}");
    for (line, want) in retries.iter().zip([
        "attempt 1: connection refused (due again at ",
        "attempt 2: 503 from the destination (due again at ",
    ]) {
        assert!(line.contains(want), "{want}: {stdout}");
        assert!(line.contains("claimed -> queued"), "{stdout}");
    }
    assert!(stdout.contains("2 events"), "{stdout}");

    let rows = history_json(db, &job, "op");
    let events: Vec<(&str, i64, i64, &str, i64)> = rows[1..]
        .iter()
        .map(|e| {
            (
                e["event"].as_str().unwrap(),
                e["token"].as_i64().unwrap(),
                e["attempt"].as_i64().unwrap(),
                e["detail"].as_str().unwrap(),
                e["retry_after_ms"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        events,
        [
            ("retry", 1, 1, "connection refused", 500),
            ("retry", 2, 2, "503 from the destination", 1000),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_shows_retries_on_sqlite() {
    let (db, store) = migrated_sqlite().await;
    retries_then_done(&db, store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_shows_retries_on_postgres() {
    let Some((url, store)) = migrated_postgres("history_shows_retries_on_postgres").await else {
        return;
    };
    retries_then_done(&url, store).await;
}
