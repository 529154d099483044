//! Named crash points, so tests and the replay harness can stop a worker
//! exactly where a real crash would hurt.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// A point in the guard's life where a worker can die.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultPoint {
    /// The claim is committed; the effect has not started.
    AfterClaim,
    /// The effect reported done; the completion is not yet written.
    AfterEffect,
}

impl FaultPoint {
    /// Every point, in the order a run passes them.
    pub const ALL: [FaultPoint; 2] = [FaultPoint::AfterClaim, FaultPoint::AfterEffect];

    /// The stable name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            FaultPoint::AfterClaim => "after_claim",
            FaultPoint::AfterEffect => "after_effect",
        }
    }
}

impl fmt::Display for FaultPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the guard does at a fault point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultAction {
    /// Go on as normal.
    Continue,
    /// Stop now without writing anything, as a dead process would.
    Crash,
}

/// A hook called at every fault point. A hook may also block for ever so that
/// a parent process can SIGKILL the worker at that point.
pub type FaultHook = Arc<dyn Fn(FaultPoint) -> FaultAction + Send + Sync>;
