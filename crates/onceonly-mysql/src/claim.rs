//! The claim without `UPDATE ... RETURNING`: read the clock, insert the
//! record claimed; on a duplicate key read the record and claim it fenced on
//! the token read. Each write decides by its own affected-row count, and the
//! claim it reports is what it wrote (token, times), never read back.

use onceonly::store::{Claim, OpClaim};
use onceonly::{DbTime, Snapshot};
use onceonly_sqlx::millis;
use sqlx::MySqlConnection;

use crate::errors::is_duplicate;
use crate::queries;

/// What a claim found.
pub(crate) enum Claimed {
    /// Ours.
    Ours(Claim),
    /// Someone else's, or not claimable: the row as it stands (`None`: gone
    /// since the insert met it, purged meanwhile).
    Existing(Option<Box<Snapshot>>),
}

/// Claims `p` on `conn`. `in_tx`: the connection is in the user's
/// transaction, whose snapshot may be older than the row the insert met,
/// so the row is read with a locking read.
pub(crate) async fn claim(
    conn: &mut MySqlConnection,
    offset: i64,
    p: &OpClaim<'_>,
    in_tx: bool,
) -> Result<Claimed, sqlx::Error> {
    let now = queries::now(conn, offset).await?;
    let lease_until = DbTime(now.saturating_add(millis(p.lease)));
    // In the user's transaction a record a plain read finds is locked before
    // anything is written: two transactions claiming it queue on the lock.
    // Inserting first would leave each the duplicate key's shared lock, and
    // both updates would deadlock (1213). A key no read finds is inserted (a
    // locking read of a missing key takes a gap lock; two such inserts deadlock).
    if in_tx
        && queries::get(conn, offset, p.job_type, p.op_key, false)
            .await?
            .is_some()
    {
        if let Some(snap) = queries::get_locked(conn, offset, p.job_type, p.op_key).await? {
            return claim_existing(conn, offset, p, in_tx, now, snap).await;
        }
    }
    match queries::claim_insert(conn, now, p).await {
        Ok(1) => {
            return Ok(Claimed::Ours(Claim {
                token: 1,
                attempts: 1,
                claimed_at: DbTime(now),
                lease_until,
            }))
        }
        Ok(n) => {
            return Err(sqlx::Error::Protocol(format!(
                "claim insert of {}:{} affected {n} rows",
                p.job_type, p.op_key
            )))
        }
        Err(e) if is_duplicate(&e) => {}
        Err(e) => return Err(e),
    }
    let Some(snap) = queries::get(conn, offset, p.job_type, p.op_key, in_tx).await? else {
        return Ok(Claimed::Existing(None));
    };
    claim_existing(conn, offset, p, in_tx, now, snap).await
}

/// The claim of a record that exists (`snap`, as read): an update fenced on
/// the token read, sent only when the row read looked claimable.
async fn claim_existing(
    conn: &mut MySqlConnection,
    offset: i64,
    p: &OpClaim<'_>,
    in_tx: bool,
    now: i64,
    snap: Snapshot,
) -> Result<Claimed, sqlx::Error> {
    let lease_until = DbTime(now.saturating_add(millis(p.lease)));
    // Not claimable as read: no update, so no exclusive lock. In the user's
    // transaction the duplicate key left a shared lock on the row; workers
    // racing on one key would each ask to upgrade it and deadlock (1213).
    if !claimable(&snap, p, now) {
        return Ok(Claimed::Existing(Some(Box::new(snap))));
    }
    let (token, attempts) = (snap.record.token, snap.record.attempts);
    match queries::claim_update(conn, now, p, token).await? {
        1 => Ok(Claimed::Ours(Claim {
            token: token + 1,
            attempts: attempts + 1,
            claimed_at: DbTime(now),
            lease_until,
        })),
        // Claimable when read, gone by the update: someone else moved it.
        0 => Ok(Claimed::Existing(
            queries::get(conn, offset, p.job_type, p.op_key, in_tx)
                .await?
                .map(Box::new),
        )),
        n => Err(sqlx::Error::Protocol(format!(
            "claim update of {}:{} affected {n} rows",
            p.job_type, p.op_key
        ))),
    }
}

/// Whether the row read could have been claimed at `now`: the update's own
/// condition, repeated only to skip an update that would match nothing (the
/// update re-checks it and decides).
fn claimable(snap: &Snapshot, p: &OpClaim<'_>, now: i64) -> bool {
    let r = &snap.record;
    r.state == onceonly::State::Queued
        && r.fingerprint == p.fingerprint
        && r.due_at.is_none_or(|due| due.0 <= now)
}
