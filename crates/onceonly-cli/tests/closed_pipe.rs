//! A reader that stops early (`onceonly inspect | head -1`) ends the
//! listing commands quietly: exit 0, nothing on stderr, no panic.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

use common::*;

/// A database with `n` queued records of one job.
fn many_records(n: usize) -> (String, String) {
    let db = sqlite_url();
    let job = unique_job("pipe");
    assert!(oo(&db, &["migrate"]).status.success());
    let lines: String = (0..n)
        .map(|i| format!("{{\"key\": \"k{i}\", \"payload\": {{\"n\": {i}}}}}\n"))
        .collect();
    let out = oo_stdin(
        &db,
        &["enqueue", "--job", &job, "--jsonl", "-"],
        Some(&lines),
    );
    assert!(out.status.success(), "{}", text(&out));
    (db, job)
}

/// Runs `args`, reads `keep` lines of its stdout (0: none), closes the
/// pipe and returns the exit code and stderr.
fn read_then_close(db: &str, args: &[&str], keep: usize) -> (Option<i32>, String) {
    let mut child = Command::new(bin())
        .arg("--db")
        .arg(db)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut reader = BufReader::new(stdout);
    for _ in 0..keep {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "{args:?} printed fewer than {keep} lines");
    }
    drop(reader);
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (status.code(), stderr)
}

#[test]
fn listings_end_quietly_when_the_reader_stops() {
    // Far more than a pipe buffer holds, so the writer meets the closed pipe.
    let (db, job) = many_records(3000);
    let key = "k7";
    for (args, keep) in [
        (&["inspect"][..], 1),
        (&["inspect", "--json"], 1),
        (&["inspect", "--job", &job], 0),
        (&["history", "--job", &job, "--key", key, "--json"], 0),
        (&["history", "--job", &job, "--key", key], 0),
        (&["held"], 0),
        (&["held", "--json"], 0),
        (&["stuck"], 0),
    ] {
        let (code, stderr) = read_then_close(&db, args, keep);
        assert_eq!(code, Some(0), "{args:?} exit, stderr: {stderr}");
        assert_eq!(stderr, "", "{args:?} said something on stderr");
    }
}
