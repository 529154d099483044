//! The cross-language corpus (`protocol/corpus/`): the Rust core is its
//! reference. Every client (Python, Ruby) runs the same files, so a payload
//! fingerprinted in one language is recognised in another, and a key one
//! refuses is refused by all.
//!
//! `ONCEONLY_BLESS=1 cargo test -p onceonly --test protocol_corpus` writes
//! the expected values from this implementation (review the diff: a changed
//! fingerprint breaks every stored record).

use std::path::PathBuf;

use onceonly::{idempotency_key, validate_job_type, validate_op_key, Payload};
use serde_json::Value;

fn corpus(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../protocol/corpus")
        .join(name)
}

fn read(name: &str) -> Value {
    let text = std::fs::read_to_string(corpus(name)).expect("corpus file");
    serde_json::from_str(&text).expect("corpus is JSON")
}

#[test]
fn payloads_canonicalise_and_fingerprint_as_the_corpus_says() {
    let mut file = read("payloads.json");
    let none = Payload::none();
    assert_eq!(file["none"]["canonical"], Value::Null);
    let bless = std::env::var_os("ONCEONLY_BLESS").is_some();
    if bless {
        file["none"]["fingerprint"] = Value::from(none.fingerprint.clone());
    }
    assert_eq!(file["none"]["fingerprint"], Value::from(none.fingerprint));

    let cases = file["cases"].as_array_mut().expect("cases");
    assert!(cases.len() >= 40, "the corpus lost its cases");
    for case in cases.iter_mut() {
        let name = case["name"].as_str().unwrap().to_owned();
        let payload = Payload::parse(case["input"].as_str().unwrap()).unwrap();
        let canonical = payload.json.clone().unwrap();
        if bless {
            case["canonical"] = Value::from(canonical.clone());
            case["fingerprint"] = Value::from(payload.fingerprint.clone());
        }
        assert_eq!(case["canonical"], Value::from(canonical), "{name}");
        assert_eq!(
            case["fingerprint"],
            Value::from(payload.fingerprint),
            "{name}"
        );
    }
    if bless {
        let text = serde_json::to_string_pretty(&file).unwrap() + "\n";
        std::fs::write(corpus("payloads.json"), text).unwrap();
    }
}

#[test]
fn payloads_naming_a_key_twice_are_refused_as_the_corpus_says() {
    let file = read("payloads.json");
    let refused = file["refused"].as_array().expect("refused");
    assert!(refused.len() >= 5, "the corpus lost its refused cases");
    for case in refused {
        let s = |f: &str| case[f].as_str().unwrap();
        let Err(e) = Payload::parse(s("input")) else {
            panic!("{}: accepted", s("name"));
        };
        let said = format!(
            "duplicate key {} in the object at {}",
            Value::from(s("key")),
            s("object")
        );
        assert!(e.to_string().contains(&said), "{}: {e}", s("name"));
    }
}

#[test]
fn keys_and_job_types_are_accepted_and_refused_as_the_corpus_says() {
    let file = read("keys.json");
    let strings = |path: &str| -> Vec<String> {
        file.pointer(path)
            .and_then(Value::as_array)
            .unwrap_or_else(|| panic!("{path}"))
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    for job in strings("/job_types/valid") {
        assert!(validate_job_type(&job).is_ok(), "{job:?} should be valid");
    }
    for job in strings("/job_types/invalid") {
        assert!(
            validate_job_type(&job).is_err(),
            "{job:?} should be refused"
        );
    }
    for key in strings("/op_keys/valid") {
        assert!(validate_op_key(&key).is_ok(), "{key:?} should be valid");
    }
    for key in strings("/op_keys/invalid") {
        assert!(validate_op_key(&key).is_err(), "{key:?} should be refused");
    }
    for case in file["idempotency_keys"].as_array().unwrap() {
        let s = |f: &str| case[f].as_str().unwrap();
        assert_eq!(
            idempotency_key(s("job_type"), s("op_key")),
            s("idempotency_key")
        );
    }
}

#[test]
fn database_urls_are_shown_as_the_corpus_says() {
    let file = read("db_urls.json");
    let cases = file["cases"].as_array().expect("cases");
    assert!(cases.len() >= 20, "the corpus lost its cases");
    for case in cases {
        let s = |f: &str| case[f].as_str().unwrap();
        assert_eq!(
            onceonly::db_url::redact(s("url")),
            s("shown"),
            "{}",
            s("name")
        );
    }
}
