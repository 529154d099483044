//! The one-page note for a job: what "once" means for it, in words and
//! counts, derived from its spec alone.

use std::fmt::Write;
use std::time::Duration;

use onceonly::{EffectKind, FaultPoint, JobSpec, StalePolicy};

use crate::allowed::after_crash;

fn d(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

fn kind_words(kind: EffectKind) -> &'static str {
    match kind {
        EffectKind::Local => "local: a write in the same database; claim, effect and completion commit in one transaction",
        EffectKind::Keyed => "keyed: the destination dedups on the idempotency key JOB:KEY, so a redo sends the same key",
        EffectKind::Lookup => "lookup: the destination can be searched by the idempotency key, so a redo looks first",
        EffectKind::Opaque(_) => "opaque: the destination neither dedups nor can be searched",
    }
}

fn policy_words(kind: EffectKind) -> String {
    match kind {
        EffectKind::Opaque(StalePolicy::Hold) => {
            "hold. A claim past its lease is held for a person: nothing is redone, \
             so there are 0 extra effects, and the operation waits until someone resolves it \
             (completed, queued, failed or cancelled)."
                .into()
        }
        EffectKind::Opaque(StalePolicy::AtLeastOnce) => {
            "at-least-once. A claim past its lease is redone once: the effect may \
             happen one extra time, never more (a second stale claim is held)."
                .into()
        }
        EffectKind::Opaque(StalePolicy::AtMostOnce) => {
            "at-most-once. A claim past its lease is given up as failed: the effect \
             may be missing once, and is never repeated."
                .into()
        }
        EffectKind::Local => {
            "none needed. A dead worker's transaction rolls back with its claim, so \
             there is never a stale claim to decide about."
                .into()
        }
        EffectKind::Keyed | EffectKind::Lookup => format!(
            "redo. A claim past its lease is taken over with the next fencing token and \
             the effect is redone safely ({}).",
            if kind == EffectKind::Keyed {
                "same idempotency key"
            } else {
                "looked up first"
            }
        ),
    }
}

/// Wraps each paragraph of `text` at `width` columns; list items keep
/// their hanging indent.
fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let indent = if line.starts_with("- ") { "  " } else { "" };
        let mut current = String::new();
        for word in line.split(' ') {
            if !current.is_empty() && current.len() + 1 + word.len() > width {
                out.push_str(current.trim_end());
                out.push('\n');
                current = indent.to_owned();
            } else if !current.is_empty() && current != indent {
                current.push(' ');
            }
            current.push_str(word);
        }
        out.push_str(current.trim_end());
        out.push('\n');
    }
    out
}

/// The one-page note for `spec`: the operation key (`op_key` says where it
/// comes from), what counts as a repeat, lease and timeout, the effect kind,
/// the stale-claim policy in words, and the effect counts the policy
/// permits at each crash point.
pub fn note(spec: &JobSpec, op_key: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# {}: what \"once\" means for this job\n",
        spec.job_type
    );
    let _ = writeln!(
        out,
        "Operation key: {op_key}. One record per (job type, key), unique in the database."
    );
    let _ = writeln!(
        out,
        "Repeat: a delivery with the same job type, key and payload (same fingerprint). It \
         gets the first run's stored result and does not act. The same key with another \
         payload is refused as an error, never taken for a repeat; a different key is a \
         different operation, however alike the data."
    );
    let heartbeat = spec.heartbeat.map_or_else(
        || "no heartbeat".to_owned(),
        |h| format!("heartbeat every {}", d(h)),
    );
    let _ = writeln!(
        out,
        "Lease and timeout: lease {}, timeout {}, {heartbeat}. A claim younger than its lease \
         is never taken over; a dead worker is noticed one lease after its claim.",
        d(spec.lease),
        d(spec.timeout)
    );
    let broken = spec.broken_timing_rules();
    if broken.is_empty() {
        let _ = writeln!(out, "Timing rules: all hold.");
    } else {
        let _ = writeln!(
            out,
            "Timing rules BROKEN (a worker refuses to start): {}.",
            broken.join("; ")
        );
    }
    let _ = writeln!(out, "Effect kind: {}.", kind_words(spec.effect));
    let _ = writeln!(out, "Stale-claim policy: {}\n", policy_words(spec.effect));
    let _ = writeln!(
        out,
        "Effects permitted per operation when a worker dies and the message is redelivered:"
    );
    for (point, words) in [
        (FaultPoint::AfterClaim, "after the claim, before the effect"),
        (
            FaultPoint::AfterEffect,
            "after the effect, before completion",
        ),
    ] {
        let before = usize::from(point == FaultPoint::AfterEffect);
        let a = after_crash(spec.effect, before);
        let states: Vec<&str> = a.states.iter().map(|s| s.as_str()).collect();
        let _ = writeln!(
            out,
            "- {words}: {} (record ends {})",
            a.short(),
            states.join(" or ")
        );
    }
    let _ = writeln!(
        out,
        "- no death, any number of deliveries, to any number of workers at once: 1 (completed)"
    );
    wrap(&out, 78)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_note_names_the_counts_at_each_crash_point() {
        let spec = JobSpec::new("send_receipt", EffectKind::Opaque(StalePolicy::Hold));
        let text = note(&spec, "the order number");
        assert!(text.contains("Operation key: the order number"), "{text}");
        assert!(text.contains("lease 30s, timeout 10s"), "{text}");
        assert!(
            text.contains("after the claim, before the effect: 0 (record ends held)"),
            "{text}"
        );
        assert!(
            text.contains("after the effect, before completion: 1 (record ends held)"),
            "{text}"
        );
    }
}
