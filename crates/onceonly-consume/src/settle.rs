//! What the consumer does with a message once the guard has answered.
//!
//! Acknowledge only when the record is settled (completed, held, failed,
//! cancelled): the message has nothing left to do. An operation another
//! worker is still on is handed back for the rest of that claim's lease;
//! one to retry, with a backoff; never at once, so nothing spins. A message
//! that can never be processed goes to the dead letters with the reason.

use std::time::Duration;

use onceonly::{Error as CoreError, Outcome};

/// The shortest hand-back: a message is never redelivered at once.
pub const MIN_DELAY: Duration = Duration::from_secs(1);

/// The longest hand-back between two retries.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// What to tell the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// The record is settled: remove the message.
    Ack,
    /// Deliver it again after this delay.
    HandBack(Duration),
    /// It can never be processed: dead letters, with the reason.
    DeadLetter(String),
    /// Say nothing: the worker died (an injected crash) and the broker
    /// redelivers after its own timeout.
    Leave,
}

/// The action for what the guard answered on a message's `deliveries`-th delivery.
pub fn after(outcome: &onceonly::Result<Outcome>, deliveries: u64) -> Action {
    match outcome {
        Ok(
            Outcome::Done { .. }
            | Outcome::Held { .. }
            | Outcome::Failed { .. }
            | Outcome::Cancelled { .. }
            | Outcome::WithdrawFailed { .. },
        ) => Action::Ack,
        // Back when the other worker's claim ends: done by then, or past
        // its lease and settled by the policy on this redelivery.
        Ok(Outcome::InProgress { age, lease, .. }) => {
            Action::HandBack((lease.saturating_sub(*age) + MIN_DELAY).max(MIN_DELAY))
        }
        Ok(Outcome::RetryLater { .. } | Outcome::NotDue { .. }) => {
            Action::HandBack(backoff(deliveries))
        }
        Ok(other) => {
            // A new outcome this crate does not know yet: keep the message.
            tracing::warn!(outcome = ?other, "unknown outcome; handing the message back");
            Action::HandBack(backoff(deliveries))
        }
        Err(e @ CoreError::PayloadMismatch { .. }) => {
            Action::DeadLetter(format!("the key is reused with another payload: {e}"))
        }
        Err(CoreError::Invalid(why)) => Action::DeadLetter(format!("bad message: {why}")),
        Err(CoreError::InjectedCrash(_)) => Action::Leave,
        // Another worker took the claim over: it decides; look again soon.
        Err(CoreError::LostClaim { .. }) => Action::HandBack(MIN_DELAY),
        // The database or the store: not the message's fault.
        Err(_) => Action::HandBack(backoff(deliveries)),
    }
}

/// 1s after the first delivery, doubling per delivery, at most a minute.
pub fn backoff(deliveries: u64) -> Duration {
    let doublings = u32::try_from(deliveries.saturating_sub(1).min(6)).unwrap_or(6);
    (MIN_DELAY * 2u32.pow(doublings)).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;
    use onceonly::{FaultPoint, Payload};

    #[test]
    fn settled_records_are_acked() {
        let done = Ok(Outcome::Done {
            result: serde_json::Value::Null,
            external_ref: None,
            repeat: true,
        });
        assert_eq!(after(&done, 1), Action::Ack);
        assert_eq!(after(&Ok(Outcome::Held { reason: None }), 1), Action::Ack);
        assert_eq!(after(&Ok(Outcome::Failed { error: None }), 1), Action::Ack);
    }

    #[test]
    fn in_progress_waits_for_the_rest_of_the_lease() {
        let busy = Ok(Outcome::InProgress {
            age: Duration::from_secs(10),
            lease: Duration::from_secs(30),
            owner: None,
        });
        assert_eq!(after(&busy, 1), Action::HandBack(Duration::from_secs(21)));
        let over = Ok(Outcome::InProgress {
            age: Duration::from_secs(40),
            lease: Duration::from_secs(30),
            owner: None,
        });
        assert_eq!(after(&over, 1), Action::HandBack(MIN_DELAY));
    }

    #[test]
    fn retries_back_off_and_never_spin() {
        let retry = Ok(Outcome::RetryLater { reason: "x".into() });
        assert_eq!(after(&retry, 1), Action::HandBack(Duration::from_secs(1)));
        assert_eq!(after(&retry, 3), Action::HandBack(Duration::from_secs(4)));
        assert_eq!(after(&retry, 50), Action::HandBack(MAX_BACKOFF));
    }

    #[test]
    fn poison_and_crashes() {
        let mismatch = Err(CoreError::PayloadMismatch {
            job_type: "j".into(),
            op_key: "k".into(),
            stored: Payload::none().fingerprint,
            offered: "f".into(),
        });
        assert!(
            matches!(after(&mismatch, 1), Action::DeadLetter(why) if why.contains("another payload"))
        );
        let crash = Err(CoreError::InjectedCrash(FaultPoint::AfterEffect));
        assert_eq!(after(&crash, 1), Action::Leave);
    }
}
