//! The table keeps only the indexes a query reads (migration 0003), and the
//! queries read them: EXPLAIN on a migrated table with a history in it.

use onceonly::Store;
use onceonly_postgres::{sql, PgOptions, PgStore};
use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use sqlx::{PgPool, Postgres, Row};

mod common;

use common::{new_schema, url};

/// A migrated schema holding a history: 5000 completed rows, 100 queued,
/// 100 claimed, in two job types, analyzed as autovacuum would.
async fn with_history() -> (PgStore, String) {
    let schema = new_schema();
    let options = PgOptions::default().schema(&schema).max_connections(2);
    let store = PgStore::connect_with(&url(), options).await.unwrap();
    store.migrate().await.unwrap();
    let fill = format!(
        r#"INSERT INTO "{schema}".ops (job_type, op_key, state, token, fingerprint, due_at,
               lease_until, created_at, updated_at)
           SELECT CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END, 'k' || i,
                  CASE WHEN i < 100 THEN 'queued' WHEN i < 200 THEN 'claimed' ELSE 'completed' END,
                  1, 'f', i, CASE WHEN i BETWEEN 100 AND 199 THEN i END, i,
                  (extract(epoch from now()) * 1000)::bigint - i
           FROM generate_series(0, 5199) AS i"#
    );
    sqlx::query(&fill).execute(store.pool()).await.unwrap();
    sqlx::query(&format!(r#"ANALYZE "{schema}".ops"#))
        .execute(store.pool())
        .await
        .unwrap();
    (store, schema)
}

/// The plan of `query` (its parameters bound), as EXPLAIN's text, on a
/// connection with the batcher's settings.
async fn plan(pool: &PgPool, query: Query<'_, Postgres, PgArguments>) -> String {
    let mut conn = pool.acquire().await.unwrap();
    for (name, value) in sql::BATCH_SETTINGS {
        sqlx::query(&format!("SET {name} = {value}"))
            .execute(&mut *conn)
            .await
            .unwrap();
    }
    let rows = query.fetch_all(&mut *conn).await.unwrap();
    rows.iter()
        .map(|r| r.get::<String, _>(0))
        .collect::<Vec<_>>()
        .join("\n")
}

fn file(name: &str) -> &'static str {
    match name {
        "claim_batch" => include_str!("../queries/claim_batch.sql"),
        "list" => include_str!("../queries/list.sql"),
        "purge" => include_str!("../queries/purge.sql"),
        "move_many" => include_str!("../queries/move_many.sql"),
        "claim_many" => include_str!("../queries/claim_many.sql"),
        other => panic!("no query {other}"),
    }
}

/// `EXPLAIN` + the query file `name` in `schema`, with comments dropped.
fn explain(name: &str, schema: &str) -> String {
    let body: String = file(name)
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n");
    format!("EXPLAIN (COSTS OFF) {}", sql::in_schema(&body, schema))
}

#[tokio::test]
async fn the_table_has_only_the_indexes_queries_read() {
    if !common::ready("the_table_has_only_the_indexes_queries_read").await {
        return;
    }
    let (store, schema) = with_history().await;
    let mut names: Vec<String> = sqlx::query_scalar(
        "SELECT indexname::text FROM pg_indexes WHERE schemaname = $1 AND tablename = 'ops'",
    )
    .bind(&schema)
    .fetch_all(store.pool())
    .await
    .unwrap();
    names.sort();
    // ops_held is the operator's held list (migration 4); the others the
    // relay's claim, its stale sweep and purge.
    assert_eq!(
        names,
        [
            "ops_claimed",
            "ops_finished",
            "ops_held",
            "ops_pkey",
            "ops_queued"
        ]
    );
}

#[tokio::test]
async fn the_relay_the_sweep_and_purge_read_their_partial_indexes() {
    if !common::ready("the_relay_the_sweep_and_purge_read_their_partial_indexes").await {
        return;
    }
    let (store, schema) = with_history().await;
    let pool = store.pool();

    let sql = explain("claim_batch", &schema);
    let q = sqlx::query(&sql)
        .bind(0_i64)
        .bind("a")
        .bind("me")
        .bind(30_000_i64)
        .bind(10_i64);
    let p = plan(pool, q).await;
    assert!(p.contains("using ops_queued"), "{p}");

    // The stale sweep: live claims of one job type whose lease is over.
    let sql = explain("list", &schema);
    let q = sqlx::query(&sql)
        .bind(0_i64)
        .bind(Some("a"))
        .bind(Some("claimed"))
        .bind(true)
        .bind(Some(40_i64));
    let p = plan(pool, q).await;
    assert!(p.contains("ops_claimed"), "{p}");
    // The drain check: is anything of this job type still queued?
    let sql = explain("list", &schema);
    let q = sqlx::query(&sql)
        .bind(0_i64)
        .bind(Some("a"))
        .bind(Some("queued"))
        .bind(false)
        .bind(Some(1_i64));
    let p = plan(pool, q).await;
    assert!(p.contains("ops_queued"), "{p}");

    let sql = explain("purge", &schema);
    let q = sqlx::query(&sql)
        .bind(0_i64)
        .bind(None::<String>)
        .bind(86_400_000_i64);
    let p = plan(pool, q).await;
    assert!(p.contains("ops_finished"), "{p}");
}

/// The batch move walks its arrays in order, looking each row up by its
/// primary key (so rows are locked in the order the batcher sorted them),
/// and the batch claim inserts in array order.
#[tokio::test]
async fn batches_take_their_rows_in_array_order_by_primary_key() {
    if !common::ready("batches_take_their_rows_in_array_order_by_primary_key").await {
        return;
    }
    let (store, schema) = with_history().await;
    let pool = store.pool();
    let n = 64;
    let keys: Vec<String> = (200..200 + n).map(|i| format!("k{i}")).collect();
    let jobs: Vec<&str> = (200..200 + n)
        .map(|i| if i % 2 == 0 { "a" } else { "b" })
        .collect();
    let text = |v: &str| vec![Some(v.to_owned()); n];
    let sql = explain("move_many", &schema);
    let q = sqlx::query(&sql)
        .bind(0_i64)
        .bind(&jobs)
        .bind(&keys)
        .bind(vec![1_i64; n])
        .bind(vec!["completed"; n])
        .bind(vec!["completed"; n])
        .bind(text("ref"))
        .bind(text("null"))
        .bind(vec![None::<String>; n])
        .bind(vec![true; n])
        .bind(vec![0_i64; n]);
    let p = plan(pool, q).await;
    // The batcher's connections keep it a nested loop (see BATCH_SETTINGS).
    let nested = p.find("Nested Loop").unwrap_or_else(|| panic!("{p}"));
    let outer = p
        .find("Function Scan on m")
        .unwrap_or_else(|| panic!("{p}"));
    let inner = p
        .find("Index Scan using ops_pkey")
        .unwrap_or_else(|| panic!("{p}"));
    assert!(nested < outer && outer < inner, "{p}");

    let sql = explain("claim_many", &schema);
    let q = sqlx::query(&sql)
        .bind(0_i64)
        .bind(&jobs)
        .bind(&keys)
        .bind(vec!["me"; n])
        .bind(vec!["f"; n])
        .bind(vec![None::<String>; n])
        .bind(vec![30_000_i64; n]);
    let p = plan(pool, q).await;
    // WITH ORDINALITY comes out in array order: no sort, or one by c.n.
    assert!(p.contains("Function Scan on c"), "{p}");
    assert!(!p.contains("Sort") || p.contains("Sort Key: c.n"), "{p}");
}

/// A table made by migrations 1 and 2 (records in it, the old indexes) keeps
/// every record through migration 3 and ends with the new indexes only.
#[tokio::test]
async fn migration_3_keeps_the_records_and_swaps_the_indexes() {
    if !common::ready("migration_3_keeps_the_records_and_swaps_the_indexes").await {
        return;
    }
    let (store, schema) = with_history().await;
    let pool = store.pool();
    // Back to version 2: its two indexes, none of version 3.
    for stmt in [
        format!(
            r#"DROP INDEX "{schema}".ops_queued, "{schema}".ops_claimed, "{schema}".ops_finished"#
        ),
        format!(r#"CREATE INDEX ops_due ON "{schema}".ops (job_type, state, due_at)"#),
        format!(r#"CREATE INDEX ops_updated ON "{schema}".ops (state, updated_at)"#),
        format!(r#"DELETE FROM "{schema}".migrations WHERE version = 3"#),
    ] {
        sqlx::query(&stmt).execute(pool).await.unwrap();
    }
    let rows = format!(
        r#"SELECT md5(string_agg(o::text, ',' ORDER BY job_type, op_key)) FROM "{schema}".ops AS o"#
    );
    let before: String = sqlx::query_scalar(&rows).fetch_one(pool).await.unwrap();
    store.migrate().await.unwrap();
    let after: String = sqlx::query_scalar(&rows).fetch_one(pool).await.unwrap();
    assert_eq!(before, after, "every record kept as it was");
    let mut names: Vec<String> = sqlx::query_scalar(
        "SELECT indexname::text FROM pg_indexes WHERE schemaname = $1 AND tablename = 'ops'",
    )
    .bind(&schema)
    .fetch_all(pool)
    .await
    .unwrap();
    names.sort();
    // ops_held is the operator's held list (migration 4); the others the
    // relay's claim, its stale sweep and purge.
    assert_eq!(
        names,
        [
            "ops_claimed",
            "ops_finished",
            "ops_held",
            "ops_pkey",
            "ops_queued"
        ]
    );
}
