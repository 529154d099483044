//! `protocol/decisions.json` is every path of the guard's step machine
//! (`onceonly::protocol::decide`) over a fixed set of representative
//! answers, for the clients in other languages to replay against their
//! ports of it. This test keeps the file equal to the machine;
//! `ONCEONLY_BLESS=1 cargo test -p onceonly --test decisions_json`
//! rewrites it after a change. docs/protocol.md describes the format.

use std::collections::BTreeSet;
use std::path::PathBuf;

use onceonly::protocol::decide::{
    Answer, ClaimAnswer, Claimed, Decider, Done, EffectAnswer, Entry, FaultAnswer, Job,
    LookupAnswer, SleepAnswer, Step, StoredRow, WithdrawAnswer,
};
use onceonly::{EffectKind, StalePolicy, State};
use serde_json::{json, Value};

/// How many answers other than the first (the usual one) a path may take.
/// The first answer of every step is taken on every path, so each step is
/// reached; this bounds the combinations of unusual answers.
const DEPARTURES: usize = 2;

const FINGERPRINT: &str = "fp-1";
const NOW: i64 = 1_000_000;

struct Case {
    name: String,
    job: Job,
    entry: Entry,
    transcript: Vec<(Step, Option<Answer>)>,
}

fn row(state: State, token: i64, attempts: i64) -> StoredRow {
    StoredRow {
        state,
        token,
        attempts,
        owner: Some("w-old".into()),
        fingerprint: FINGERPRINT.into(),
        claimed_at_ms: Some(NOW - 60_000),
        lease_until_ms: None,
        due_at_ms: None,
        external_ref: None,
        result: None,
        error: None,
        cancel_requested: false,
        now_ms: NOW,
    }
}

fn completed() -> StoredRow {
    StoredRow {
        external_ref: Some("r-1".into()),
        result: Some(r#"{"id":"r-1"}"#.into()),
        ..row(State::Completed, 1, 1)
    }
}

fn with_error(r: StoredRow, error: &str) -> StoredRow {
    StoredRow {
        error: Some(error.into()),
        ..r
    }
}

fn live(token: i64, attempts: i64) -> StoredRow {
    StoredRow {
        owner: Some("w-other".into()),
        claimed_at_ms: Some(NOW - 5_000),
        lease_until_ms: Some(NOW + 25_000),
        ..row(State::Claimed, token, attempts)
    }
}

fn stale(token: i64, attempts: i64) -> StoredRow {
    StoredRow {
        owner: Some("w-dead".into()),
        claimed_at_ms: Some(NOW - 60_000),
        lease_until_ms: Some(NOW - 30_000),
        ..row(State::Claimed, token, attempts)
    }
}

fn queued(token: i64, attempts: i64) -> StoredRow {
    StoredRow {
        due_at_ms: Some(NOW + 2_000),
        ..row(State::Queued, token, attempts)
    }
}

/// The rows a delivery's claim may find.
fn claim_answers() -> Vec<(&'static str, Answer)> {
    let existing = |r| Answer::Claim(ClaimAnswer::Existing(r));
    vec![
        (
            "new",
            Answer::Claim(ClaimAnswer::Claimed(Claimed {
                token: 1,
                attempts: 1,
            })),
        ),
        ("completed", existing(completed())),
        (
            "failed",
            existing(with_error(row(State::Failed, 1, 1), "400 bad request")),
        ),
        ("cancelled", existing(row(State::Cancelled, 1, 1))),
        (
            "held",
            existing(with_error(row(State::Held, 1, 1), "held for a person")),
        ),
        ("queued", existing(queued(2, 1))),
        ("live", existing(live(3, 1))),
        ("stale1", existing(stale(3, 1))),
        ("stale2", existing(stale(4, 2))),
        (
            "other_payload",
            existing(StoredRow {
                fingerprint: "fp-other".into(),
                ..completed()
            }),
        ),
    ]
}

/// The rows a read after a take-over (lost, or settled by the policy) may find.
fn race_reads(token: i64) -> Vec<(&'static str, Answer)> {
    let read = |r| Answer::Read(Some(r));
    vec![
        ("completed", read(completed())),
        (
            "failed",
            read(with_error(row(State::Failed, token + 1, 2), "given up")),
        ),
        ("cancelled", read(row(State::Cancelled, token + 1, 2))),
        (
            "held",
            read(with_error(
                row(State::Held, token + 1, 2),
                "held for a person",
            )),
        ),
        ("queued", read(queued(token + 1, 2))),
        ("live", read(live(token + 1, 2))),
        ("still_stale", read(stale(token, 1))),
        ("gone", Answer::Read(None)),
    ]
}

/// The rows a read after a refused write (or a heartbeat's lost claim) may find.
fn refused_reads(token: i64) -> Vec<(&'static str, Answer)> {
    let read = |r| Answer::Read(Some(r));
    vec![
        (
            "ours_cancel",
            read(StoredRow {
                owner: Some("w-me".into()),
                cancel_requested: true,
                lease_until_ms: Some(NOW + 25_000),
                ..row(State::Claimed, token, 1)
            }),
        ),
        ("queued", read(queued(token + 1, 2))),
        ("taken", read(live(token + 1, 2))),
        ("gone", Answer::Read(None)),
    ]
}

fn perform_answers(job: &Job) -> Vec<(&'static str, Answer)> {
    let p = Answer::Perform;
    let done = |external_ref: Option<&str>, result: Value| {
        p(EffectAnswer::Done(Done {
            external_ref: external_ref.map(Into::into),
            result,
            unstored: None,
        }))
    };
    if job.effect == EffectKind::Local {
        return vec![
            ("done", done(None, json!({"rows": 1}))),
            ("raised", p(EffectAnswer::Raised("ValueError: boom".into()))),
            ("timed_out", p(EffectAnswer::TimedOut)),
        ];
    }
    vec![
        ("done", done(Some("r-1"), json!({"id": "r-1"}))),
        ("done_no_ref", done(None, json!({"ok": true}))),
        ("done_bad_ref", done(Some("r-1\u{1b}[2J"), Value::Null)),
        (
            "not_sent",
            p(EffectAnswer::NotSent("connection refused".into())),
        ),
        ("unknown", p(EffectAnswer::Unknown("read timed out".into()))),
        ("failed", p(EffectAnswer::Failed("400 bad request".into()))),
        ("timed_out", p(EffectAnswer::TimedOut)),
        (
            "lease_unrenewed",
            p(EffectAnswer::LeaseUnrenewed("connection reset".into())),
        ),
        ("claim_lost", p(EffectAnswer::ClaimLost)),
        (
            "interrupted",
            p(EffectAnswer::Interrupted("SoftTimeLimitExceeded".into())),
        ),
    ]
}

fn lookup_answers() -> Vec<(&'static str, Answer)> {
    let l = Answer::Lookup;
    vec![
        ("not_found", l(LookupAnswer::NotFound)),
        (
            "found",
            l(LookupAnswer::Found {
                external_ref: Some("r-1".into()),
                result: json!({"id": "r-1"}),
            }),
        ),
        ("unavailable", l(LookupAnswer::Unavailable("503".into()))),
        (
            "interrupted",
            l(LookupAnswer::Interrupted("SoftTimeLimitExceeded".into())),
        ),
        ("timed_out", l(LookupAnswer::TimedOut)),
        ("claim_lost", l(LookupAnswer::ClaimLost)),
        (
            "lease_unrenewed",
            l(LookupAnswer::LeaseUnrenewed("connection reset".into())),
        ),
    ]
}

/// The token this worker holds at the end of `transcript`.
fn our_token(entry: &Entry, transcript: &[(Step, Option<Answer>)]) -> i64 {
    for (step, answer) in transcript.iter().rev() {
        match (step, answer) {
            (Step::Move(m), _) => return m.token,
            (_, Some(Answer::Claim(ClaimAnswer::Claimed(c)))) => return c.token,
            (_, Some(Answer::TakeOver(Some(c)))) => return c.token,
            _ => {}
        }
    }
    match entry {
        Entry::RunClaimed { claim } | Entry::ReleaseUnstarted { claim, .. } => claim.token,
        _ => 0,
    }
}

/// The representative answers to `step`, the usual one first.
fn answers(
    job: &Job,
    entry: &Entry,
    step: &Step,
    transcript: &[(Step, Option<Answer>)],
) -> Vec<(String, Answer)> {
    let named = |v: Vec<(&str, Answer)>, prefix: &str| {
        v.into_iter()
            .map(|(n, a)| (format!("{prefix}={n}"), a))
            .collect::<Vec<_>>()
    };
    match step {
        Step::Claim => named(claim_answers(), "claim"),
        Step::TakeOver { stale_token, .. } => {
            let attempts = transcript
                .iter()
                .find_map(|(_, a)| match a {
                    Some(Answer::Claim(ClaimAnswer::Existing(r))) => Some(r.attempts),
                    _ => None,
                })
                .expect("a take-over follows a stale row");
            let won = Claimed {
                token: stale_token + 1,
                attempts: attempts + 1,
            };
            named(
                vec![
                    ("won", Answer::TakeOver(Some(won))),
                    ("lost", Answer::TakeOver(None)),
                ],
                "take_over",
            )
        }
        Step::Read => {
            let after_take_over = matches!(
                transcript
                    .iter()
                    .rev()
                    .find(|(s, _)| !matches!(s, Step::Audit(_))),
                Some((Step::TakeOver { .. }, _))
            );
            let token = our_token(entry, transcript);
            if after_take_over {
                named(race_reads(token), "read")
            } else {
                named(refused_reads(token), "read")
            }
        }
        Step::Move(m) => {
            let name = m.to.rule().name;
            vec![
                (format!("{name}=true"), Answer::Moved(true)),
                (format!("{name}=false"), Answer::Moved(false)),
            ]
        }
        Step::Audit(_) => vec![(String::new(), Answer::None)],
        Step::Fault { point } => vec![
            (String::new(), Answer::Fault(FaultAnswer::Continue)),
            (format!("{point}=crash"), Answer::Fault(FaultAnswer::Crash)),
        ],
        Step::CancelRequested => vec![
            (String::new(), Answer::CancelRequested(false)),
            ("cancel=true".into(), Answer::CancelRequested(true)),
        ],
        Step::Perform { .. } => named(perform_answers(job), "perform"),
        Step::Lookup => named(lookup_answers(), "lookup"),
        Step::Sleep { .. } => named(
            vec![
                ("slept", Answer::Sleep(SleepAnswer::Slept)),
                ("timed_out", Answer::Sleep(SleepAnswer::TimedOut)),
                ("claim_lost", Answer::Sleep(SleepAnswer::ClaimLost)),
                (
                    "lease_unrenewed",
                    Answer::Sleep(SleepAnswer::LeaseUnrenewed("connection reset".into())),
                ),
            ],
            "sleep",
        ),
        Step::Withdraw { .. } => named(
            vec![
                ("withdrawn", Answer::Withdraw(WithdrawAnswer::Withdrawn)),
                (
                    "not_withdrawn",
                    Answer::Withdraw(WithdrawAnswer::NotWithdrawn("DELETE answered 500".into())),
                ),
            ],
            "withdraw",
        ),
        Step::Finish { .. } | Step::Error { .. } => unreachable!("an end has no answer"),
    }
}

/// A depth-first walk of one job's entry.
struct Walk<'a> {
    job: Job,
    entry: &'a Entry,
    out: &'a mut Vec<Case>,
}

impl Walk<'_> {
    fn explore(
        &mut self,
        name: &str,
        decider: Decider,
        step: Step,
        mut transcript: Vec<(Step, Option<Answer>)>,
        departures: usize,
    ) {
        if step.is_end() {
            transcript.push((step, None));
            self.out.push(Case {
                name: name.to_owned(),
                job: self.job,
                entry: self.entry.clone(),
                transcript,
            });
            return;
        }
        let choices = answers(&self.job, self.entry, &step, &transcript);
        for (i, (label, answer)) in choices.into_iter().enumerate() {
            let departures = departures + usize::from(i > 0);
            if departures > DEPARTURES {
                break;
            }
            let mut d = decider.clone();
            let next = d.next(answer.clone());
            let mut t = transcript.clone();
            t.push((step.clone(), Some(answer)));
            let name = match label.as_str() {
                "" => name.to_owned(),
                _ => format!("{name}/{label}"),
            };
            self.explore(&name, d, next, t, departures);
        }
    }
}

fn jobs() -> Vec<Job> {
    let kinds = [
        EffectKind::Keyed,
        EffectKind::Lookup,
        EffectKind::Opaque(StalePolicy::Hold),
        EffectKind::Opaque(StalePolicy::AtLeastOnce),
        EffectKind::Opaque(StalePolicy::AtMostOnce),
        EffectKind::Local,
    ];
    let mut jobs = Vec::new();
    for effect in kinds {
        for max_retries in [0, 1] {
            // A local effect is never retried under its claim; an opaque one
            // only when not sent, whatever its policy (at-least-once shows it).
            let retried = match effect {
                EffectKind::Local => false,
                EffectKind::Opaque(p) => p == StalePolicy::AtLeastOnce,
                EffectKind::Keyed | EffectKind::Lookup => true,
            };
            if max_retries > 0 && !retried {
                continue;
            }
            jobs.push(Job {
                effect,
                max_retries,
                lease_ms: 30_000,
                timeout_ms: 10_000,
            });
        }
    }
    jobs
}

fn job_name(job: &Job) -> String {
    let kind = match job.effect {
        EffectKind::Opaque(StalePolicy::Hold) => "opaque_hold",
        EffectKind::Opaque(StalePolicy::AtLeastOnce) => "opaque_at_least_once",
        EffectKind::Opaque(StalePolicy::AtMostOnce) => "opaque_at_most_once",
        other => other.name(),
    };
    format!("{kind}/retries={}", job.max_retries)
}

fn entries(job: &Job) -> Vec<(&'static str, Entry)> {
    let fingerprint = FINGERPRINT.to_owned();
    if job.effect == EffectKind::Local {
        return vec![("local", Entry::Local { fingerprint })];
    }
    let first = Claimed {
        token: 5,
        attempts: 1,
    };
    let again = Claimed {
        token: 5,
        attempts: 2,
    };
    let reason = "the relay is stopping".to_owned();
    vec![
        ("run", Entry::Run { fingerprint }),
        ("run_claimed/first", Entry::RunClaimed { claim: first }),
        ("run_claimed/again", Entry::RunClaimed { claim: again }),
        (
            "release_unstarted/first",
            Entry::ReleaseUnstarted {
                claim: first,
                reason: reason.clone(),
            },
        ),
        (
            "release_unstarted/again",
            Entry::ReleaseUnstarted {
                claim: again,
                reason,
            },
        ),
    ]
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for job in jobs() {
        for (entry_name, entry) in entries(&job) {
            let mut d = Decider::new(job, entry.clone());
            let first = d.next(Answer::None);
            let name = format!("{}/{entry_name}", job_name(&job));
            let mut walk = Walk {
                job,
                entry: &entry,
                out: &mut out,
            };
            walk.explore(&name, d, first, Vec::new(), 0);
        }
    }
    out
}

fn generated() -> Value {
    let cases = cases();
    let names: BTreeSet<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names.len(), cases.len(), "case names are unique");
    let cases: Vec<Value> = cases
        .iter()
        .map(|c| {
            let steps: Vec<Value> = c
                .transcript
                .iter()
                .map(|(step, answer)| match answer {
                    Some(a) => json!({"step": step, "answer": a}),
                    None => json!({"step": step}),
                })
                .collect();
            json!({
                "name": c.name,
                "job": c.job,
                "entry": c.entry,
                "steps": steps,
            })
        })
        .collect();
    json!({
        "about": "The guard's decisions: every path of the step machine in crates/onceonly/src/protocol/decide.rs over representative answers (docs/protocol.md). Do not edit: run ONCEONLY_BLESS=1 cargo test -p onceonly --test decisions_json.",
        "version": 1,
        "departures": DEPARTURES,
        "delivery": {"job_type": "mail", "op_key": "order-1", "fingerprint": FINGERPRINT, "owner": "w-me"},
        "count": cases.len(),
        "cases": cases,
    })
}

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../protocol/decisions.json")
}

/// One case per line, so a change of decision is a readable diff.
fn render(v: &Value) -> String {
    let mut out = String::from("{\n");
    let obj = v.as_object().expect("an object");
    for (k, val) in obj {
        if k == "cases" {
            continue;
        }
        out.push_str(&format!("  {}: {},\n", json!(k), val));
    }
    out.push_str("  \"cases\": [\n");
    let cases = v["cases"].as_array().expect("cases");
    for (i, c) in cases.iter().enumerate() {
        let comma = if i + 1 < cases.len() { "," } else { "" };
        out.push_str(&format!("    {c}{comma}\n"));
    }
    out.push_str("  ]\n}\n");
    out
}

#[test]
fn decisions_json_is_the_machine() {
    let text = render(&generated());
    let path = path();
    if std::env::var_os("ONCEONLY_BLESS").is_some() {
        std::fs::write(&path, &text).expect("write decisions.json");
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == text,
        "protocol/decisions.json differs from the machine; run ONCEONLY_BLESS=1 cargo test -p onceonly --test decisions_json"
    );
}

/// The file read back as another client reads it: each recorded answer,
/// read for its step, makes the machine take the next recorded step.
#[test]
fn every_case_replays_from_the_file() {
    let text = std::fs::read_to_string(path()).expect("protocol/decisions.json");
    let file: Value = serde_json::from_str(&text).expect("JSON");
    let cases = file["cases"].as_array().expect("cases");
    let mut jobs = std::collections::HashMap::new();
    for job in jobs_by_json() {
        jobs.insert(serde_json::to_string(&job.0).unwrap(), job.1);
    }
    for case in cases {
        let name = case["name"].as_str().expect("name");
        let job = jobs[&case["job"].to_string()];
        let entry = entry_from_json(&case["entry"]);
        let mut d = Decider::new(job, entry);
        let mut answer = Answer::None;
        for recorded in case["steps"].as_array().expect("steps") {
            let step = d.next(answer);
            assert_eq!(
                serde_json::to_value(&step).unwrap(),
                recorded["step"],
                "{name}"
            );
            answer = match recorded.get("answer") {
                Some(a) => Answer::from_json(&step, a.clone()).expect("an answer"),
                None => Answer::None,
            };
        }
    }
    println!("decisions: {} cases", cases.len());
    assert_eq!(cases.len(), file["count"].as_u64().unwrap() as usize);
}

fn jobs_by_json() -> Vec<(Value, Job)> {
    jobs()
        .into_iter()
        .map(|j| (serde_json::to_value(j).unwrap(), j))
        .collect()
}

fn entry_from_json(v: &Value) -> Entry {
    let claim = || serde_json::from_value::<Claimed>(v["claim"].clone()).expect("claim");
    match v["entry"].as_str().expect("entry") {
        "run" => Entry::Run {
            fingerprint: v["fingerprint"].as_str().unwrap().into(),
        },
        "local" => Entry::Local {
            fingerprint: v["fingerprint"].as_str().unwrap().into(),
        },
        "run_claimed" => Entry::RunClaimed { claim: claim() },
        "release_unstarted" => Entry::ReleaseUnstarted {
            claim: claim(),
            reason: v["reason"].as_str().unwrap().into(),
        },
        other => panic!("unknown entry {other}"),
    }
}
