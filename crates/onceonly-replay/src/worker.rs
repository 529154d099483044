//! The worker side of the SIGKILL scenarios: deliver one message and stop
//! at the requested point, announcing it, until the harness kills the process.
//! And the consumer processes of the concurrent scenario through a queue:
//! consume until stdin closes, then report what was consumed.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use onceonly::{FaultAction, FaultHook, FaultPoint, Guard, Payload, Store};

use tokio::sync::watch;

use crate::error::{Error, Result};
use crate::job::ReplayJob;
use crate::naive::{Naive, NaiveHook};
use crate::process::{WorkerRequest, CONSUMED, REACHED, READY};

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
/// A consumer process (`request.consume`) returns `Ok` once it has stopped
/// and reported; the caller then exits 0.
pub async fn serve<S: Store, J: ReplayJob<S>>(
    job: &J,
    store: S,
    request: &WorkerRequest,
) -> Result<()> {
    let offset = u64::try_from(request.clock_offset_ms).unwrap_or(0);
    store.clock_offset().advance(Duration::from_millis(offset));
    if request.consume {
        return consume(job, store, request.naive).await;
    }
    let point = request.fault_point()?;
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

/// Consumes the job's queue until stdin closes, then prints [`CONSUMED`]
/// and what this process consumed as JSON.
async fn consume<S: Store, J: ReplayJob<S>>(job: &J, store: S, naive: bool) -> Result<()> {
    let (stop, stopped) = watch::channel(false);
    // A thread, not a task: reading stdin blocks.
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        let _ = stop.send(true);
    });
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{READY} pid={}", std::process::id());
        let _ = out.flush();
    }
    let spec = job.spec();
    let consumed = if naive {
        let naive = Naive::new(store, &spec.job_type);
        job.consume_naive(&naive, stopped).await
    } else {
        let guard =
            Guard::new(store, spec)?.with_owner(format!("replay-consumer:{}", std::process::id()));
        job.consume(&guard, stopped).await
    }
    .map_err(|e| Error::Job(format!("consuming the queue: {e}")))?;
    let json = serde_json::to_string(&consumed).expect("a report serializes");
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{CONSUMED} {json}");
    let _ = out.flush();
    Ok(())
}
