//! What an operator looks at: the held and stuck lists, and the counts of an
//! overview. The CLI (`onceonly held`, `onceonly stuck`) and the console
//! both read through these functions, so a list means the same everywhere.
//!
//! Every read here is served by an index over the rows it looks for (live
//! rows, or rows finished within a window), never by a scan of the whole
//! history: a table of millions of finished records answers as fast as an
//! empty one (see docs/console.md for the plans).

use std::future::Future;
use std::time::Duration;

use crate::audit::AuditKind;
use crate::error::Result;
use crate::record::{DbTime, Record, State};
use crate::store::Store;

/// Which operator list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// Held: a person must decide.
    Held,
    /// Claimed and past the lease: nobody has settled it yet.
    Stuck,
}

impl Which {
    /// `held` or `stuck`.
    pub fn as_str(self) -> &'static str {
        match self {
            Which::Held => "held",
            Which::Stuck => "stuck",
        }
    }
}

/// Parameters of [`OperatorStore::op_page`]: one page of a list, ordered by
/// when the claim in question began (the last claim, else the record's
/// creation), then job type and key.
#[derive(Debug, Clone, Copy)]
pub struct OpPage<'a> {
    /// Held or stuck.
    pub which: Which,
    /// Only this job type.
    pub job_type: Option<&'a str>,
    /// At most this many rows (all when `None`).
    pub limit: Option<u32>,
    /// Skip this many rows first.
    pub offset: u64,
}

/// The count of one live state (queued, claimed, held) for one job type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveCount {
    /// Job type.
    pub job_type: String,
    /// Queued, claimed or held.
    pub state: State,
    /// How many records.
    pub count: i64,
    /// Of the claimed, how many are past their lease (stuck); 0 otherwise.
    pub stuck: i64,
    /// Of the held, when the oldest one's claim began.
    pub oldest: Option<DbTime>,
}

/// The count of one finished state for one job type within a window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateCount {
    /// Job type.
    pub job_type: String,
    /// Completed, failed or cancelled.
    pub state: State,
    /// How many records.
    pub count: i64,
}

/// The count of one kind of audit event within a window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventCount {
    /// What happened.
    pub event: AuditKind,
    /// How many times.
    pub count: i64,
}

/// The reads an operator's tools make, beyond [`Store`]'s. Each answers from
/// an index over just the rows it counts or lists.
pub trait OperatorStore: Store {
    /// The live states (queued, claimed, held) counted by job type, with the
    /// stuck claims and the oldest held claim.
    fn op_counts_live(&self) -> impl Future<Output = Result<Vec<LiveCount>>> + Send;

    /// Records that finished (completed, failed, cancelled: their last
    /// update) within `window` before the database's now, by job type.
    fn op_counts_finished(
        &self,
        window: Duration,
    ) -> impl Future<Output = Result<Vec<StateCount>>> + Send;

    /// Audit events within `window` before the database's now, by kind.
    fn op_counts_events(
        &self,
        window: Duration,
    ) -> impl Future<Output = Result<Vec<EventCount>>> + Send;

    /// One page of the held or stuck list (see [`OpPage`]).
    fn op_page(&self, p: &OpPage<'_>) -> impl Future<Output = Result<Vec<Record>>> + Send;
}

/// When the claim in question began: the last claim, else the record's creation.
pub fn started(r: &Record) -> DbTime {
    r.claimed_at.unwrap_or(r.created_at)
}

/// Held operations or stuck claims, oldest first, with the database's clock
/// read after the list (so no age comes out negative).
pub async fn list<S: OperatorStore>(
    store: &S,
    which: Which,
    job_type: Option<&str>,
    limit: Option<u32>,
    offset: u64,
) -> Result<(Vec<Record>, DbTime)> {
    let page = OpPage {
        which,
        job_type,
        limit,
        offset,
    };
    let records = store.op_page(&page).await?;
    let now = store.now().await?;
    Ok((records, now))
}

/// What the overview shows: the live counts, what finished and what the
/// audit trail recorded within a window, on the database's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overview {
    /// The database's clock when read.
    pub now: DbTime,
    /// The window of `finished` and `events`.
    pub window: Duration,
    /// Queued, claimed and held by job type.
    pub live: Vec<LiveCount>,
    /// Completed, failed and cancelled within the window, by job type.
    pub finished: Vec<StateCount>,
    /// Audit events within the window, by kind.
    pub events: Vec<EventCount>,
}

impl Overview {
    /// Held operations, every job type.
    pub fn held(&self) -> i64 {
        self.live_sum(State::Held, |c| c.count)
    }

    /// Stuck claims, every job type.
    pub fn stuck(&self) -> i64 {
        self.live_sum(State::Claimed, |c| c.stuck)
    }

    /// How long the oldest held operation has waited.
    pub fn oldest_held_age(&self) -> Option<Duration> {
        self.live
            .iter()
            .filter_map(|c| c.oldest)
            .min()
            .map(|t| self.now.since(t))
    }

    /// Every job type seen, sorted.
    pub fn job_types(&self) -> Vec<String> {
        let mut jobs: Vec<String> = self
            .live
            .iter()
            .map(|c| c.job_type.clone())
            .chain(self.finished.iter().map(|c| c.job_type.clone()))
            .collect();
        jobs.sort();
        jobs.dedup();
        jobs
    }

    /// The count of `state` for `job_type`: live, or finished within the window.
    pub fn count(&self, job_type: &str, state: State) -> i64 {
        let live = self
            .live
            .iter()
            .filter(|c| c.job_type == job_type && c.state == state)
            .map(|c| c.count);
        let finished = self
            .finished
            .iter()
            .filter(|c| c.job_type == job_type && c.state == state)
            .map(|c| c.count);
        live.chain(finished).sum()
    }

    /// Of `job_type`'s claims, how many are stuck.
    pub fn stuck_of(&self, job_type: &str) -> i64 {
        self.live
            .iter()
            .filter(|c| c.job_type == job_type)
            .map(|c| c.stuck)
            .sum()
    }

    /// How many `event`s the audit trail recorded within the window.
    pub fn events_of(&self, event: AuditKind) -> i64 {
        self.events
            .iter()
            .filter(|c| c.event == event)
            .map(|c| c.count)
            .sum()
    }

    fn live_sum(&self, state: State, f: impl Fn(&LiveCount) -> i64) -> i64 {
        self.live.iter().filter(|c| c.state == state).map(f).sum()
    }
}

/// Reads the overview; `window` is how far back finished records and audit
/// events are counted.
pub async fn overview<S: OperatorStore>(store: &S, window: Duration) -> Result<Overview> {
    // Asked together: one round trip's wait instead of four.
    let (live, finished, events, now) = futures::try_join!(
        store.op_counts_live(),
        store.op_counts_finished(window),
        store.op_counts_events(window),
        store.now(),
    )?;
    Ok(Overview {
        now,
        window,
        live,
        finished,
        events,
    })
}

/// A duration in a few characters, for tables: `850ms`, `12s`, `5m 3s`,
/// `2h 5m`, `3d 4h`.
pub fn short_duration(ms: i64) -> String {
    let s = ms / 1000;
    match s {
        0 => format!("{ms}ms"),
        1..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h {}m", s / 3600, s / 60 % 60),
        _ => format!("{}d {}h", s / 86_400, s / 3600 % 24),
    }
}

/// Milliseconds of a duration, saturating.
pub fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::short_duration;

    #[test]
    fn short_durations() {
        assert_eq!(short_duration(850), "850ms");
        assert_eq!(short_duration(12_000), "12s");
        assert_eq!(short_duration(303_000), "5m 3s");
        assert_eq!(short_duration(7_500_000), "2h 5m");
        assert_eq!(short_duration(273_600_000), "3d 4h");
    }
}
