//! `protocol/corpus/timing.json`: a refused start reads the same in every
//! client. The Rust core runs the cases whose inputs it has (those listing
//! `rust` in `clients`); the Python and Ruby suites run theirs.

use std::path::PathBuf;
use std::time::Duration;

use onceonly::{parse_duration, timing_lines, EffectKind, JobSpec};
use serde_json::Value;

fn corpus() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../protocol/corpus/timing.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("timing.json")).expect("JSON")
}

fn duration(input: &Value, name: &str) -> Option<Duration> {
    input
        .get(name)
        .map(|v| parse_duration(v.as_str().expect("a duration string")).expect(name))
}

fn spec(input: &Value) -> JobSpec {
    let mut spec = JobSpec::new(input["job"].as_str().expect("job"), EffectKind::Keyed);
    spec.lease = duration(input, "lease").expect("lease");
    spec.timeout = duration(input, "timeout").expect("timeout");
    spec.heartbeat = duration(input, "heartbeat");
    spec.redelivery_timeout = duration(input, "redelivery_timeout");
    spec.lock_lifetime = duration(input, "lock_lifetime");
    spec
}

#[test]
fn refusals_read_as_the_corpus_says() {
    let file = corpus();
    let cases = file["cases"].as_array().expect("cases");
    let mut ran = 0;
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let clients = case["clients"].as_array().unwrap();
        if !clients.iter().any(|c| c == "rust") {
            continue;
        }
        let spec = spec(&case["input"]);
        let lines = timing_lines(&spec.job_type, &spec.broken_timing_rules());
        let expected: Vec<String> = case["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(lines, expected, "{name}");
        let refused = spec.validate().err().map(|e| e.to_string());
        assert_eq!(refused.as_deref(), case["refused"].as_str(), "{name}");
        ran += 1;
    }
    assert!(ran >= 10, "the corpus lost its cases");
    println!("timing corpus: {ran} of {} cases run by Rust", cases.len());
}
