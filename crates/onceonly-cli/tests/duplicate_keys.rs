//! A payload naming a key twice is refused at enqueue, naming the key:
//! serde_json would keep the last one and store another payload than sent.

mod common;

use common::*;

#[test]
fn enqueue_refuses_a_payload_with_a_duplicate_key() {
    let db = sqlite_url();
    let job = unique_job("dup");
    for (payload, said) in [
        (
            r#"{"a":1,"a":2}"#,
            r#"duplicate key "a" in the object at $;"#,
        ),
        (
            r#"{"x":{"b":[{"c":1,"c":1}]}}"#,
            r#"duplicate key "c" in the object at $.x.b[0];"#,
        ),
    ] {
        let out = oo(
            &db,
            &["enqueue", "--job", &job, "--key", "k", "--payload", payload],
        );
        assert!(!out.status.success(), "{payload} accepted: {}", text(&out));
        assert!(text(&out).contains(said), "{payload}: {}", text(&out));
    }
    let out = oo(&db, &["inspect", "--json"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "",
        "nothing is queued"
    );
}

#[test]
fn enqueue_jsonl_refuses_every_line_with_a_duplicate_key_and_queues_nothing() {
    let db = sqlite_url();
    let job = unique_job("dupl");
    let lines = concat!(
        "{\"key\": \"ok\", \"payload\": {\"a\": 1}}\n",
        "{\"key\": \"bad\", \"payload\": {\"a\": 1, \"a\": 2}}\n",
    );
    let out = oo_stdin(
        &db,
        &["enqueue", "--job", &job, "--jsonl", "-"],
        Some(lines),
    );
    assert!(!out.status.success(), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("refused line 2: ")
            && said.contains(r#"duplicate key "a" in the object at $.payload;"#)
            && !said.contains("line 1:"),
        "{said}"
    );
    let out = oo(&db, &["inspect", "--json"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "",
        "nothing is queued"
    );
}
