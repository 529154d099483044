//! The worker side of the SIGKILL scenarios: deliver one message and stop
//! at the requested point, announcing it, until the harness kills the process.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use onceonly::{FaultAction, FaultHook, FaultPoint, Guard, Payload, Store};

use crate::error::{Error, Result};
use crate::job::ReplayJob;
use crate::naive::{Naive, NaiveHook};
use crate::process::{WorkerRequest, REACHED};

/// How long a worker that reached its point waits to be killed before it
/// gives up and stops there by itself (as a crash).
pub const KILL_GRACE: Duration = Duration::from_secs(60);

fn announce(point: FaultPoint) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{REACHED} {point} pid={}", std::process::id());
    let _ = out.flush();
}

/// A guard hook that announces `point` and blocks there until the process
/// is killed (or [`KILL_GRACE`] passes, then crashes).
fn announce_and_block(point: FaultPoint) -> FaultHook {
    Arc::new(move |p| {
        if p != point {
            return FaultAction::Continue;
        }
        announce(p);
        // Holding the thread (and any open transaction) is the point: the
        // process must die here, mid-operation.
        std::thread::sleep(KILL_GRACE);
        FaultAction::Crash
    })
}

fn announce_and_wait(point: FaultPoint) -> NaiveHook {
    Arc::new(move |p| {
        Box::pin(async move {
            if p != point {
                return FaultAction::Continue;
            }
            announce(p);
            tokio::time::sleep(KILL_GRACE).await;
            FaultAction::Crash
        })
    })
}

/// Runs one worker process's delivery: `job` on `store`, as `request` says.
///
/// Returns only when the point was never reached (the delivery finished or
/// failed first), as [`Error::Worker`] naming the outcome; the caller exits
/// non-zero, and the harness reports that the job never reached the point.
pub async fn serve<S: Store, J: ReplayJob<S>>(
    job: &J,
    store: S,
    request: &WorkerRequest,
) -> Result<()> {
    let point = request.fault_point()?;
    let offset = u64::try_from(request.clock_offset_ms).unwrap_or(0);
    store.clock_offset().advance(Duration::from_millis(offset));
    let payload = Payload::from_value(&request.payload);
    let spec = job.spec();
    let finished = if request.naive {
        let naive = Naive::new(store, &spec.job_type).with_hook(announce_and_wait(point));
        match job.deliver_naive(&naive, &request.op_key, &payload).await {
            Ok(()) => "the naive delivery finished".to_owned(),
            Err(e) => format!("the naive delivery failed: {e}"),
        }
    } else {
        let guard = Guard::new(store, spec)?
            .with_owner(format!("replay-worker:{}", std::process::id()))
            .with_fault_hook(announce_and_block(point));
        match job.deliver(&guard, &request.op_key, &payload).await {
            Ok(outcome) => format!("the delivery finished: {outcome:?}"),
            Err(e) => format!("the delivery failed: {e}"),
        }
    };
    Err(Error::Worker(format!("{finished}, never reaching {point}")))
}
