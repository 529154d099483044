//! The count each scenario may produce, derived from the effect kind and the
//! stale-claim policy alone (docs/DESIGN.md section 3), before anything runs.

use onceonly::{EffectKind, FaultPoint, StalePolicy, State};
use serde::Serialize;

use crate::scenario::Scenario;

/// What a scenario counts at the destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Counted {
    /// Effects ever made for the operation (withdrawn ones included).
    Effects,
    /// Items still live at the destination when the scenario ends.
    Live,
}

/// What a scenario may produce, written before it runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Allowed {
    /// Fewest counted items each run may leave.
    pub min: usize,
    /// Most counted items each run may leave.
    pub max: usize,
    /// What is counted.
    pub counted: Counted,
    /// The states the operation records may end in.
    pub states: Vec<State>,
    /// Why, in the words of the effect kind or policy.
    pub why: String,
    /// Set when the scenario cannot apply to this effect kind, with the reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_applicable: Option<String>,
}

impl Allowed {
    fn range(min: usize, max: usize, states: &[State], why: &str) -> Self {
        Self {
            min,
            max,
            counted: Counted::Effects,
            states: states.to_vec(),
            why: why.to_owned(),
            not_applicable: None,
        }
    }

    fn exactly(n: usize, states: &[State], why: &str) -> Self {
        Self::range(n, n, states, why)
    }

    fn not_applicable(why: &str) -> Self {
        Self {
            not_applicable: Some(why.to_owned()),
            ..Self::range(0, 0, &[], why)
        }
    }

    /// True when `count` (one run's) is within the allowed range.
    pub fn admits(&self, count: usize) -> bool {
        (self.min..=self.max).contains(&count)
    }

    /// The range as a person reads it: `1`, `0-1`, `1-2`, with `live` when
    /// live items are counted.
    pub fn short(&self) -> String {
        if self.not_applicable.is_some() {
            return "n/a".into();
        }
        let range = if self.min == self.max {
            self.min.to_string()
        } else {
            format!("{}-{}", self.min, self.max)
        };
        match self.counted {
            Counted::Effects => range,
            Counted::Live => format!("{range} live"),
        }
    }
}

/// Effects that have happened before a worker dies at `point`.
fn done_before(point: FaultPoint) -> usize {
    match point {
        FaultPoint::AfterClaim => 0,
        FaultPoint::AfterEffect => 1,
    }
}

/// What an effect kind permits once a worker died with `before` effects made
/// and the operation was redelivered after the lease.
pub fn after_crash(kind: EffectKind, before: usize) -> Allowed {
    use State::{Completed, Failed, Held};
    match kind {
        EffectKind::Local => Allowed::exactly(
            1,
            &[Completed],
            "local: claim, effect and completion commit in one transaction; a crash rolls all back and the redelivery does it once",
        ),
        EffectKind::Keyed => Allowed::exactly(
            1,
            &[Completed],
            "keyed: the redo sends the same idempotency key and the destination keeps one item",
        ),
        EffectKind::Lookup => Allowed::exactly(
            1,
            &[Completed],
            "lookup: the redo looks the key up first; found, it completes with it; not found, it sends",
        ),
        EffectKind::Opaque(StalePolicy::Hold) => Allowed::exactly(
            before,
            &[Held],
            "hold: 0 extra effects; the stale claim is held for a person to resolve",
        ),
        EffectKind::Opaque(StalePolicy::AtLeastOnce) => Allowed::range(
            1,
            before + 1,
            &[Completed],
            "at-least-once: the stale claim is redone once, so at most 1 extra effect",
        ),
        EffectKind::Opaque(StalePolicy::AtMostOnce) => Allowed::exactly(
            before,
            &[Failed],
            "at-most-once: the stale claim is given up as failed, so at most 1 missing effect and never an extra one",
        ),
    }
}

/// The count `scenario` may produce for a job whose effect is `kind`.
pub fn allowed(kind: EffectKind, scenario: Scenario) -> Allowed {
    use State::{Cancelled, Completed};
    match scenario {
        Scenario::Repeat => Allowed::exactly(
            1,
            &[Completed],
            "a repeat of a completed operation gets its stored result without acting",
        ),
        Scenario::Concurrent { .. } => Allowed::exactly(
            1,
            &[Completed],
            "one claim wins the database's unique constraint; the other workers see it in progress or done",
        ),
        Scenario::Crash { point, .. } => after_crash(kind, done_before(point)),
        Scenario::Lease => {
            let mut a = after_crash(kind, 0);
            a.why = format!(
                "a claim younger than its lease is left alone; past it, {}",
                a.why
            );
            a
        }
        Scenario::Similar => Allowed::exactly(
            2,
            &[Completed],
            "two operation keys are two operations, however alike their data",
        ),
        Scenario::Cancel if kind == EffectKind::Local => Allowed::not_applicable(
            "a local claim lives only inside its transaction: nothing outside can see it, or cancel it, while it runs",
        ),
        Scenario::Cancel => Allowed {
            counted: Counted::Live,
            ..Allowed::range(
                0,
                1,
                &[Cancelled, Completed],
                "withdrawn at the destination (0 live, cancelled), or the withdraw failed and the completed record says so (1 live)",
            )
        },
        Scenario::LateFailure => Allowed::exactly(
            1,
            &[Completed],
            "a failure write names a claim's token and state; on a completed record it changes 0 rows",
        ),
        Scenario::OtherPayload => Allowed::exactly(
            1,
            &[Completed],
            "the same key with another payload is another operation reusing the key: refused, not a repeat",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Death;

    fn crash(point: FaultPoint) -> Scenario {
        Scenario::Crash {
            point,
            death: Death::Fault,
        }
    }

    #[test]
    fn policies_permit_what_design_section_3_says() {
        let opaque = |p| EffectKind::Opaque(p);
        let claim = crash(FaultPoint::AfterClaim);
        let effect = crash(FaultPoint::AfterEffect);
        assert_eq!(allowed(opaque(StalePolicy::Hold), claim).short(), "0");
        assert_eq!(allowed(opaque(StalePolicy::Hold), effect).short(), "1");
        assert_eq!(
            allowed(opaque(StalePolicy::AtLeastOnce), claim).short(),
            "1"
        );
        assert_eq!(
            allowed(opaque(StalePolicy::AtLeastOnce), effect).short(),
            "1-2"
        );
        assert_eq!(allowed(opaque(StalePolicy::AtMostOnce), claim).short(), "0");
        assert_eq!(
            allowed(opaque(StalePolicy::AtMostOnce), effect).short(),
            "1"
        );
        for kind in [EffectKind::Local, EffectKind::Keyed, EffectKind::Lookup] {
            assert_eq!(allowed(kind, claim).short(), "1");
            assert_eq!(allowed(kind, effect).short(), "1");
        }
        assert_eq!(
            allowed(EffectKind::Keyed, Scenario::Cancel).short(),
            "0-1 live"
        );
        assert_eq!(allowed(EffectKind::Local, Scenario::Cancel).short(), "n/a");
    }
}
