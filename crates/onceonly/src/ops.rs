//! Operations outside a worker's claim: enqueue, cancel, resolve, purge.
//! Each reads the row, then writes conditionally on the token it read.

use std::time::Duration;

use tracing::info;

use crate::audit::AuditKind;
use crate::effect::{Effect, EffectCtx, LookupOutcome, WithdrawOutcome};
use crate::error::{Error, Result};
use crate::key::{validate_job_type, validate_op_key, Payload};
use crate::protocol::{unclaimed_may_have_acted, Move};
use crate::record::{Record, Snapshot, State};
use crate::store::{append, Enqueued, OpAudit, OpEnqueue, OpPurge, OpRequestCancel, Store};

/// The actor [`cancel`] and [`resolve`] write to the audit trail.
pub const DEFAULT_ACTOR: &str = "operator";

/// What an enqueue did.
#[derive(Debug, Clone, PartialEq)]
pub enum EnqueueOutcome {
    /// A new queued operation.
    Queued,
    /// The operation existed with the same payload: nothing changed.
    AlreadyExists(Box<Record>),
}

fn enqueue_params<'a>(
    job_type: &'a str,
    op_key: &'a str,
    payload: &'a Payload,
    delay: Option<Duration>,
) -> Result<OpEnqueue<'a>> {
    validate_job_type(job_type)?;
    validate_op_key(op_key)?;
    Ok(OpEnqueue {
        job_type,
        op_key,
        fingerprint: &payload.fingerprint,
        payload: payload.json.as_deref(),
        delay,
    })
}

fn enqueued(found: Enqueued, payload: &Payload) -> Result<EnqueueOutcome> {
    match found {
        Enqueued::Inserted => Ok(EnqueueOutcome::Queued),
        Enqueued::Existing(r) if r.fingerprint == payload.fingerprint => {
            Ok(EnqueueOutcome::AlreadyExists(r))
        }
        Enqueued::Existing(r) => Err(Error::PayloadMismatch {
            job_type: r.job_type,
            op_key: r.op_key,
            stored: r.fingerprint,
            offered: payload.fingerprint.clone(),
        }),
    }
}

/// Queues an operation for a relay. A repeat with the same payload is a
/// no-op that says so; another payload is [`Error::PayloadMismatch`].
pub async fn enqueue<S: Store>(
    store: &S,
    job_type: &str,
    op_key: &str,
    payload: &Payload,
    delay: Option<Duration>,
) -> Result<EnqueueOutcome> {
    let p = enqueue_params(job_type, op_key, payload, delay)?;
    enqueued(store.op_enqueue(&p).await?, payload)
}

/// [`enqueue`] inside the caller's transaction: queued if and only if the
/// caller's business write commits (the outbox).
pub async fn enqueue_in<S: Store>(
    store: &S,
    conn: &mut S::Conn,
    job_type: &str,
    op_key: &str,
    payload: &Payload,
    delay: Option<Duration>,
) -> Result<EnqueueOutcome> {
    let p = enqueue_params(job_type, op_key, payload, delay)?;
    enqueued(store.op_enqueue_in(conn, &p).await?, payload)
}

/// Where a cancel left the operation.
#[derive(Debug, Clone, PartialEq)]
pub enum CancelOutcome {
    /// Cancelled; nothing of it is live at the destination.
    Cancelled {
        /// The item withdrawn at the destination, when the effect had happened.
        withdrawn_ref: Option<String>,
    },
    /// It was cancelled before this call.
    AlreadyCancelled,
    /// A worker holds a live claim: the cancel is requested, and the owner
    /// will stop before the effect or withdraw it after.
    Requested {
        /// Who holds the claim.
        owner: Option<String>,
    },
    /// Not cancelled, nothing changed: the item is live at the destination
    /// and could not be withdrawn (a completed operation, or one an earlier
    /// claim sent).
    StillLive {
        /// Where the operation stays.
        state: State,
        /// The item.
        external_ref: Option<String>,
        /// Why it could not be withdrawn.
        reason: String,
    },
    /// Not cancelled, nothing changed: the operation failed after
    /// `attempts` claims, any of which may have sent it, and the destination
    /// could not be asked whether it did (none was given, or it cannot look
    /// up). Nothing retries a failed operation, so nothing needed stopping.
    /// See [`unclaimed_may_have_acted`].
    NotLookedUp {
        /// Claims taken so far.
        attempts: i64,
        /// Why the destination was not asked.
        reason: String,
    },
    /// Held: nobody knows whether the item exists; a person resolves it.
    Held,
    /// Not cancelled, held by this cancel: the operation was queued after
    /// `attempts` claims, any of which may have sent it, and the destination
    /// could not be asked whether it did. Its retry is stopped; a person
    /// checks the destination and resolves it (cancelled, or queued to be
    /// sent after all). See [`Move::HoldQueued`].
    HeldNotLookedUp {
        /// Claims taken so far.
        attempts: i64,
        /// Why the destination was not asked.
        reason: String,
    },
}

/// Cancels an operation as docs/DESIGN.md section 2 says.
///
/// Queued and never claimed: cancelled at once. Queued or failed after a
/// claim, which may have sent it: looked up through `destination` first;
/// what it finds is withdrawn, then the row cancelled (see
/// [`CancelOutcome::StillLive`] for when it is not). When it cannot be
/// looked up, a queued row is held so that its retry cannot send again
/// ([`CancelOutcome::HeldNotLookedUp`]) and a failed one is left as it is
/// ([`CancelOutcome::NotLookedUp`]). Claimed: cancel requested (see
/// [`CancelOutcome::Requested`]). Completed: withdrawn through `destination`
/// first and only then marked cancelled; without a destination or when the
/// withdraw fails it stays completed and [`CancelOutcome::StillLive`] says so
/// (a completed local effect, with no reference, is never reported cancelled:
/// its rows are the caller's to remove).
pub async fn cancel<S: Store, E: Effect>(
    store: &S,
    job_type: &str,
    op_key: &str,
    destination: Option<&E>,
) -> Result<CancelOutcome> {
    cancel_as(store, job_type, op_key, destination, DEFAULT_ACTOR).await
}

/// [`cancel`], naming `actor` (a person or tool) in the audit trail.
pub async fn cancel_as<S: Store, E: Effect>(
    store: &S,
    job_type: &str,
    op_key: &str,
    destination: Option<&E>,
    actor: &str,
) -> Result<CancelOutcome> {
    cancel_fenced(store, job_type, op_key, destination, actor, None).await
}

/// [`cancel_as`], fenced on what the person looked at: the row's state and
/// token. When the row is no longer in `seen` (it moved meanwhile), returns
/// [`Error::Moved`] with the row as it stands, and changes nothing.
pub async fn cancel_seen<S: Store, E: Effect>(
    store: &S,
    job_type: &str,
    op_key: &str,
    destination: Option<&E>,
    actor: &str,
    seen: (State, i64),
) -> Result<CancelOutcome> {
    cancel_fenced(store, job_type, op_key, destination, actor, Some(seen)).await
}

async fn cancel_fenced<S: Store, E: Effect>(
    store: &S,
    job_type: &str,
    op_key: &str,
    destination: Option<&E>,
    actor: &str,
    seen: Option<(State, i64)>,
) -> Result<CancelOutcome> {
    // A row can move between our read and our write; re-read a few times
    // (only when the caller named no state: a person's decision is not
    // re-applied to a row they did not see).
    for _ in 0..5 {
        let snap = get(store, job_type, op_key).await?;
        let r = &snap.record;
        if let Some((state, token)) = seen {
            if (r.state, r.token) != (state, token) {
                return Err(Error::Moved {
                    expected_token: token,
                    record: Box::new(snap.record),
                });
            }
        }
        let done = match r.state {
            State::Cancelled => Some(CancelOutcome::AlreadyCancelled),
            State::Held => Some(CancelOutcome::Held),
            State::Queued | State::Failed => cancel_unclaimed(store, r, destination, actor).await?,
            State::Claimed => request_cancel(store, r, actor).await?,
            State::Completed => return withdraw_completed(store, r, destination, actor).await,
        };
        if let Some(outcome) = done {
            return Ok(outcome);
        }
        // The row moved between our read and our write.
        if seen.is_some() {
            let now = get(store, job_type, op_key).await?;
            return Err(Error::Moved {
                expected_token: r.token,
                record: Box::new(now.record),
            });
        }
    }
    Err(Error::Contended {
        job_type: job_type.to_owned(),
        op_key: op_key.to_owned(),
        doing: "cancelling",
    })
}

/// Cancels a queued or failed row `r`: at once when it was never claimed,
/// otherwise after looking at the destination ([`unclaimed_at_destination`]).
/// `None` when the fenced write found the row moved.
async fn cancel_unclaimed<S: Store, E: Effect>(
    store: &S,
    r: &Record,
    destination: Option<&E>,
    actor: &str,
) -> Result<Option<CancelOutcome>> {
    let withdrawn = match unclaimed_at_destination(store, r, destination).await? {
        Look::Nothing => None,
        Look::Withdrawn(ext) => Some(ext),
        Look::Instead(outcome) => return Ok(Some(outcome)),
        Look::NotLookedUp(reason) => return not_looked_up(store, r, actor, reason).await,
        Look::Moved => return Ok(None),
    };
    let cancel = Move::cancel_from(r.state).expect("queued and failed rows have a cancel move");
    let p = cancel
        .op(&r.job_type, &r.op_key, r.token)
        .with_external_ref(withdrawn.as_deref())
        .with_error("cancelled by an operator");
    if !store.op_move(&p).await? {
        return Ok(None);
    }
    info!(job = %r.job_type, key = %r.op_key, withdrawn = ?withdrawn, "cancelled");
    let detail = match &withdrawn {
        Some(ext) => format!("cancelled by an operator; withdrawn at the destination ({ext})"),
        None => "cancelled by an operator".to_owned(),
    };
    let states = [r.state, State::Cancelled];
    audit(store, r, AuditKind::Cancelled, actor, states, &detail).await;
    Ok(Some(CancelOutcome::Cancelled {
        withdrawn_ref: withdrawn,
    }))
}

/// A queued or failed row `r` that an earlier claim may have acted on, and
/// whose destination could not be asked (`reason`): a queued row is held
/// ([`Move::cancel_not_looked_up`]), a failed one left as it is. `None`
/// when the fenced write found the row moved.
async fn not_looked_up<S: Store>(
    store: &S,
    r: &Record,
    actor: &str,
    reason: String,
) -> Result<Option<CancelOutcome>> {
    let attempts = r.attempts;
    let Some(hold) = Move::cancel_not_looked_up(r.state) else {
        return Ok(Some(CancelOutcome::NotLookedUp { attempts, reason }));
    };
    let note = format!(
        "held by an operator's cancel: claimed {attempts} time(s) and may have been sent, and \
         {reason}; a person checks the destination and resolves it"
    );
    let p = hold.op(&r.job_type, &r.op_key, r.token).with_error(&note);
    if !store.op_move(&p).await? {
        return Ok(None);
    }
    info!(job = %r.job_type, key = %r.op_key, attempts, "held, not cancelled: not looked up");
    let detail = format!("{note} (cancel asked by {actor})");
    let states = [r.state, hold.to()];
    audit(store, r, AuditKind::Hold, actor, states, &detail).await;
    Ok(Some(CancelOutcome::HeldNotLookedUp { attempts, reason }))
}

/// Asks the owner of the live claim `r` to cancel. `None` when the fenced
/// write found the row moved.
async fn request_cancel<S: Store>(
    store: &S,
    r: &Record,
    actor: &str,
) -> Result<Option<CancelOutcome>> {
    let p = OpRequestCancel {
        job_type: &r.job_type,
        op_key: &r.op_key,
        token: r.token,
    };
    if !store.op_request_cancel(&p).await? {
        return Ok(None);
    }
    info!(job = %r.job_type, key = %r.op_key, token = r.token, "cancel requested");
    let detail = format!(
        "the owner {} stops before the effect or withdraws it after",
        r.owner.as_deref().unwrap_or("-")
    );
    let states = [State::Claimed, State::Claimed];
    audit(store, r, AuditKind::CancelRequested, actor, states, &detail).await;
    Ok(Some(CancelOutcome::Requested {
        owner: r.owner.clone(),
    }))
}

/// What an operator's cancel found at the destination for a queued or
/// failed row.
enum Look {
    /// Nothing of it can be there (never claimed), or the lookup found nothing.
    Nothing,
    /// The lookup found this item, and it was withdrawn.
    Withdrawn(String),
    /// Not cancelled, nothing changed: the item is live and not withdrawn.
    Instead(CancelOutcome),
    /// An earlier claim may have sent it, and the destination could not be
    /// asked, for this reason.
    NotLookedUp(String),
    /// The row moved after it was read: nothing withdrawn, read again.
    Moved,
}

/// Looks for the item of a queued or failed row `r` at the destination,
/// before an operator's cancel, and withdraws what it finds. The row is
/// read again before the withdraw: an item found while the row still stands
/// as read was sent by an earlier claim (a claim since would have moved
/// its token), and is the operator's to take down; a claim taken since the
/// read keeps its item, and the cancel starts over.
async fn unclaimed_at_destination<S: Store, E: Effect>(
    store: &S,
    r: &Record,
    destination: Option<&E>,
) -> Result<Look> {
    if !unclaimed_may_have_acted(r.attempts) {
        return Ok(Look::Nothing);
    }
    let Some(dest) = destination else {
        return Ok(Look::NotLookedUp(
            "no destination was given to look it up".into(),
        ));
    };
    let ctx = EffectCtx::detached(&r.job_type, &r.op_key, Payload::stored(r).value());
    let still_live = |external_ref: Option<String>, reason: String| {
        Look::Instead(CancelOutcome::StillLive {
            state: r.state,
            external_ref,
            reason,
        })
    };
    let ext = match dest.lookup(&ctx).await {
        LookupOutcome::NotFound => return Ok(Look::Nothing),
        LookupOutcome::Unavailable(why) => {
            return Ok(Look::NotLookedUp(format!(
                "the destination could not look it up: {why}"
            )))
        }
        LookupOutcome::Found {
            external_ref: None, ..
        } => {
            let why = "the lookup found it but named no reference to withdraw";
            return Ok(still_live(None, why.into()));
        }
        LookupOutcome::Found {
            external_ref: Some(ext),
            ..
        } => ext,
    };
    // A reference that breaks the answer rules is neither withdrawn (it
    // could be anything) nor stored.
    if let Err(e) = crate::answer::check_reference(&ext) {
        return Ok(Look::NotLookedUp(format!(
            "the destination's lookup answered a reference that cannot be used: {e}"
        )));
    }
    let now = get(store, &r.job_type, &r.op_key).await?.record;
    if (now.state, now.token) != (r.state, r.token) {
        return Ok(Look::Moved);
    }
    Ok(match dest.withdraw(&ctx, &ext).await {
        WithdrawOutcome::Withdrawn => Look::Withdrawn(ext),
        WithdrawOutcome::NotWithdrawn(reason) => still_live(Some(ext), reason),
    })
}

/// Appends an event about `r`, under the token it was read with.
async fn audit<S: Store>(
    store: &S,
    r: &Record,
    event: AuditKind,
    actor: &str,
    [from, to]: [State; 2],
    detail: &str,
) {
    let p = OpAudit {
        job_type: &r.job_type,
        op_key: &r.op_key,
        event,
        actor,
        token: r.token,
        from: Some(from),
        to: Some(to),
        detail: Some(detail),
        attempt: None,
        retry_after: None,
    };
    append(store, &p).await;
}

async fn withdraw_completed<S: Store, E: Effect>(
    store: &S,
    r: &Record,
    destination: Option<&E>,
    actor: &str,
) -> Result<CancelOutcome> {
    let withdrawn = match (destination, r.external_ref.as_deref()) {
        (Some(dest), Some(ext)) => {
            let ctx = EffectCtx::detached(&r.job_type, &r.op_key, Payload::stored(r).value());
            dest.withdraw(&ctx, ext).await
        }
        (None, Some(_)) => {
            WithdrawOutcome::NotWithdrawn("no destination was given to withdraw it from".into())
        }
        (_, None) => {
            WithdrawOutcome::NotWithdrawn("the record has no external reference to withdraw".into())
        }
    };
    if let WithdrawOutcome::NotWithdrawn(reason) = withdrawn {
        return Ok(CancelOutcome::StillLive {
            state: State::Completed,
            external_ref: r.external_ref.clone(),
            reason,
        });
    }
    let note = "cancelled by an operator; withdrawn at the destination";
    let p = Move::CancelCompleted
        .op(&r.job_type, &r.op_key, r.token)
        .with_error(note);
    if store.op_move(&p).await? {
        info!(job = %r.job_type, key = %r.op_key, external_ref = ?r.external_ref, "withdrawn and cancelled");
        let detail = format!("{note} ({})", r.external_ref.as_deref().unwrap_or("-"));
        let states = [State::Completed, State::Cancelled];
        audit(store, r, AuditKind::Cancelled, actor, states, &detail).await;
        Ok(CancelOutcome::Cancelled {
            withdrawn_ref: r.external_ref.clone(),
        })
    } else {
        let now = get(store, &r.job_type, &r.op_key).await?;
        Err(Error::Moved {
            expected_token: r.token,
            record: Box::new(now.record),
        })
    }
}

/// How a person resolves a held operation.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    /// The effect did happen; `external_ref` names it.
    Completed {
        /// Its reference at the destination.
        external_ref: Option<String>,
    },
    /// The effect did not happen: queue it to be done.
    Queued,
    /// Give it up.
    Failed,
    /// Cancel it.
    Cancelled,
}

/// Resolves a held operation, fenced on the token `expected_token` (the one
/// the person looked at; the current one when `None`). Returns
/// [`Error::Moved`] when the row changed meanwhile.
pub async fn resolve<S: Store>(
    store: &S,
    job_type: &str,
    op_key: &str,
    resolution: &Resolution,
    reason: &str,
    expected_token: Option<i64>,
) -> Result<Record> {
    resolve_as(
        store,
        job_type,
        op_key,
        resolution,
        reason,
        expected_token,
        DEFAULT_ACTOR,
    )
    .await
}

/// [`resolve`], naming `actor` (the person deciding) in the audit trail.
pub async fn resolve_as<S: Store>(
    store: &S,
    job_type: &str,
    op_key: &str,
    resolution: &Resolution,
    reason: &str,
    expected_token: Option<i64>,
    actor: &str,
) -> Result<Record> {
    let snap = get(store, job_type, op_key).await?;
    let token = expected_token.unwrap_or(snap.record.token);
    if snap.record.state != State::Held || snap.record.token != token {
        return Err(Error::Moved {
            expected_token: token,
            record: Box::new(snap.record),
        });
    }
    let (resolve, external_ref) = match resolution {
        Resolution::Completed { external_ref } => (Move::ResolveCompleted, external_ref.as_deref()),
        Resolution::Queued => (Move::ResolveQueued, None),
        Resolution::Failed => (Move::ResolveFailed, None),
        Resolution::Cancelled => (Move::ResolveCancelled, None),
    };
    let to = resolve.to();
    let note = format!("resolved as {to} by a person: {reason}");
    let p = resolve
        .op(job_type, op_key, token)
        .with_external_ref(external_ref)
        .with_error(&note);
    let moved = store.op_move(&p).await?;
    if moved {
        let detail = match p.external_ref {
            Some(ext) => format!("{note} (reference {ext})"),
            None => note.clone(),
        };
        let states = [State::Held, to];
        audit(
            store,
            &snap.record,
            AuditKind::Resolved,
            actor,
            states,
            &detail,
        )
        .await;
    }
    let now = get(store, job_type, op_key).await?;
    if moved {
        Ok(now.record)
    } else {
        Err(Error::Moved {
            expected_token: token,
            record: Box::new(now.record),
        })
    }
}

/// Deletes finished records (completed, failed, cancelled) not updated for
/// `older_than`. Claimed, queued and held records are never purged.
pub async fn purge<S: Store>(
    store: &S,
    job_type: Option<&str>,
    older_than: Duration,
) -> Result<u64> {
    store
        .op_purge(&OpPurge {
            job_type,
            older_than,
        })
        .await
}

/// Reads one record, or [`Error::NotFound`].
pub async fn get<S: Store>(store: &S, job_type: &str, op_key: &str) -> Result<Snapshot> {
    store
        .op_get(job_type, op_key)
        .await?
        .ok_or_else(|| Error::NotFound {
            job_type: job_type.to_owned(),
            op_key: op_key.to_owned(),
        })
}
