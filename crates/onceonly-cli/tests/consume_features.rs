//! Built without a broker's cargo feature, `onceonly consume` still has
//! the subcommand and says how to get it.

mod common;

use common::*;

#[cfg_attr(all(feature = "sqs", feature = "nats"), allow(dead_code))]
fn without(broker: &str, queue_args: &[&str]) {
    let db = sqlite_url();
    let mut args = vec!["consume", broker];
    args.extend_from_slice(queue_args);
    args.extend([
        "--job",
        "j",
        "--http",
        "http://127.0.0.1:9",
        "--effect",
        "keyed",
    ]);
    let out = oo(&db, &args);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains(&format!("without {broker} support")),
        "{said}"
    );
    assert!(said.contains(&format!("--features {broker}")), "{said}");
}

#[test]
#[cfg(not(feature = "sqs"))]
fn consume_sqs_without_the_feature_says_how_to_get_it() {
    without("sqs", &["--queue-url", "http://127.0.0.1:9/q"]);
}

#[test]
#[cfg(not(feature = "nats"))]
fn consume_nats_without_the_feature_says_how_to_get_it() {
    without("nats", &["--stream", "S", "--consumer", "C"]);
}
