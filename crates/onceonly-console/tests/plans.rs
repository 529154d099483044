//! The operator's SQLite reads stay on their indexes (docs/console.md): the
//! plans SQLite reports for each `queries/operator_*.sql`, on a migrated
//! file. (PostgreSQL's plans depend on its statistics; the bench prints
//! them on a million records.)

mod common;

async fn plan(store: &onceonly_sqlite::SqliteStore, sql: &str, binds: usize) -> String {
    let explain = format!("EXPLAIN QUERY PLAN {sql}");
    let mut q = sqlx::query_as::<_, (i64, i64, i64, String)>(&explain);
    for i in 0..binds {
        q = if i == 1 {
            q.bind(None::<String>)
        } else {
            q.bind(0_i64)
        };
    }
    let rows = q.fetch_all(store.pool()).await.unwrap();
    rows.into_iter().map(|r| r.3).collect::<Vec<_>>().join("\n")
}

#[tokio::test]
async fn operator_reads_use_their_indexes_on_sqlite() {
    let (_, store) = common::sqlite().await;
    let q = |name: &str| {
        std::fs::read_to_string(format!(
            "{}/../onceonly-sqlite/queries/{name}.sql",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    };
    let live = plan(&store, &q("operator_live"), 1).await;
    for index in [
        "onceonly_ops_queued",
        "onceonly_ops_claimed",
        "onceonly_ops_held",
    ] {
        assert!(
            live.contains(&format!("USING COVERING INDEX {index}")),
            "{live}"
        );
    }
    let finished = plan(&store, &q("operator_finished"), 2).await;
    assert!(
        finished.contains(
            "SEARCH onceonly_ops USING COVERING INDEX onceonly_ops_finished (updated_at>?)"
        ),
        "{finished}"
    );
    let events = plan(&store, &q("operator_events"), 2).await;
    assert!(
        events.contains("SEARCH onceonly_audit USING INDEX onceonly_audit_at (at>?)"),
        "{events}"
    );
    let held = plan(&store, &q("operator_held"), 4).await;
    assert!(
        held.contains("USING COVERING INDEX onceonly_ops_held"),
        "{held}"
    );
    assert!(held.contains("SEARCH o USING PRIMARY KEY"), "{held}");
    let stuck = plan(&store, &q("operator_stuck"), 4).await;
    assert!(
        stuck.contains("USING INDEX onceonly_ops_claimed"),
        "{stuck}"
    );
    for p in [&live, &finished, &events, &held, &stuck] {
        for line in p.lines() {
            assert!(
                !line.starts_with("SCAN onceonly_ops") || line.contains("INDEX"),
                "a scan of the whole table: {p}"
            );
        }
    }
}
