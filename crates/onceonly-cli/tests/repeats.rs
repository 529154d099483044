//! `onceonly repeats` through the real binary on a user's own table, on
//! SQLite, PostgreSQL and MySQL: known repeats of each pattern, in each kind of
//! time column; hostile table and column names refused with the table left
//! intact; and nothing written.

mod common;

use std::collections::BTreeMap;
use std::str::FromStr;

use common::*;
use serde_json::Value;
use sqlx::mysql::MySqlConnection;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{Connection, PgConnection, SqliteConnection};

/// 2026-11-02T08:00:00Z
const B: i64 = 1_793_606_400;
/// The deploy: 2026-11-02T09:15:00Z
const D: i64 = 1_793_610_900;

/// (key, Unix seconds or NULL): one row each.
const ROWS: &[(Option<&str>, Option<i64>)] = &[
    (Some("retry-1"), Some(B)),
    (Some("retry-1"), Some(B + 20)),
    (Some("retry-1"), Some(B + 50)),
    (Some("reenq-1"), Some(B + 60 + 7200)),
    (Some("reenq-1"), Some(B + 60)),
    (Some("deploy-1"), Some(D - 60)),
    (Some("deploy-1"), Some(D + 180)),
    (Some("deploy-2"), Some(D - 3000)),
    (Some("deploy-2"), Some(D + 120)),
    (Some("single"), Some(B + 5)),
    (None, Some(B + 1)),
    (None, Some(B + 2)),
    (Some("half-null"), Some(B + 10)),
    (Some("half-null"), None),
];

/// One repeated key as every time column must give it: key, count,
/// first_at, last_at, gaps in seconds, pattern.
type Want = (
    &'static str,
    u64,
    &'static str,
    &'static str,
    Vec<f64>,
    &'static str,
);

/// What every time column must give, in output order (oldest first).
fn expected() -> Vec<Want> {
    vec![
        (
            "retry-1",
            3,
            "2026-11-02T08:00:00Z",
            "2026-11-02T08:00:50Z",
            vec![20.0, 30.0],
            "retry",
        ),
        (
            "reenq-1",
            2,
            "2026-11-02T08:01:00Z",
            "2026-11-02T10:01:00Z",
            vec![7200.0],
            "re-enqueue",
        ),
        (
            "deploy-2",
            2,
            "2026-11-02T08:25:00Z",
            "2026-11-02T09:17:00Z",
            vec![3120.0],
            "deploy",
        ),
        (
            "deploy-1",
            2,
            "2026-11-02T09:14:00Z",
            "2026-11-02T09:18:00Z",
            vec![240.0],
            "deploy",
        ),
    ]
}

fn deploys_file() -> String {
    let dir = tempfile::tempdir().unwrap().keep();
    let path = dir.join("deploys.txt");
    std::fs::write(
        &path,
        "# deploys, one per line\n2026-11-02T09:15:00Z\n\n2026-11-04T12:00:00Z\n",
    )
    .unwrap();
    path.display().to_string()
}

fn repeats(db: &str, table: &str, key: &str, at: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["repeats", "--table", table, "--key", key, "--at", at];
    args.extend_from_slice(extra);
    oo(db, &args)
}

fn json(out: &std::process::Output) -> Vec<Value> {
    assert!(out.status.success(), "{}", text(out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}\n{}", text(out))))
        .collect()
}

fn patterns(lines: &[Value]) -> BTreeMap<String, String> {
    lines
        .iter()
        .map(|v| {
            (
                v["key"].as_str().unwrap().to_owned(),
                v["pattern"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Every check that does not depend on the database, for one time column.
fn known_repeats(db: &str, table: &str, key: &str, at: &str, deploys: &str) {
    let out = repeats(db, table, key, at, &["--deploys", deploys, "--json"]);
    let lines = json(&out);
    let want = expected();
    assert_eq!(lines.len(), want.len(), "{at}: {lines:#?}");
    for (got, (k, count, first, last, gaps, pattern)) in lines.iter().zip(want) {
        let ctx = format!("{at}: {got}");
        assert_eq!(got["key"], k, "{ctx}");
        assert_eq!(got["count"], count, "{ctx}");
        assert_eq!(got["first_at"], first, "{ctx}");
        assert_eq!(got["last_at"], last, "{ctx}");
        let g: Vec<f64> = got["gaps_s"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(g, gaps, "{ctx}");
        assert_eq!(got["pattern"], pattern, "{ctx}");
        if pattern == "deploy" {
            assert_eq!(got["deploy_at"], "2026-11-02T09:15:00Z", "{ctx}");
        } else {
            assert!(got["deploy_at"].is_null(), "{ctx}");
        }
    }
    // The SQL goes to stderr with --json, so stdout stays JSON lines.
    let err = String::from_utf8_lossy(&out.stderr);
    let quoted = [format!("\"{at}\""), format!("`{at}`")];
    assert!(
        err.contains("SELECT") && quoted.iter().any(|q| err.contains(q)),
        "{err}"
    );

    // Without deploys, the deploy keys fall back to what their gaps say.
    let p = patterns(&json(&repeats(db, table, key, at, &["--json"])));
    assert_eq!(p["deploy-1"], "retry", "{at}");
    assert_eq!(p["deploy-2"], "re-enqueue", "{at}");
    // Narrower windows.
    let p = patterns(&json(&repeats(
        db,
        table,
        key,
        at,
        &[
            "--deploys",
            deploys,
            "--retry-window",
            "10s",
            "--deploy-window",
            "150s",
            "--json",
        ],
    )));
    assert_eq!(p["retry-1"], "re-enqueue", "{at}");
    assert_eq!(p["deploy-1"], "re-enqueue", "{at}: 3m after the deploy");
    assert_eq!(p["deploy-2"], "deploy", "{at}: 2m after the deploy");

    // The table for people, with the SQL first.
    let out = repeats(db, table, key, at, &["--deploys", deploys]);
    assert!(out.status.success(), "{}", text(&out));
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(t.starts_with("-- the SQL run"), "{t}");
    assert!(t.contains("HAVING COUNT(*) > 1"), "{t}");
    let row = t.lines().find(|l| l.starts_with("retry-1")).unwrap();
    assert!(row.contains("20s, 30s") && row.contains("retry"), "{row}");
    let row = t.lines().find(|l| l.starts_with("reenq-1")).unwrap();
    assert!(row.ends_with(" 2h") && row.contains("re-enqueue"), "{row}");
    let row = t.lines().find(|l| l.starts_with("deploy-1")).unwrap();
    assert!(row.contains("deploy at 2026-11-02T09:15:00Z"), "{row}");
    assert!(
        t.contains("4 keys repeated, 5 rows beyond the first: 1 retry, 1 re-enqueue, 2 deploy"),
        "{t}"
    );
}

/// The SQL `repeats` printed (on stderr with --json), as a script.
fn printed_sql(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| !l.starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n")
}

const HOSTILE: &[&str] = &[
    "x; DROP TABLE {t}",
    "{t}; DROP TABLE {t}",
    "{t}\"; DROP TABLE {t}; --",
    "\"quoted\"",
    "\"{t}\"",
    "with space",
    "{t} --",
    "{t}'",
    "",
    "1st",
    "a.b.c",
];

/// Hostile names in every position: refused before any SQL runs; the
/// table keeps every row.
fn hostile_names_are_refused(db: &str, table: &str, count: impl Fn() -> i64) {
    let before = count();
    for name in HOSTILE {
        let name = name.replace("{t}", table);
        for (t, k, a) in [
            (name.as_str(), "order_id", "at_text"),
            (table, name.as_str(), "at_text"),
            (table, "order_id", name.as_str()),
        ] {
            let out = repeats(db, t, k, a, &[]);
            assert!(!out.status.success(), "{t:?} {k:?} {a:?}: {}", text(&out));
            let said = text(&out);
            assert!(
                said.contains("not a plain identifier"),
                "{t:?} {k:?} {a:?}: {said}"
            );
            assert!(!said.contains("SELECT"), "refused before any SQL: {said}");
        }
    }
    assert_eq!(count(), before, "the table is intact");
    // A plain name that names nothing: the database says so.
    let out = repeats(db, "no_such_table", "order_id", "at_text", &[]);
    assert!(!out.status.success());
    assert!(text(&out).contains("no_such_table"), "{}", text(&out));
    // A misspelt column is named, on SQLite too (which would otherwise read
    // "order_idd" as a string literal and call every row a repeat).
    for (k, a, flag, missing) in [
        ("order_idd", "at_text", "--key", "order_idd"),
        ("order_id", "at_txet", "--at", "at_txet"),
    ] {
        let out = repeats(db, table, k, a, &[]);
        assert!(!out.status.success(), "{k} {a}: {}", text(&out));
        let said = text(&out);
        assert!(
            said.contains(flag) && said.contains(missing) && said.contains("its columns: "),
            "{said}"
        );
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn repeats_on_sqlite() {
    let db = sqlite_url();
    let path = db.trim_start_matches("sqlite://").to_owned();
    let rt = rt();
    rt.block_on(async {
        let options = SqliteConnectOptions::from_str(&db)
            .unwrap()
            .create_if_missing(true);
        let mut conn = SqliteConnection::connect_with(&options).await.unwrap();
        // No declared type for at_mixed: SQLite keeps each value as given.
        sqlx::raw_sql(
            "CREATE TABLE sent_emails (id INTEGER PRIMARY KEY, order_id TEXT, \
             at_text TEXT, at_unix INTEGER, at_real REAL, at_mixed); \
             CREATE TABLE bad_times (k TEXT, at TEXT); \
             INSERT INTO bad_times VALUES ('k1', '2026-11-02T09:15:00Z'), ('k1', 'yesterday');",
        )
        .execute(&mut conn)
        .await
        .unwrap();
        for (i, (key, at)) in ROWS.iter().enumerate() {
            // Three ISO 8601 spellings in turn, one with an offset.
            let text_form = match i % 3 {
                0 => "strftime('%Y-%m-%dT%H:%M:%SZ', ?2, 'unixepoch')",
                1 => "strftime('%Y-%m-%d %H:%M:%S', ?2, 'unixepoch')",
                _ => "strftime('%Y-%m-%dT%H:%M:%S+01:00', ?2 + 3600, 'unixepoch')",
            };
            let mixed = if i % 2 == 0 { "?2" } else { text_form };
            let sql = format!(
                "INSERT INTO sent_emails (order_id, at_text, at_unix, at_real, at_mixed) \
                 VALUES (?1, {text_form}, ?2, ?2 + 0.0, {mixed})"
            );
            sqlx::query(&sql)
                .bind(key)
                .bind(at)
                .execute(&mut conn)
                .await
                .unwrap();
        }
        conn.close().await.unwrap();
    });
    let bytes = || std::fs::read(&path).unwrap();
    let before = bytes();
    let deploys = deploys_file();

    for at in ["at_text", "at_unix", "at_real", "at_mixed"] {
        known_repeats(&db, "sent_emails", "order_id", at, &deploys);
    }

    // The printed SQL runs as it is and returns the rows of the repeats.
    let out = repeats(&db, "sent_emails", "order_id", "at_text", &["--json"]);
    let sql = printed_sql(&out);
    let rows = rt.block_on(async {
        let mut conn = SqliteConnection::connect(&db).await.unwrap();
        sqlx::raw_sql(&sql)
            .fetch_all(&mut conn)
            .await
            .unwrap()
            .len()
    });
    assert_eq!(rows, 9, "{sql}");

    // A time that is not one is named with its key.
    let out = repeats(&db, "bad_times", "k", "at", &[]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("yesterday") && text(&out).contains("k1"),
        "{}",
        text(&out)
    );

    let count = || {
        rt.block_on(async {
            let mut conn = SqliteConnection::connect(&db).await.unwrap();
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM sent_emails")
                .fetch_one(&mut conn)
                .await
                .unwrap()
        })
    };
    hostile_names_are_refused(&db, "sent_emails", count);
    // schema.table is for PostgreSQL only.
    let out = repeats(&db, "main.sent_emails", "order_id", "at_text", &[]);
    assert!(!out.status.success(), "{}", text(&out));

    assert!(
        bytes() == before,
        "repeats wrote to the user's database file"
    );

    // A missing file is an error, not a new empty database.
    let missing = db.replace("cli.db", "missing.db");
    let out = repeats(&missing, "t", "k", "at", &[]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(!std::path::Path::new(&path.replace("cli.db", "missing.db")).exists());
}

/// Drops the test's own table when the test ends, passed or not.
struct DropTable {
    url: String,
    table: String,
}

impl Drop for DropTable {
    fn drop(&mut self) {
        let (url, table) = (self.url.clone(), self.table.clone());
        let _ = std::thread::spawn(move || {
            rt().block_on(async {
                if let Ok(mut conn) = PgConnection::connect(&url).await {
                    let _ = sqlx::raw_sql(&format!("DROP TABLE IF EXISTS {table}"))
                        .execute(&mut conn)
                        .await;
                }
            })
        })
        .join();
    }
}

#[test]
fn repeats_on_postgres() {
    let Some(url) = pg_url("repeats_on_postgres") else {
        return;
    };
    let table = unique_job("repeats").replace('-', "_");
    let _drop = DropTable {
        url: url.clone(),
        table: table.clone(),
    };
    let rt = rt();
    let connect = || async { PgConnection::connect(&url).await.unwrap() };
    rt.block_on(async {
        let mut conn = connect().await;
        sqlx::raw_sql(&format!(
            "CREATE TABLE {table} (id bigserial PRIMARY KEY, order_id text, order_no bigint, \
             at_text text, at_unix bigint, at_real double precision, at_num numeric, \
             at_tz timestamptz, at_ts timestamp)"
        ))
        .execute(&mut conn)
        .await
        .unwrap();
        for (i, (key, at)) in ROWS.iter().enumerate() {
            let text_form = match i % 3 {
                0 => "to_char(to_timestamp($2) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')",
                1 => "to_char(to_timestamp($2) AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS')",
                _ => "to_char(to_timestamp($2 + 3600) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"+01:00\"')",
            };
            let sql = format!(
                "INSERT INTO {table} (order_id, order_no, at_text, at_unix, at_real, at_num, at_tz, at_ts) \
                 VALUES ($1, $3, {text_form}, $2, $2, $2::numeric + 0.000, \
                         to_timestamp($2), to_timestamp($2) AT TIME ZONE 'UTC')"
            );
            let order_no = key.map(|k| 100 + ROWS.iter().position(|r| r.0 == Some(k)).unwrap() as i64);
            sqlx::query(&sql)
                .bind(key)
                .bind(at)
                .bind(order_no)
                .execute(&mut conn)
                .await
                .unwrap();
        }
        conn.close().await.unwrap();
    });
    let deploys = deploys_file();
    for at in ["at_text", "at_unix", "at_real", "at_num", "at_tz", "at_ts"] {
        known_repeats(&url, &table, "order_id", at, &deploys);
    }
    // schema.table, and a session in another time zone: the same times.
    let tokyo = format!(
        "{url}{}options=-c%20TimeZone%3DAsia%2FTokyo",
        if url.contains('?') { "&" } else { "?" }
    );
    known_repeats(
        &tokyo,
        &format!("public.{table}"),
        "order_id",
        "at_tz",
        &deploys,
    );
    // An integer key column.
    let lines = json(&repeats(&url, &table, "order_no", "at_tz", &["--json"]));
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(lines
        .iter()
        .all(|v| v["key"].as_str().unwrap().parse::<i64>().is_ok()));

    // The printed SQL runs as it is (a read-only transaction) in psql or a driver.
    let out = repeats(&url, &table, "order_id", "at_tz", &["--json"]);
    let sql = printed_sql(&out);
    assert!(sql.starts_with("BEGIN READ ONLY;"), "{sql}");
    let rows = rt.block_on(async {
        let mut conn = connect().await;
        sqlx::raw_sql(&sql)
            .fetch_all(&mut conn)
            .await
            .unwrap()
            .len()
    });
    assert_eq!(rows, 9, "{sql}");

    let count = || {
        rt.block_on(async {
            let mut conn = connect().await;
            sqlx::query_scalar::<_, i64>(&format!("SELECT COUNT(*) FROM {table}"))
                .fetch_one(&mut conn)
                .await
                .unwrap()
        })
    };
    hostile_names_are_refused(&url, &table, count);
    let out = repeats(
        &url,
        &format!("public.{table}; DROP TABLE {table}"),
        "order_id",
        "at_tz",
        &[],
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert_eq!(count(), ROWS.len() as i64);
}

/// Drops the test's own MySQL table when the test ends, passed or not.
struct DropMySqlTable {
    url: String,
    table: String,
}

impl Drop for DropMySqlTable {
    fn drop(&mut self) {
        let (url, table) = (self.url.clone(), self.table.clone());
        let _ = std::thread::spawn(move || {
            rt().block_on(async {
                if let Ok(mut conn) = MySqlConnection::connect(&url).await {
                    let _ = sqlx::raw_sql(&format!("DROP TABLE IF EXISTS {table}"))
                        .execute(&mut conn)
                        .await;
                }
            })
        })
        .join();
    }
}

#[test]
fn repeats_on_mysql() {
    let Some(url) = mysql_url("repeats_on_mysql") else {
        return;
    };
    let table = unique_job("repeats").replace('-', "_");
    let keys = format!("{table}_k");
    let _drop = [&table, &keys].map(|t| DropMySqlTable {
        url: url.clone(),
        table: t.clone(),
    });
    let rt = rt();
    let connect = || async { MySqlConnection::connect(&url).await.unwrap() };
    rt.block_on(async {
        let mut conn = connect().await;
        // order_id in the server's default collation, which folds case.
        sqlx::raw_sql(&format!(
            "CREATE TABLE {table} (id BIGINT AUTO_INCREMENT PRIMARY KEY, order_id VARCHAR(40), \
             order_no BIGINT, at_text VARCHAR(40), at_unix BIGINT, at_real DOUBLE, \
             at_num DECIMAL(20,3), at_ts TIMESTAMP NULL, at_dt DATETIME(6)); \
             CREATE TABLE {keys} (k VARCHAR(10), at BIGINT)"
        ))
        .execute(&mut conn)
        .await
        .unwrap();
        for (i, (key, at)) in ROWS.iter().enumerate() {
            let text_form = match i % 3 {
                0 => "DATE_FORMAT(FROM_UNIXTIME(?), '%Y-%m-%dT%H:%i:%sZ')",
                1 => "DATE_FORMAT(FROM_UNIXTIME(?), '%Y-%m-%d %H:%i:%s')",
                _ => "DATE_FORMAT(FROM_UNIXTIME(? + 3600), '%Y-%m-%dT%H:%i:%s+01:00')",
            };
            // sqlx's session is in UTC: FROM_UNIXTIME gives UTC wall time.
            let sql = format!(
                "INSERT INTO {table} (order_id, order_no, at_text, at_unix, at_real, at_num, at_ts, at_dt) \
                 VALUES (?, ?, {text_form}, ?, ?, ?, FROM_UNIXTIME(?), FROM_UNIXTIME(?))"
            );
            let order_no =
                key.map(|k| 100 + ROWS.iter().position(|r| r.0 == Some(k)).unwrap() as i64);
            sqlx::query(&sql)
                .bind(key)
                .bind(order_no)
                .bind(at)
                .bind(at)
                .bind(at.map(|s| s as f64))
                .bind(at.map(|s| s.to_string()))
                .bind(at)
                .bind(at)
                .execute(&mut conn)
                .await
                .unwrap();
        }
        // Three keys the default collation would call one, and one real repeat.
        sqlx::raw_sql(&format!(
            "INSERT INTO {keys} VALUES ('k', {B}), ('K', {B} + 1), ('k ', {B} + 2), \
             ('k2', {B}), ('k2', {B} + 3)"
        ))
        .execute(&mut conn)
        .await
        .unwrap();
        conn.close().await.unwrap();
    });
    let deploys = deploys_file();
    for at in ["at_text", "at_unix", "at_real", "at_num", "at_ts", "at_dt"] {
        known_repeats(&url, &table, "order_id", at, &deploys);
    }
    // database.table, and a session that starts in another time zone: the
    // TIMESTAMP column gives the same times.
    let database = url.rsplit('/').next().unwrap().split('?').next().unwrap();
    let tokyo = format!(
        "{url}{}timezone=%2B09:00",
        if url.contains('?') { "&" } else { "?" }
    );
    known_repeats(
        &tokyo,
        &format!("{database}.{table}"),
        "order_id",
        "at_ts",
        &deploys,
    );
    // Column names ignore case on MySQL, as the server does.
    let lines = json(&repeats(&url, &table, "ORDER_ID", "At_Unix", &["--json"]));
    assert_eq!(lines.len(), 4, "{lines:?}");
    // An integer key column.
    let lines = json(&repeats(&url, &table, "order_no", "at_ts", &["--json"]));
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(lines
        .iter()
        .all(|v| v["key"].as_str().unwrap().parse::<i64>().is_ok()));
    // Keys are compared by their bytes, as onceonly's are.
    let lines = json(&repeats(&url, &keys, "k", "at", &["--json"]));
    let found: Vec<(&str, u64)> = lines
        .iter()
        .map(|v| (v["key"].as_str().unwrap(), v["count"].as_u64().unwrap()))
        .collect();
    assert_eq!(found, [("k2", 2)], "{lines:?}");

    // The printed SQL runs as it is (a read-only transaction) in a driver.
    let out = repeats(&url, &table, "order_id", "at_ts", &["--json"]);
    let sql = printed_sql(&out);
    assert!(sql.contains("START TRANSACTION READ ONLY;"), "{sql}");
    let rows = rt.block_on(async {
        let mut conn = connect().await;
        sqlx::raw_sql(&sql)
            .fetch_all(&mut conn)
            .await
            .unwrap()
            .len()
    });
    assert_eq!(rows, 9, "{sql}");

    let count = || {
        rt.block_on(async {
            let mut conn = connect().await;
            sqlx::query_scalar::<_, i64>(&format!("SELECT COUNT(*) FROM {table}"))
                .fetch_one(&mut conn)
                .await
                .unwrap()
        })
    };
    hostile_names_are_refused(&url, &table, count);
    for name in [
        format!("{database}.{table}; DROP TABLE {table}"),
        format!("{table}`; DROP TABLE {table}; --"),
        format!("`{table}`"),
    ] {
        let out = repeats(&url, &name, "order_id", "at_ts", &[]);
        assert!(!out.status.success(), "{}", text(&out));
        assert!(
            text(&out).contains("not a plain identifier"),
            "{}",
            text(&out)
        );
    }
    assert_eq!(count(), ROWS.len() as i64);
}
