//! What refusing duplicate JSON keys costs a payload at enqueue: parsing
//! as before (serde_json to a Value, then canonical text) against
//! `Payload::parse`, which walks the text once more for repeated keys.
//! Both measured in the same run, interleaved.
//!
//! `cargo run -p onceonly --example duplicate_key_check_cost [ROUNDS]`

use std::time::{Duration, Instant};

use onceonly::Payload;

fn payload(items: usize) -> String {
    let items: Vec<String> = (0..items)
        .map(|i| {
            format!(
                r#"{{"sku":"item-{i}","qty":{i},"price":{}.5,"tags":["a","b"]}}"#,
                i % 97
            )
        })
        .collect();
    format!(
        r#"{{"order":42,"to":"ana@example.com","items":[{}]}}"#,
        items.join(",")
    )
}

fn before(text: &str) -> Payload {
    let value: serde_json::Value = serde_json::from_str(text).unwrap();
    Payload::from_value(&value)
}

fn main() {
    let rounds: usize = std::env::args().nth(1).map_or(5, |r| r.parse().unwrap());
    for (name, items, reps) in [
        ("small (2 fields)", 0, 20_000),
        ("1 MB (15k items)", 15_000, 10),
    ] {
        let text = payload(items);
        assert_eq!(before(&text), Payload::parse(&text).unwrap());
        let (mut base, mut now) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..rounds {
            let t = Instant::now();
            for _ in 0..reps {
                std::hint::black_box(before(&text));
            }
            base += t.elapsed();
            let t = Instant::now();
            for _ in 0..reps {
                std::hint::black_box(Payload::parse(&text).unwrap());
            }
            now += t.elapsed();
        }
        let per = |d: Duration| d.as_secs_f64() * 1e6 / (rounds * reps) as f64;
        println!(
            "{name}, {} bytes: before {:.1} us/payload, with the check {:.1} us/payload, {:.2}x",
            text.len(),
            per(base),
            per(now),
            now.as_secs_f64() / base.as_secs_f64()
        );
    }
}
