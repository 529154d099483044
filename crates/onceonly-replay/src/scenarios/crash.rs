//! Scenarios 3 and 4: a worker dies after the claim or after the effect, by an
//! injected fault or a real SIGKILL; the message is redelivered after the
//! lease (the clock is moved, not waited for) and the effects counted.

use onceonly::{Error as CoreError, FaultPoint, Payload};

use super::{describe, describe_record, Ctx, Observed};
use crate::error::{Error, Result};
use crate::job::{Reconnect, ReplayJob};
use crate::naive::crash_at;
use crate::process::{kill_at, Killed, WorkerRequest};
use crate::report::Count;
use crate::scenario::Death;

fn tag(point: FaultPoint, death: Death) -> String {
    format!("{}/{}", point.name(), death.name().to_lowercase())
}

/// Kills a worker process at `point` while it delivers `key`.
async fn sigkill<S: Reconnect, J: ReplayJob<S>>(
    ctx: &Ctx<S, J>,
    key: &str,
    payload: &Payload,
    point: FaultPoint,
    naive: bool,
) -> Result<Killed> {
    let command = ctx.worker.as_ref().ok_or_else(|| {
        Error::Worker("no worker command: give one with Harness::worker_command".into())
    })?;
    let request = WorkerRequest {
        op_key: key.to_owned(),
        payload: payload.value(),
        point: point.name().to_owned(),
        naive,
        clock_offset_ms: ctx.store.clock_offset().millis(),
        consume: false,
    };
    let killed = kill_at(command, &request).await?;
    ctx.started_processes(1);
    if killed.signal == Some(9) {
        ctx.sigkilled();
    }
    Ok(killed)
}

pub(crate) async fn guarded<S: Reconnect, J: ReplayJob<S>>(
    ctx: &Ctx<S, J>,
    point: FaultPoint,
    death: Death,
) -> Result<Observed> {
    let key = ctx.key(&format!(
        "s{}/{}/guarded",
        point_number(point),
        tag(point, death)
    ));
    let payload = ctx.payload(1);
    let mut obs = Observed::default();
    match death {
        Death::Fault => {
            let first = ctx
                .job
                .deliver(&ctx.dying_guard(point)?, &key, &payload)
                .await;
            obs.check(
                format!("the worker died at {point}"),
                matches!(first, Err(CoreError::InjectedCrash(p)) if p == point),
                describe(&first),
            );
        }
        Death::Sigkill => {
            let killed = sigkill(ctx, &key, &payload, point, false).await?;
            obs.check(
                format!("the worker process was killed by SIGKILL at {point}"),
                killed.signal == Some(9),
                killed.describe(),
            );
            obs.note(killed.describe());
        }
    }
    let left = ctx.record(&key).await?;
    obs.note(format!(
        "left by the dead worker: {}",
        describe_record(left.as_ref())
    ));
    ctx.past_lease();
    let again = ctx
        .job
        .deliver(&ctx.guard(&ctx.store, "redelivery")?, &key, &payload)
        .await;
    obs.note(format!("redelivery after the lease: {}", describe(&again)));
    obs.check(
        "the redelivery after the lease returned without error",
        again.is_ok(),
        describe(&again),
    );
    obs.finish(ctx, &[&key]).await
}

pub(crate) async fn naive<S: Reconnect, J: ReplayJob<S>>(
    ctx: &Ctx<S, J>,
    point: FaultPoint,
    death: Death,
) -> Result<Count> {
    let key = ctx.key(&format!(
        "s{}/{}/naive",
        point_number(point),
        tag(point, death)
    ));
    let payload = ctx.payload(1);
    match death {
        Death::Fault => {
            let dying = ctx.naive(&ctx.store).with_hook(crash_at(point));
            // The naive delivery is expected to stop with the injected crash.
            let _ = ctx.job.deliver_naive(&dying, &key, &payload).await;
        }
        Death::Sigkill => {
            sigkill(ctx, &key, &payload, point, true).await?;
        }
    }
    ctx.past_lease();
    ctx.deliver_naive(&ctx.naive(&ctx.store), &key, &payload)
        .await?;
    Ok(Count::one(ctx.effects(&key).await?))
}

fn point_number(point: FaultPoint) -> u8 {
    match point {
        FaultPoint::AfterClaim => 3,
        FaultPoint::AfterEffect => 4,
    }
}
