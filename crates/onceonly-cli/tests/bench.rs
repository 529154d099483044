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

#[test]
fn bench_refuses_bad_input_before_running() {
    let db = "sqlite://unused.db";
    let out = oo(db, &["bench", "--stores", "sqlite,mysql"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("--stores: unknown store \"mysql\"; sqlite or postgres"),
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
