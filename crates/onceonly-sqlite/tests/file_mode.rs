//! The database file and its `-wal` and `-shm` are created 0600 whatever the
//! umask: checked in a child process (this test binary again) whose umask
//! is 022, as a shell usually leaves it.
#![cfg(unix)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use onceonly::{Payload, Store};
use onceonly_sqlite::SqliteStore;

const CHILD_ENV: &str = "ONCEONLY_FILE_MODE_DB";

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn the_database_its_wal_and_shm_are_0600_under_umask_022() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("private.db");
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"umask 022 && exec "$0" --exact child_opens_a_new_store --ignored --nocapture"#)
        .arg(std::env::current_exe().unwrap())
        .env(CHILD_ENV, &db)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(said.contains("1 passed"), "the child ran: {said}");
    assert_eq!(mode(&db), 0o600, "after the child closed it");
}

#[tokio::test]
#[ignore = "run by the_database_its_wal_and_shm_are_0600_under_umask_022, in a child with umask 022"]
async fn child_opens_a_new_store() {
    let db = std::path::PathBuf::from(std::env::var_os(CHILD_ENV).expect(CHILD_ENV));
    // The umask is really 022 here: a plain new file is 0644.
    let plain = db.with_extension("plain");
    std::fs::write(&plain, "").unwrap();
    assert_eq!(mode(&plain), 0o644, "the child's umask is not 022");

    let store = SqliteStore::connect(&format!("sqlite://{}", db.display()))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let payload = Payload::parse(r#"{"card": "4111 1111 1111 1111"}"#).unwrap();
    onceonly::ops::enqueue(&store, "private", "k1", &payload, None)
        .await
        .unwrap();
    // While the store is open the WAL and the shared memory exist.
    for suffix in ["", "-wal", "-shm"] {
        let path = Path::new(&format!("{}{suffix}", db.display())).to_owned();
        assert_eq!(
            mode(&path),
            0o600,
            "{} is {:o}",
            path.display(),
            mode(&path)
        );
    }
}
