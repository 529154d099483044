//! Scenario 8: a failure reported after a success leaves the success standing: the
//! completing worker's own failure write, arriving late, changes nothing,
//! and a redelivery gets the stored result.

use onceonly::{Move, Outcome};

use super::{describe, describe_record, Ctx, Observed};
use crate::error::Result;
use crate::job::{Reconnect, ReplayJob};
use crate::report::Count;

const LATE: &str = "a failure reported after the success (replay scenario 8)";

pub(crate) async fn guarded<S: Reconnect, J: ReplayJob<S>>(ctx: &Ctx<S, J>) -> Result<Observed> {
    let key = ctx.key("s8/guarded");
    let payload = ctx.payload(1);
    let guard = ctx.guard(&ctx.store, "worker")?;
    let mut obs = Observed::default();
    let first = ctx.job.deliver(&guard, &key, &payload).await;
    obs.note(format!("first delivery: {}", describe(&first)));
    let record = ctx.record(&key).await?;
    obs.note(format!("record: {}", describe_record(record.as_ref())));
    if let Some(r) = &record {
        // The failure write a worker makes under its claim, token and all.
        let late = Move::Fail
            .op(&r.job_type, &r.op_key, r.token)
            .with_error(LATE);
        let moved = ctx.store.op_move(&late).await?;
        obs.check(
            "the late failure write changed no row",
            !moved,
            if moved {
                "it changed the row"
            } else {
                "0 rows changed"
            },
        );
    }
    let again = ctx.job.deliver(&guard, &key, &payload).await;
    obs.note(format!("redelivery: {}", describe(&again)));
    obs.check(
        "a redelivery after the late failure got the stored result",
        matches!(again, Ok(Outcome::Done { repeat: true, .. })),
        describe(&again),
    );
    obs.finish(ctx, &[&key]).await
}

pub(crate) async fn naive<S: Reconnect, J: ReplayJob<S>>(ctx: &Ctx<S, J>) -> Result<Count> {
    let key = ctx.key("s8/naive");
    let payload = ctx.payload(1);
    let naive = ctx.naive(&ctx.store);
    ctx.deliver_naive(&naive, &key, &payload).await?;
    naive.mark_failed(&key, LATE).await?;
    ctx.deliver_naive(&naive, &key, &payload).await?;
    Ok(Count::one(ctx.effects(&key).await?))
}
