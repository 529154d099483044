//! The operation record as every store returns it.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Serialize, Serializer};

/// A time read from the database's clock, in milliseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DbTime(pub i64);

impl DbTime {
    /// How long after `earlier` this is (zero when it is not after).
    pub fn since(self, earlier: DbTime) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0).max(0) as u64)
    }
}

impl fmt::Display for DbTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = UNIX_EPOCH + Duration::from_millis(self.0.max(0) as u64);
        write!(f, "{}", humantime::format_rfc3339_millis(t))
    }
}

impl Serialize for DbTime {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl From<SystemTime> for DbTime {
    fn from(t: SystemTime) -> Self {
        DbTime(
            t.duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64),
        )
    }
}

/// Where an operation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Recorded, waiting to be claimed (outbox rows, released claims).
    Queued,
    /// A worker holds the claim and may be acting.
    Claimed,
    /// The effect happened; `result` and `external_ref` say what it returned.
    Completed,
    /// The effect failed for good, or the policy gave it up.
    Failed,
    /// Nobody can tell whether the effect happened; a person must decide.
    Held,
    /// Withdrawn before or after the effect.
    Cancelled,
}

impl State {
    /// Every state.
    pub const ALL: [State; 6] = [
        State::Queued,
        State::Claimed,
        State::Completed,
        State::Failed,
        State::Held,
        State::Cancelled,
    ];

    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Queued => "queued",
            State::Claimed => "claimed",
            State::Completed => "completed",
            State::Failed => "failed",
            State::Held => "held",
            State::Cancelled => "cancelled",
        }
    }

    /// True for states no worker will move again on its own.
    pub fn is_final(self) -> bool {
        matches!(self, State::Completed | State::Failed | State::Cancelled)
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for State {
    type Err = UnknownState;
    fn from_str(s: &str) -> Result<Self, UnknownState> {
        State::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownState(s.to_owned()))
    }
}

/// A state name that is none of [`State::ALL`]; as [`crate::Error`] it is
/// [`crate::Error::Invalid`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown state {0:?}; one of queued, claimed, completed, failed, held, cancelled")]
pub struct UnknownState(pub String);

/// One operation record, as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Record {
    /// Job type (identity, with `op_key`).
    #[serde(rename = "job")]
    pub job_type: String,
    /// Operation key (identity, with `job_type`).
    #[serde(rename = "key")]
    pub op_key: String,
    /// Where the operation stands.
    pub state: State,
    /// Fencing token: +1 on every claim or take-over.
    pub token: i64,
    /// Who holds or last held the claim.
    pub owner: Option<String>,
    /// How many claims were taken.
    pub attempts: i64,
    /// Hex SHA-256 of the payload.
    pub fingerprint: String,
    /// The payload, canonical JSON.
    pub payload: Option<String>,
    /// The effect's reference at the destination.
    pub external_ref: Option<String>,
    /// What the first completed run returned, JSON.
    pub result: Option<String>,
    /// An operator asked to cancel while the claim was live.
    pub cancel_requested: bool,
    /// The last error or the reason for the current state.
    pub error: Option<String>,
    /// When a queued operation may first be claimed.
    pub due_at: Option<DbTime>,
    /// When the current or last claim was taken.
    pub claimed_at: Option<DbTime>,
    /// Until when the current claim is live.
    pub lease_until: Option<DbTime>,
    /// When the record was created.
    pub created_at: DbTime,
    /// When the record last changed.
    pub updated_at: DbTime,
    /// When the operation completed.
    pub completed_at: Option<DbTime>,
}

impl Record {
    /// The stored result as JSON (`null` when there is none).
    pub fn result_value(&self) -> serde_json::Value {
        self.result
            .as_deref()
            .and_then(|r| serde_json::from_str(r).ok())
            .unwrap_or(serde_json::Value::Null)
    }

    /// True when the claim's lease has run out at `now`.
    pub fn lease_expired(&self, now: DbTime) -> bool {
        self.lease_until.is_none_or(|until| until <= now)
    }
}

/// A record together with the database's time when it was read.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The record.
    pub record: Record,
    /// The database's clock at the read.
    pub now: DbTime,
}
