//! The statements that decide who acts count the same rows with
//! CLIENT_FOUND_ROWS (sqlx sets it: an UPDATE counts the rows it matched)
//! and without it (PyMySQL, mysql2, PHP and the `mysql` client: the rows it
//! changed). Each statement runs on two identical rows: through sqlx, and
//! through the `mysql` client as a prepared statement followed by
//! `SELECT ROW_COUNT()`. A control statement that matches without changing
//! shows the two paths really differ.

mod common;

use std::process::Command;
use std::str::FromStr;
use std::time::Duration;

use onceonly::store::{ClaimRow, OpClaim, OpEnqueue, OpMove};
use onceonly::{State, Store};
use onceonly_mysql::{deciding, MySqlStore};
use sqlx::mysql::MySqlConnectOptions;

/// One bound value, as sqlx binds it and as the client spells it.
#[derive(Clone, Copy)]
enum V<'a> {
    S(&'a str),
    I(i64),
    B(bool),
    Null,
}

impl V<'_> {
    fn literal(self) -> String {
        match self {
            V::S(s) => format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''")),
            V::I(n) => n.to_string(),
            V::B(b) => if b { "TRUE" } else { "FALSE" }.to_owned(),
            V::Null => "NULL".to_owned(),
        }
    }
}

/// The session's clock stopped at one instant (`SET timestamp`), so that a
/// statement run twice writes the same times: the case where only the
/// version column tells "changed" from "matched".
const STOPPED_CLOCK: &str = "SET timestamp = 1900000000.123456";

/// Affected rows through sqlx (CLIENT_FOUND_ROWS).
async fn via_sqlx(store: &MySqlStore, sql: &str, values: &[V<'_>]) -> u64 {
    let mut conn = store.pool().acquire().await.unwrap();
    sqlx::query(STOPPED_CLOCK)
        .execute(&mut *conn)
        .await
        .unwrap();
    let mut q = sqlx::query(sql);
    for v in values {
        q = match *v {
            V::S(s) => q.bind(s),
            V::I(n) => q.bind(n),
            V::B(b) => q.bind(b),
            V::Null => q.bind(None::<String>),
        };
    }
    let n = q.execute(&mut *conn).await.unwrap().rows_affected();
    sqlx::query("SET timestamp = DEFAULT")
        .execute(&mut *conn)
        .await
        .unwrap();
    n
}

/// Affected rows through the `mysql` client (no CLIENT_FOUND_ROWS).
fn via_client(database: &str, sql: &str, values: &[V<'_>]) -> u64 {
    let url = MySqlConnectOptions::from_str(&common::url()).unwrap();
    let text: String = sql
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut script = format!(
        "{STOPPED_CLOCK};\nSET @sql = {};\nPREPARE s FROM @sql;\n",
        V::S(&text).literal()
    );
    let names: Vec<String> = (0..values.len()).map(|i| format!("@p{i}")).collect();
    for (name, v) in names.iter().zip(values) {
        script.push_str(&format!("SET {name} = {};\n", v.literal()));
    }
    script.push_str(&format!(
        "EXECUTE s USING {};\nSELECT ROW_COUNT();\n",
        names.join(", ")
    ));
    let out = Command::new("mysql")
        .args(["-N", "-B", "-h", url.get_host(), "-u", url.get_username()])
        .arg(format!("-P{}", url.get_port()))
        .arg(database)
        .arg("-e")
        .arg(&script)
        .output()
        .expect("the mysql client (apt-get install mariadb-client)");
    assert!(
        out.status.success(),
        "mysql: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn claim(op_key: &str) -> OpClaim<'_> {
    OpClaim {
        job_type: "send",
        op_key,
        fingerprint: "f",
        payload: None,
        owner: "w1",
        lease: Duration::from_secs(30),
    }
}

async fn enqueue(store: &MySqlStore, op_key: &str) {
    let p = OpEnqueue {
        job_type: "send",
        op_key,
        fingerprint: "f",
        payload: None,
        delay: None,
    };
    store.op_enqueue(&p).await.unwrap();
}

async fn claimed(store: &MySqlStore, op_key: &str) -> i64 {
    match store.op_claim(&claim(op_key)).await.unwrap() {
        ClaimRow::Claimed(c) => c.token,
        other => panic!("{op_key}: {other:?}"),
    }
}

/// Runs `sql` with `values(key)` on `sqlx-<name>` through sqlx and on
/// `client-<name>` through the client, each with the session's clock stopped
/// at [`STOPPED_CLOCK`]; returns both counts.
async fn both<'k>(
    store: &MySqlStore,
    database: &str,
    sql: &str,
    keys: &'k [String; 2],
    values: impl Fn(&'k str) -> Vec<V<'k>>,
) -> (u64, u64) {
    let a = via_sqlx(store, sql, &values(&keys[0])).await;
    let b = via_client(database, sql, &values(&keys[1]));
    (a, b)
}

fn keys(name: &str) -> [String; 2] {
    [format!("sqlx-{name}"), format!("client-{name}")]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deciding_statements_count_the_same_with_and_without_found_rows() {
    if !common::reachable("deciding_statements_count_the_same_with_and_without_found_rows").await {
        return;
    }
    let store = common::fresh_store().await;
    let db = common::database_of(&store).await;

    // The claim of a queued row, fenced on the token read (0: queued).
    let k = keys("claim");
    for key in &k {
        enqueue(&store, key).await;
    }
    let now = store.now().await.unwrap().0;
    let claim_values = |key| {
        vec![
            V::S("w1"),
            V::I(now),
            V::I(now + 30_000),
            V::I(now),
            V::S("send"),
            V::S(key),
            V::I(0),
            V::S("f"),
            V::I(now),
        ]
    };
    let first = both(&store, &db, deciding::CLAIM_UPDATE, &k, claim_values).await;
    assert_eq!(first, (1, 1), "the claim of a queued row");
    let again = both(&store, &db, deciding::CLAIM_UPDATE, &k, claim_values).await;
    assert_eq!(
        again,
        (0, 0),
        "the same claim again: the row is no longer queued"
    );

    // The owner-checked completion (move.sql), then the same again.
    let k = keys("complete");
    let mut token = 0;
    for key in &k {
        token = claimed(&store, key).await;
    }
    let complete_values = |key| {
        vec![
            V::I(0),
            V::S("completed"),
            V::S("ref-1"),
            V::S("{}"),
            V::Null,
            V::I(0),
            V::S("send"),
            V::S(key),
            V::I(token),
            V::S("claimed"),
            V::B(true),
        ]
    };
    let done = both(&store, &db, deciding::MOVE, &k, complete_values).await;
    assert_eq!(done, (1, 1), "the owner's completion");
    let again = both(&store, &db, deciding::MOVE, &k, complete_values).await;
    assert_eq!(again, (0, 0), "a second completion");

    // A batch completion (complete.sql), and one with a stale token.
    let k = keys("batch");
    for key in &k {
        token = claimed(&store, key).await;
    }
    let batch_values = |token| {
        move |key| {
            vec![
                V::I(0),
                V::Null,
                V::S("{}"),
                V::S("send"),
                V::S(key),
                V::I(token),
            ]
        }
    };
    let stale = both(&store, &db, deciding::COMPLETE, &k, batch_values(token + 1)).await;
    assert_eq!(stale, (0, 0), "a completion with another token");
    let done = both(&store, &db, deciding::COMPLETE, &k, batch_values(token)).await;
    assert_eq!(done, (1, 1), "the batch completion");

    // A move that writes the values the row already holds (held to held,
    // nothing else set, at the same stopped instant twice): it matches, and
    // still changes the row (its version).
    let k = keys("same");
    for key in &k {
        token = claimed(&store, key).await;
        let hold = OpMove::new("send", key, token, State::Claimed, State::Held);
        assert!(store.op_move(&hold).await.unwrap());
    }
    let same_values = |key| {
        vec![
            V::I(0),
            V::S("held"),
            V::Null,
            V::Null,
            V::Null,
            V::I(0),
            V::S("send"),
            V::S(key),
            V::I(token),
            V::S("held"),
            V::B(false),
        ]
    };
    for round in ["first", "second"] {
        let same = both(&store, &db, deciding::MOVE, &k, same_values).await;
        assert_eq!(same, (1, 1), "{round} move to the state the row is in");
    }

    // The control: an update that matches and changes nothing counts 1
    // through sqlx and 0 through the client, so the paths do differ.
    let noop = "UPDATE onceonly_ops SET state = state WHERE job_type = ? AND op_key = ?";
    let control = both(&store, &db, noop, &k, |key| vec![V::S("send"), V::S(key)]).await;
    assert_eq!(control, (1, 0), "CLIENT_FOUND_ROWS on sqlx's path only");
}
