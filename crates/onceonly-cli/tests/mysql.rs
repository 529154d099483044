//! The commands on MySQL (MariaDB): `--db mysql://…` (and `mariadb://…`)
//! migrates, enqueues, relays to a destination and reads the records back.
//! The tests share the database named by `ONCEONLY_TEST_MYSQL`, each with a
//! job type of its own.

mod common;

use common::*;
use onceonly::idempotency_key;
use onceonly_http::test_server::{Mode, TestServer};

fn ok(db: &str, args: &[&str]) -> String {
    let out = oo(db, args);
    assert!(out.status.success(), "{args:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_enqueue_run_inspect_on_mysql() {
    let Some(db) = mysql_url("migrate_enqueue_run_inspect_on_mysql") else {
        return;
    };
    let server = TestServer::start(Mode::Keyed).await.unwrap();
    let job = unique_job("mysql");
    ok(&db, &["migrate"]);
    ok(&db, &["migrate"]);
    let keys = ["a", "A", "b"];
    for key in keys {
        let said = ok(
            &db,
            &[
                "enqueue",
                "--job",
                &job,
                "--key",
                key,
                "--payload",
                r#"{"n": 1}"#,
            ],
        );
        assert!(said.contains("queued"), "{said}");
    }
    let again = ok(
        &db,
        &[
            "enqueue",
            "--job",
            &job,
            "--key",
            "a",
            "--payload",
            r#"{ "n":1 }"#,
        ],
    );
    assert!(
        again.contains("already exists with the same payload"),
        "{again}"
    );
    assert_eq!(inspect(&db, &job)["a"]["state"], "queued");

    let base = server.base_url();
    let run = {
        let (db, job) = (db.clone(), job.clone());
        tokio::task::spawn_blocking(move || {
            let args = [
                "run", "--job", &job, "--http", &base, "--effect", "keyed", "--drain",
            ];
            oo(&db, &args)
        })
    };
    let out = run.await.unwrap();
    assert!(out.status.success(), "{}", text(&out));

    let records = inspect(&db, &job);
    assert_eq!(
        records.keys().collect::<Vec<_>>(),
        ["A", "a", "b"],
        "a and A are two"
    );
    for key in keys {
        assert_eq!(records[key]["state"], "completed", "{}", records[key]);
        assert_eq!(records[key]["token"], 1, "{}", records[key]);
        assert_eq!(
            server.effects(&idempotency_key(&job, key)),
            1,
            "{key} sent once"
        );
    }
    for args in [
        &["held"][..],
        &["stuck"],
        &["history", "--job", &job, "--key", "a"],
    ] {
        ok(&db, args);
    }
    // The same database by its other scheme.
    let mariadb = db.replacen("mysql://", "mariadb://", 1);
    assert_eq!(inspect(&mariadb, &job).len(), 3);
    // Records younger than the redelivery horizon stop repeats: purge refuses
    // them unless forced.
    let refused = oo(&db, &["purge", "--older-than", "0s", "--job", &job]);
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(
        !inspect(&db, &job).is_empty(),
        "refused purge kept the records"
    );
    ok(
        &db,
        &["purge", "--older-than", "0s", "--job", &job, "--force"],
    );
    assert!(inspect(&db, &job).is_empty(), "purged");
}
