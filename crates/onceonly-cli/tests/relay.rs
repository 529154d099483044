//! The relay end to end: real `onceonly run` processes, a real HTTP
//! destination on 127.0.0.1, real SIGKILLs, on SQLite and PostgreSQL.
//! Counts per key at the destination must match docs/DESIGN.md section 3.

mod common;

use std::time::{Duration, Instant};

use common::*;
use onceonly::relay::{Relay, RelayConfig};
use onceonly::{idempotency_key, EffectKind, Guard, JobSpec, StalePolicy, Store};
use onceonly_http::test_server::{Mode, TestServer};
use onceonly_http::HttpDestination;

/// Waits for a child in a blocking thread, so the in-process destination keeps serving.
async fn finish(child: std::process::Child) -> std::process::Output {
    tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap()
}

async fn run_cli(db: &str, args: Vec<String>) -> std::process::Output {
    let db = db.to_owned();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        oo(&db, &args)
    })
    .await
    .unwrap()
}

fn effect_args(mode: Mode) -> &'static [&'static str] {
    match mode {
        Mode::Keyed => &["--effect", "keyed"],
        Mode::Searchable => &["--effect", "lookup"],
        Mode::Neither => &["--effect", "opaque", "--on-stale", "hold"],
    }
}

/// Two relay processes drain one queue: every operation reaches the
/// destination once and is recorded completed with the destination's id.
async fn two_relays_send_once(db: &str, mode: Mode) {
    let server = TestServer::start(mode).await.unwrap();
    let job = unique_job("relay");
    let keys = enqueue_many(db, &job, 40);
    let base = server.base_url();
    let mut args = vec![
        "run",
        "--job",
        &job,
        "--http",
        &base,
        "--workers",
        "4",
        "--lease",
        "5s",
        "--timeout",
        "2s",
        "--drain",
    ];
    args.extend_from_slice(effect_args(mode));
    let (a, b) = (spawn(db, &args), spawn(db, &args));
    let (a, b) = tokio::join!(finish(a), finish(b));
    assert!(a.status.success(), "{}", text(&a));
    assert!(b.status.success(), "{}", text(&b));
    let records = inspect(db, &job);
    for key in &keys {
        let ik = idempotency_key(&job, key);
        assert_eq!(
            server.effects(&ik),
            1,
            "{mode:?} {key}: effects at the destination"
        );
        assert_eq!(
            records[key]["state"], "completed",
            "{key}: {}",
            records[key]
        );
        assert!(records[key]["external_ref"].is_string());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_relays_send_once_on_sqlite() {
    for mode in [Mode::Keyed, Mode::Searchable, Mode::Neither] {
        two_relays_send_once(&sqlite_url(), mode).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_relays_send_once_on_postgres() {
    let Some(url) = pg_url("two_relays_send_once_on_postgres") else {
        return;
    };
    for mode in [Mode::Keyed, Mode::Searchable, Mode::Neither] {
        two_relays_send_once(&url, mode).await;
    }
}

/// Scale-out: `processes` relay processes, each with `workers` claim loops
/// claiming `batch` rows per statement, drain one queue on PostgreSQL (the
/// store batching their claims and completions). The destination does not
/// dedup (opaque), so every POST is an item: every operation reaches it
/// exactly once, and it saw no other POST.
async fn relays_scale_out_send_once(url: &str, processes: usize, batch: u32) {
    let server = TestServer::start(Mode::Neither).await.unwrap();
    let job = unique_job("scale");
    let keys = enqueue_many(url, &job, 600);
    let base = server.base_url();
    let batch = batch.to_string();
    let args = [
        "run",
        "--job",
        &job,
        "--http",
        &base,
        "--workers",
        "4",
        "--batch",
        &batch,
        "--lease",
        "30s",
        "--timeout",
        "10s",
        "--drain",
        "--effect",
        "opaque",
        "--on-stale",
        "hold",
    ];
    let relays: Vec<_> = (0..processes).map(|_| spawn(url, &args)).collect();
    for out in futures::future::join_all(relays.into_iter().map(finish)).await {
        assert!(out.status.success(), "{}", text(&out));
    }
    let all = server.all_effects();
    assert_eq!(
        all.len(),
        keys.len(),
        "{processes} relays, batch {batch}: keys at the destination"
    );
    assert_eq!(server.posts(), keys.len() as u64, "one POST per operation");
    let records = inspect(url, &job);
    for key in &keys {
        let ik = idempotency_key(&job, key);
        assert_eq!(all.get(&ik), Some(&1), "{key}: sent once");
        assert_eq!(
            records[key]["state"], "completed",
            "{key}: {}",
            records[key]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_relays_batched_send_once_on_postgres() {
    let Some(url) = pg_url("four_relays_batched_send_once_on_postgres") else {
        return;
    };
    relays_scale_out_send_once(&url, 4, 50).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_relays_unbatched_send_once_on_postgres() {
    let Some(url) = pg_url("two_relays_unbatched_send_once_on_postgres") else {
        return;
    };
    relays_scale_out_send_once(&url, 2, 1).await;
}

/// A relay process is SIGKILLed after the destination created the item but
/// before it answered; a relay after the lease settles the claim. The count
/// at the destination and the record's state are what the kind promises.
async fn killed_mid_send<S: Store + Clone>(
    db: &str,
    store: S,
    mode: Mode,
    kind: EffectKind,
) -> (usize, String) {
    let server = TestServer::start(mode).await.unwrap();
    server.delay_after_create(Duration::from_secs(30));
    let job = unique_job("kill");
    enqueue_many(db, &job, 1);
    let effect = match kind {
        EffectKind::Keyed => vec!["--effect".to_owned(), "keyed".to_owned()],
        EffectKind::Lookup => vec!["--effect".to_owned(), "lookup".to_owned()],
        EffectKind::Opaque(p) => vec![
            "--effect".into(),
            "opaque".into(),
            "--on-stale".into(),
            p.as_str().into(),
        ],
        EffectKind::Local => unreachable!(),
    };
    let base = server.base_url();
    let mut args = vec![
        "run",
        "--job",
        &job,
        "--http",
        &base,
        "--workers",
        "1",
        "--lease",
        "20s",
        "--timeout",
        "10s",
    ];
    args.extend(effect.iter().map(String::as_str));
    let mut relay = spawn(db, &args);
    let started = Instant::now();
    while server.posts() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the relay never sent"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    relay.kill().unwrap(); // SIGKILL
    relay.wait().unwrap();
    server.delay_after_create(Duration::ZERO);
    let ik = idempotency_key(&job, "op-0");
    assert_eq!(
        server.effects(&ik),
        1,
        "the item was created before the kill"
    );
    assert_eq!(
        inspect(db, &job)["op-0"]["state"],
        "claimed",
        "the dead relay left its claim"
    );

    // Redelivery after the lease: move this process's view of the database
    // clock past the lease instead of waiting for it.
    store.clock_offset().advance(Duration::from_secs(21));
    let spec = JobSpec::new(&job, kind)
        .lease(Duration::from_secs(20))
        .timeout(Duration::from_secs(10));
    let guard = Guard::new(store, spec).unwrap();
    let destination = HttpDestination::new(&base, Duration::from_secs(5)).unwrap();
    let relay = Relay::new(
        &guard,
        &destination,
        RelayConfig {
            drain: true,
            poll: Duration::from_millis(20),
            ..RelayConfig::default()
        },
    );
    let (_stop, stop) = tokio::sync::watch::channel(false);
    relay.run(stop).await.unwrap();
    let state = inspect(db, &job)["op-0"]["state"]
        .as_str()
        .unwrap()
        .to_owned();
    (server.effects(&ik), state)
}

async fn every_kind_after_a_kill<S: Store + Clone>(db: &str, store: S) {
    let cases = [
        (Mode::Keyed, EffectKind::Keyed, 1, "completed"),
        (Mode::Searchable, EffectKind::Lookup, 1, "completed"),
        (
            Mode::Neither,
            EffectKind::Opaque(StalePolicy::Hold),
            1,
            "held",
        ),
        (
            Mode::Neither,
            EffectKind::Opaque(StalePolicy::AtLeastOnce),
            2,
            "completed",
        ),
        (
            Mode::Neither,
            EffectKind::Opaque(StalePolicy::AtMostOnce),
            1,
            "failed",
        ),
    ];
    for (mode, kind, effects, state) in cases {
        let got = killed_mid_send(db, store.clone(), mode, kind).await;
        assert_eq!(
            got,
            (effects, state.to_owned()),
            "{kind} after a SIGKILL mid-send"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_send_on_sqlite() {
    let (db, store) = migrated_sqlite().await;
    every_kind_after_a_kill(&db, store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_send_on_postgres() {
    let Some((url, store)) = migrated_postgres("sigkill_mid_send_on_postgres").await else {
        return;
    };
    every_kind_after_a_kill(&url, store).await;
}

/// Cancels race in-flight sends: no cancelled operation has a live item at
/// the destination, and every cancel that exits 0 left the record cancelled.
async fn cancels_race_sends(db: &str) {
    let server = TestServer::start(Mode::Keyed).await.unwrap();
    server.delay_after_create(Duration::from_millis(200));
    let job = unique_job("cancel");
    let keys = enqueue_many(db, &job, 24);
    let base = server.base_url();
    let relay = spawn(
        db,
        &[
            "run",
            "--job",
            &job,
            "--http",
            &base,
            "--effect",
            "keyed",
            "--workers",
            "3",
            "--lease",
            "5s",
            "--timeout",
            "2s",
            "--drain",
        ],
    );
    let mut cancels = Vec::new();
    for (i, key) in keys.iter().enumerate().filter(|(i, _)| i % 2 == 0) {
        // Early cancels meet queued rows, later ones sends in flight or done.
        let later = if i >= 12 { 300 } else { 0 };
        tokio::time::sleep(Duration::from_millis(later + 30 * (i as u64 % 4))).await;
        let args = [
            "cancel", "--job", &job, "--key", key, "--http", &base, "--wait", "10s",
        ]
        .map(str::to_owned)
        .to_vec();
        cancels.push((
            key.clone(),
            tokio::spawn(run_cli_owned(db.to_owned(), args)),
        ));
    }
    let relay_out = finish(relay).await;
    assert!(relay_out.status.success(), "{}", text(&relay_out));
    let mut results = Vec::new();
    for (key, task) in cancels {
        results.push((key, task.await.unwrap()));
    }
    let records = inspect(db, &job);
    for (_, out) in &results {
        eprintln!("cancel said: {}", text(out));
    }
    for (key, out) in &results {
        let state = records[key]["state"].as_str().unwrap();
        assert!(
            out.status.success(),
            "cancel {key} ({state}): {}",
            text(out)
        );
        assert_eq!(state, "cancelled", "{key}");
    }
    for (key, record) in &records {
        let live = server.live(&idempotency_key(&job, key));
        if record["state"] == "cancelled" {
            assert_eq!(live, 0, "{key} is cancelled but live at the destination");
        } else {
            assert_eq!(record["state"], "completed", "{key}");
            assert_eq!(live, 1, "{key}");
        }
    }
}

async fn run_cli_owned(db: String, args: Vec<String>) -> std::process::Output {
    run_cli(&db, args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancels_race_sends_on_sqlite() {
    cancels_race_sends(&sqlite_url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancels_race_sends_on_postgres() {
    let Some(url) = pg_url("cancels_race_sends_on_postgres") else {
        return;
    };
    cancels_race_sends(&url).await;
}

/// SIGTERM: the relay stops claiming, finishes the send in flight, exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_the_send_in_flight_finish() {
    let db = sqlite_url();
    let server = TestServer::start(Mode::Keyed).await.unwrap();
    server.delay_after_create(Duration::from_millis(500));
    let job = unique_job("term");
    enqueue_many(&db, &job, 5);
    let base = server.base_url();
    let relay = spawn(
        &db,
        &[
            "run",
            "--job",
            &job,
            "--http",
            &base,
            "--effect",
            "keyed",
            "--workers",
            "1",
        ],
    );
    let started = Instant::now();
    while server.posts() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the relay never sent"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let term = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(relay.id().to_string())
        .status()
        .unwrap();
    assert!(term.success());
    let out = finish(relay).await;
    assert!(out.status.success(), "{}", text(&out));
    let records = inspect(&db, &job);
    let states: Vec<&str> = records
        .values()
        .map(|r| r["state"].as_str().unwrap())
        .collect();
    assert!(
        !states.contains(&"claimed"),
        "nothing left claimed: {states:?}"
    );
    assert_eq!(
        states.iter().filter(|s| **s == "completed").count(),
        server.all_effects().len()
    );
    assert!(
        states.contains(&"queued"),
        "it stopped claiming: {states:?}"
    );
}
