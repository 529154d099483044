//! `protocol/corpus/answers.json`: the answer rules and the escaping every
//! client applies alike; the Rust core is their reference.

use onceonly::answer::{check_reference, check_result, escape_controls};
use serde_json::Value;

fn corpus() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../protocol/corpus/answers.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("corpus file")).expect("JSON")
}

#[test]
fn answers_are_checked_as_the_corpus_says() {
    let file = corpus();
    let cases = file["cases"].as_array().expect("cases");
    assert!(cases.len() >= 30, "the corpus lost its cases");
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let repeat = case["repeat"].as_u64().unwrap_or(1) as usize;
        let text = case["text"].as_str().unwrap().repeat(repeat);
        let got = match case["part"].as_str().unwrap() {
            "reference" => check_reference(&text),
            "result" => check_result(&text),
            other => panic!("{name}: unknown part {other}"),
        };
        let rule = got.as_ref().err().map(|e| e.rule());
        assert_eq!(rule, case["error"].as_str(), "{name}");
        if let Err(e) = got {
            let message = e.to_string();
            assert!(
                !message.chars().any(onceonly::answer::is_control),
                "{name}: {message:?}"
            );
        }
    }
    let escapes = file["escapes"].as_array().expect("escapes");
    for case in escapes {
        let text = case["text"].as_str().unwrap();
        assert_eq!(
            escape_controls(text),
            case["shown"].as_str().unwrap(),
            "{text:?}"
        );
    }
    println!(
        "answers corpus: {} cases, {} escapes",
        cases.len(),
        escapes.len()
    );
}
