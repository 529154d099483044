//! `onceonly bench` through the real binary: the scale-out run starts real
//! relay processes on one PostgreSQL and reports what reached the
//! destination; bad input is refused before anything runs. (Its figures are
//! printed, never asserted.)

mod common;

use common::*;

#[test]
fn scale_out_reports_every_operation_reaching_the_destination_once() {
    let Some(url) = pg_url("scale_out_reports_every_operation_reaching_the_destination_once")
    else {
        return;
    };
    let out = oo(
        "sqlite://unused.db",
        &[
            "bench",
            "--pg",
            &url,
            "--relay",
            "--relay-processes",
            "2",
            "--stores",
            "postgres",
            "--ops",
            "300",
            "--batches",
            "1,50",
            "--relay-workers",
            "2",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let measured: Vec<(u64, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["processes"].as_u64().unwrap(),
                r["batch"].as_u64().unwrap(),
            )
        })
        .collect();
    // One process first, as the baseline, then two; per batch size.
    assert_eq!(
        measured,
        [(1, 1), (2, 1), (1, 50), (2, 50)],
        "{}",
        text(&out)
    );
    for r in &rows {
        let ops = r["ops"].as_u64().unwrap();
        assert_eq!(ops, if r["batch"] == 1 { 60 } else { 300 }, "{r}");
        assert_eq!(
            r["posts"].as_u64(),
            Some(ops),
            "one POST per operation: {r}"
        );
        assert_eq!(r["keys_received"].as_u64(), Some(ops), "{r}");
        assert_eq!(r["keys_sent_twice"], 0, "{r}");
        assert_eq!(r["keys_missing"], 0, "{r}");
        assert!(r["ops_per_s"].as_f64().unwrap() > 0.0, "{r}");
    }
}

/// The keyed rows on MySQL: guarded, raw, the minimal operation on sqlx and
/// by mariadb-slap, every figure measured, nothing skipped.
#[test]
fn bench_measures_mysql_beside_the_minimal_operation() {
    let Some(url) = mysql_url("bench_measures_mysql_beside_the_minimal_operation") else {
        return;
    };
    let out = oo(
        &url,
        &[
            "bench",
            "--stores",
            "mysql",
            "--effects",
            "keyed,local",
            "--concurrency",
            "4",
            "--ops",
            "200",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("{\"store\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2, "{}", text(&out));
    for r in &rows {
        assert_eq!(r["store"], "mysql", "{r}");
        assert_eq!(r["ops"], 200, "{r}");
        for f in ["ops_per_s", "raw_ops_per_s", "ratio"] {
            assert!(r[f].as_f64().unwrap() > 0.0, "{f}: {r}");
        }
    }
    let keyed = &rows[0];
    assert_eq!(keyed["effect"], "keyed", "{keyed}");
    assert!(
        keyed["minimal_ops_per_s"].as_f64().unwrap() > 0.0,
        "{keyed}"
    );
    if which("mariadb-slap") {
        assert_eq!(keyed["load_tool"], "mariadb-slap", "{keyed}");
        assert!(keyed["vs_load_tool"].as_f64().unwrap() > 0.0, "{keyed}");
    }
    assert!(rows[1]["minimal_ops_per_s"].is_null(), "{}", rows[1]);
    assert!(
        !text(&out).contains("bench:"),
        "nothing skipped: {}",
        text(&out)
    );
}

fn which(program: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn bench_refuses_bad_input_before_running() {
    let db = "sqlite://unused.db";
    let out = oo(db, &["bench", "--stores", "sqlite,oracle"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("--stores: unknown store \"oracle\"; sqlite, postgres or mysql"),
        "{}",
        text(&out)
    );
    assert!(
        !text(&out).contains("sqlite    keyed"),
        "nothing measured: {}",
        text(&out)
    );

    let out = oo(db, &["bench", "--effects", "keyed,remote"]);
    assert!(
        text(&out).contains("--effects: unknown effect \"remote\"; keyed or local"),
        "{}",
        text(&out)
    );

    let out = oo(db, &["bench", "--relay", "--destinations", "noop,ftp"]);
    assert!(
        text(&out).contains("--destinations: unknown \"ftp\"; noop, http or https"),
        "{}",
        text(&out)
    );

    let out = oo(db, &["bench", "--relay-processes", "2"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("--relay"), "{}", text(&out));
}
