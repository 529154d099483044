//! The replay and crash harness: run the scenarios of docs/DESIGN.md section 5 on
//! your own guarded job, and get a report of what it did next to what a
//! naive version (read the state, then act) does.
//!
//! You give a [`ReplayJob`]: the job's spec, one guarded delivery through a
//! [`onceonly::Guard`] the harness builds (so it can inject faults), one
//! naive delivery on a [`Naive`] state, and a probe that counts effects per
//! operation key at the destination. The [`Harness`] first writes, for every
//! scenario, the count the job's effect kind and policy allow
//! ([`allowed()`]), then runs the naive and the guarded version of each and
//! judges the guarded one against that count.
//!
//! Workers die two ways: a fault injected at a named point, and a real
//! worker process killed with SIGKILL once it reports the point (give a
//! [`WorkerCommand`] whose process calls [`worker::serve`]). Leases expire by
//! moving the store's clock, never by sleeping.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use onceonly::Store;
//! use onceonly_replay::demo::{DemoJob, DemoKind};
//! use onceonly_replay::Harness;
//! use onceonly_sqlite::SqliteStore;
//!
//! let store = SqliteStore::connect("sqlite://replay.db").await?;
//! store.migrate().await?;
//! let job = DemoJob::start(DemoKind::Keyed, "send_receipt").await?;
//! let report = Harness::new(store, job).runs(100).run().await?;
//! print!("{}", report.table());
//! assert!(report.passed());
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

mod allowed;
pub mod demo;
mod error;
mod harness;
mod job;
mod naive;
mod note;
pub mod process;
mod report;
mod scenario;
mod scenarios;
pub mod table;
pub mod worker;

pub use allowed::{after_crash, allowed, Allowed, Counted};
pub use error::{Error, Result};
pub use harness::{Harness, Progress, ProgressFn, DEFAULT_RUNS, DEFAULT_WORKERS};
pub use job::{Consumed, Reconnect, ReplayJob};
pub use naive::{crash_at as naive_crash_at, Naive, NaiveHook};
pub use note::note;
pub use process::{WorkerCommand, WorkerRequest};
pub use report::{Check, Count, Entry, Records, Report, Summary, Verdict};
pub use scenario::{Death, Scenario};
