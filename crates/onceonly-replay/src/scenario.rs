//! The scenarios of docs/DESIGN.md section 5, named once, so plans, reports and
//! the command line agree on them.

use std::fmt;

use onceonly::FaultPoint;
use serde::Serialize;

/// How a worker dies in a crash scenario: both are required evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Death {
    /// A fault injected at the named point inside this process
    /// ([`onceonly::FaultAction::Crash`]).
    Fault,
    /// A real worker process killed with SIGKILL once it reports that it
    /// reached the point.
    Sigkill,
}

impl Death {
    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Death::Fault => "fault",
            Death::Sigkill => "SIGKILL",
        }
    }
}

/// One scenario of docs/DESIGN.md section 5 (with its variant).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scenario {
    /// 1. The same message delivered 3 times in a row.
    Repeat,
    /// 2. The same message to `workers` workers at once, on separate
    ///    connections, once per run.
    Concurrent {
        /// Workers racing for each message.
        workers: usize,
    },
    /// 3 and 4. A worker dies at `point`; redelivery after the lease.
    Crash {
        /// Where the worker dies: after the claim (3) or after the effect (4).
        point: FaultPoint,
        /// How it dies.
        death: Death,
    },
    /// 5. A claim younger than the lease is not taken over; an older one
    ///    follows the policy.
    Lease,
    /// 6. Two operations with similar data (same payload, keys differing
    ///    only in case): two effects.
    Similar,
    /// 7. Cancel while sending: withdrawn at the destination, or the record
    ///    says it could not be.
    Cancel,
    /// 8. A failure reported after a success leaves the success standing.
    LateFailure,
    /// 9. The same key with another payload is refused.
    OtherPayload,
}

impl Scenario {
    /// Every scenario in the order the harness runs them, with the given
    /// concurrent worker counts.
    pub fn all(workers: &[usize]) -> Vec<Scenario> {
        let mut all = vec![Scenario::Repeat];
        all.extend(
            workers
                .iter()
                .map(|&workers| Scenario::Concurrent { workers }),
        );
        for point in FaultPoint::ALL {
            for death in [Death::Fault, Death::Sigkill] {
                all.push(Scenario::Crash { point, death });
            }
        }
        all.extend([
            Scenario::Lease,
            Scenario::Similar,
            Scenario::Cancel,
            Scenario::LateFailure,
            Scenario::OtherPayload,
        ]);
        all
    }

    /// The scenario's number in docs/DESIGN.md section 5.
    pub fn number(self) -> u8 {
        match self {
            Scenario::Repeat => 1,
            Scenario::Concurrent { .. } => 2,
            Scenario::Crash {
                point: FaultPoint::AfterClaim,
                ..
            } => 3,
            Scenario::Crash { .. } => 4,
            Scenario::Lease => 5,
            Scenario::Similar => 6,
            Scenario::Cancel => 7,
            Scenario::LateFailure => 8,
            Scenario::OtherPayload => 9,
        }
    }

    /// A stable machine name: `repeat`, `concurrent`, `crash_after_claim`, ...
    pub fn id(self) -> &'static str {
        match self {
            Scenario::Repeat => "repeat",
            Scenario::Concurrent { .. } => "concurrent",
            Scenario::Crash {
                point: FaultPoint::AfterClaim,
                ..
            } => "crash_after_claim",
            Scenario::Crash { .. } => "crash_after_effect",
            Scenario::Lease => "lease",
            Scenario::Similar => "similar_data",
            Scenario::Cancel => "cancel_while_sending",
            Scenario::LateFailure => "failure_after_success",
            Scenario::OtherPayload => "other_payload",
        }
    }

    /// The variant, when the scenario has several (`2 workers`, `SIGKILL`).
    pub fn variant(self) -> Option<String> {
        match self {
            Scenario::Concurrent { workers } => Some(format!("{workers} workers")),
            Scenario::Crash { death, .. } => Some(death.name().to_owned()),
            _ => None,
        }
    }

    /// What the scenario does, in a few words, for the table.
    pub fn title(self) -> String {
        match self {
            Scenario::Repeat => "same message 3 times".into(),
            Scenario::Concurrent { workers } => format!("{workers} workers at once"),
            Scenario::Crash { point, death } => {
                let at = match point {
                    FaultPoint::AfterClaim => "after claim",
                    FaultPoint::AfterEffect => "after effect",
                };
                format!("dies {at} ({})", death.name())
            }
            Scenario::Lease => "young claim kept, old by policy".into(),
            Scenario::Similar => "2 ops, similar data".into(),
            Scenario::Cancel => "cancel while sending".into(),
            Scenario::LateFailure => "failure after success".into(),
            Scenario::OtherPayload => "same key, other payload".into(),
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.number(), self.title())
    }
}
