//! The check and repeats pages: the CLI's reports (`onceonly check`,
//! `onceonly repeats`) shown to a logged-in person, on SQLite and
//! PostgreSQL, through the same library calls.

mod common;

use std::time::Duration;

use common::*;
use onceonly::operator::OperatorStore;
use onceonly_console::Options;
use onceonly_tools::repeats::Request;

const SETTINGS: &str = r#"
[jobs.send_receipt]
effect = "opaque"
lease = "30s"
timeout = "10s"

[jobs.charge_card]
effect = "keyed"
lease = "10s"
timeout = "20s"
"#;

fn request(table: &str) -> Request {
    Request {
        table: table.into(),
        key: "order_key".into(),
        at: "sent_at".into(),
        deploys: Vec::new(),
        retry_window: Duration::from_secs(300),
        deploy_window: Duration::from_secs(600),
    }
}

/// The user's table of sent mail: order-1 sent twice 30 s apart (a retry),
/// order-2 twice an hour apart (a re-enqueue), order-3 once, and a key
/// holding HTML.
const ROWS: [(&str, &str); 7] = [
    ("order-1", "2026-11-30T10:00:00Z"),
    ("order-1", "2026-11-30T10:00:30Z"),
    ("order-2", "2026-11-30T11:00:00Z"),
    ("order-2", "2026-11-30T12:00:00Z"),
    ("order-3", "2026-11-30T12:30:00Z"),
    ("<b>x</b>", "2026-11-30T13:00:00Z"),
    ("<b>x</b>", "2026-11-30T13:00:01Z"),
];

async fn pages<S: OperatorStore + Clone>(url: &str, store: S, table: &str) {
    let dir = tempfile::tempdir().unwrap();
    let settings = dir.path().join("onceonly.toml");
    std::fs::write(&settings, SETTINGS).unwrap();
    let mut o = Options::new(url);
    o.config = Some(settings.clone());
    o.repeats = Some(request(table));
    let base = serve(store.clone(), o).await;
    let c = logged_in(&base, "alice", None).await;

    let (status, check) = get(&c, &format!("{base}/check")).await;
    assert_eq!(status, 200, "{check}");
    assert!(check.contains("job charge_card: rule broken"), "{check}");
    assert!(
        check.contains("job send_receipt: timing rules hold"),
        "{check}"
    );
    assert!(check.contains("1 timing rule(s) broken"), "{check}");
    // The file is read on every view: fixed, the page says so.
    std::fs::write(
        &settings,
        SETTINGS.replace("timeout = \"20s\"", "timeout = \"5s\""),
    )
    .unwrap();
    let (_, check) = get(&c, &format!("{base}/check")).await;
    assert!(check.contains("Every timing rule holds"), "{check}");
    std::fs::write(&settings, "[jobs.x]\neffect = \"sometimes\"\n").unwrap();
    let (status, check) = get(&c, &format!("{base}/check")).await;
    assert_eq!(status, 200);
    assert!(
        check.contains("id=\"check-problem\"") && check.contains("effect"),
        "{check}"
    );

    let (status, repeats) = get(&c, &format!("{base}/repeats")).await;
    assert_eq!(status, 200, "{repeats}");
    assert!(
        repeats.contains("3 keys repeated, 3 rows beyond the first"),
        "{repeats}"
    );
    assert!(
        repeats.contains(">order-1<") && repeats.contains(">order-2<"),
        "{repeats}"
    );
    assert!(!repeats.contains(">order-3<"), "order-3 did not repeat");
    assert!(
        repeats.contains(">retry<") && repeats.contains(">re-enqueue<"),
        "{repeats}"
    );
    assert!(
        repeats.contains("&#60;b&#62;x&#60;/b&#62;") && !repeats.contains("<b>x"),
        "{repeats}"
    );
    assert!(repeats.contains("read-only"), "the SQL note: {repeats}");

    // Not configured: the pages say how to configure them.
    let base = serve(store, Options::new(url)).await;
    let c = logged_in(&base, "alice", None).await;
    assert!(get(&c, &format!("{base}/check"))
        .await
        .1
        .contains("--config"));
    assert!(get(&c, &format!("{base}/repeats"))
        .await
        .1
        .contains("--repeats-table"));
}

fn insert_sql(table: &str) -> String {
    let values: Vec<String> = ROWS
        .iter()
        .map(|(k, at)| format!("('{k}', '{at}')"))
        .collect();
    format!(
        "INSERT INTO {table} (order_key, sent_at) VALUES {}",
        values.join(", ")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_and_repeats_pages_on_sqlite() {
    let (url, store) = sqlite().await;
    sqlx::query("CREATE TABLE sent_mail (order_key TEXT, sent_at TEXT)")
        .execute(store.pool())
        .await
        .unwrap();
    sqlx::query(&insert_sql("sent_mail"))
        .execute(store.pool())
        .await
        .unwrap();
    pages(&url, store, "sent_mail").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_and_repeats_pages_on_postgres() {
    let Some((url, store)) = postgres("check_and_repeats_pages_on_postgres").await else {
        return;
    };
    let table = format!("{}.sent_mail", store.schema());
    sqlx::query(&format!(
        "CREATE TABLE {table} (order_key TEXT, sent_at TIMESTAMPTZ)"
    ))
    .execute(store.pool())
    .await
    .unwrap();
    sqlx::query(&insert_sql(&table))
        .execute(store.pool())
        .await
        .unwrap();
    pages(&url, store, &table).await;
}
