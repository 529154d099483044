//! The store's statements mean what the protocol's definition says:
//! every sequence of up to four transitions (and lease expiries) from an
//! empty table, run on the store and on [`Transition::apply`] side by side,
//! changes the same rows the same way and is refused in the same places.
//! The model checker explores `apply`; this is what ties it to the SQL.

use onceonly::protocol::{Args, Move, Row, TokenFence, Transition};
use onceonly::store::{
    ClaimRow, Completion, Enqueued, OpClaim, OpClaimBatch, OpCompleteBatch, OpEnqueue, OpHeartbeat,
    OpRequestCancel, OpTakeOver,
};
use onceonly::{State, Store};

use super::support::{order, LEASE, PAST_LEASE};
use crate::StoreFactory;

/// One step of a sequence: a transition naming `token`, or time passing
/// over the lease.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    Take(Transition, i64),
    Expire,
}

fn abstract_step(row: Option<Row>, step: Step, n: u32) -> (bool, Option<Row>) {
    match step {
        Step::Expire => (
            true,
            row.map(|mut r| {
                r.lease_live = false;
                r
            }),
        ),
        Step::Take(t, token) => {
            let args = Args {
                token,
                external_ref: Some(n),
            };
            match t.apply(row.as_ref(), args) {
                Some(next) => (true, Some(next)),
                None => (false, row),
            }
        }
    }
}

/// The steps to try after `row`: every transition with the row's token and,
/// for those with a token fence, a stale one.
fn next_steps(row: Option<Row>) -> Vec<Step> {
    let token = row.map_or(0, |r| r.token);
    let mut steps = vec![Step::Expire];
    for t in Transition::ALL {
        // `claim` on an existing queued row is the same statement as
        // `claim_queued`, which covers it.
        if t == Transition::Claim && row.is_some_and(|r| r.state == State::Queued) {
            continue;
        }
        steps.push(Step::Take(t, token));
        if t.rule().token == TokenFence::Matches && row.is_some() {
            steps.push(Step::Take(t, token - 1));
        }
    }
    steps
}

/// Every sequence of up to `depth` steps whose steps before the last were
/// taken (the last may be refused).
fn sequences(depth: usize) -> Vec<Vec<Step>> {
    let mut out = Vec::new();
    let mut frontier: Vec<(Vec<Step>, Option<Row>)> = vec![(Vec::new(), None)];
    for _ in 0..depth {
        let mut next = Vec::new();
        for (seq, row) in frontier {
            for step in next_steps(row) {
                let mut s = seq.clone();
                s.push(step);
                let (taken, after) = abstract_step(row, step, s.len() as u32);
                out.push(s.clone());
                if taken && !(step == Step::Expire && row.is_none_or(|r| !r.lease_live)) {
                    next.push((s, after));
                }
            }
        }
        frontier = next;
    }
    out
}

/// Runs one step on the store; `true` when the statement changed the row.
async fn store_step<S: Store>(store: &S, job: &str, step: Step, n: u32) -> bool {
    let key = "op";
    let payload = order(1);
    let reference = format!("ref-{n}");
    let Step::Take(t, token) = step else {
        store.clock_offset().advance(PAST_LEASE);
        return true;
    };
    match t {
        Transition::Enqueue => {
            let p = OpEnqueue {
                job_type: job,
                op_key: key,
                fingerprint: &payload.fingerprint,
                payload: payload.json.as_deref(),
                delay: None,
            };
            matches!(store.op_enqueue(&p).await.unwrap(), Enqueued::Inserted)
        }
        Transition::Claim => {
            let p = OpClaim {
                job_type: job,
                op_key: key,
                fingerprint: &payload.fingerprint,
                payload: payload.json.as_deref(),
                owner: "w",
                lease: LEASE,
            };
            matches!(store.op_claim(&p).await.unwrap(), ClaimRow::Claimed(_))
        }
        Transition::ClaimQueued => {
            let p = OpClaimBatch {
                job_type: job,
                owner: "w",
                lease: LEASE,
                limit: 1,
            };
            !store.op_claim_batch(&p).await.unwrap().is_empty()
        }
        Transition::Heartbeat => {
            let p = OpHeartbeat {
                job_type: job,
                op_key: key,
                token,
                lease: LEASE,
            };
            store.op_heartbeat(&p).await.unwrap().is_some()
        }
        Transition::RequestCancel => {
            let p = OpRequestCancel {
                job_type: job,
                op_key: key,
                token,
            };
            store.op_request_cancel(&p).await.unwrap()
        }
        Transition::TakeOver(settle) => {
            let p = OpTakeOver {
                job_type: job,
                op_key: key,
                stale_token: token,
                to: settle.to(),
                owner: "w2",
                lease: LEASE,
                reason: "taken over",
            };
            store.op_take_over(&p).await.unwrap().is_some()
        }
        // Every other completion goes through the batch statement too.
        Transition::Move(Move::Complete) if n.is_multiple_of(2) => {
            let items = [Completion {
                op_key: key,
                token,
                external_ref: Some(&reference),
                result: "{}",
            }];
            let p = OpCompleteBatch {
                job_type: job,
                items: &items,
            };
            store.op_complete_batch(&p).await.unwrap().len() == 1
        }
        Transition::Move(m) => {
            let p = m
                .op(job, key, token)
                .with_external_ref(Some(&reference))
                .with_result("{}")
                .with_error("why");
            store.op_move(&p).await.unwrap()
        }
    }
}

/// The row as the protocol sees it, read from the store.
async fn stored_row<S: Store>(store: &S, job: &str) -> Option<Row> {
    let snap = store.op_get(job, "op").await.unwrap()?;
    let r = snap.record;
    Some(Row {
        state: r.state,
        token: r.token,
        attempts: r.attempts,
        cancel_requested: r.cancel_requested,
        lease_live: r.lease_until.is_some_and(|until| until > snap.now),
        external_ref: r
            .external_ref
            .map(|e| e.trim_start_matches("ref-").parse().unwrap()),
    })
}

/// Every sequence of up to four steps, on the store and on the definition.
pub async fn store_follows_the_transition_table<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let all = sequences(4);
    assert!(all.len() >= 400, "{} sequences", all.len());
    let (mut taken_once, mut refused_once) = (Vec::new(), Vec::new());
    for (i, seq) in all.iter().enumerate() {
        let job = format!("seq{i}");
        let mut row = None;
        for (n, step) in seq.iter().enumerate() {
            let n = n as u32 + 1;
            let (taken, after) = abstract_step(row, *step, n);
            let stored = store_step(&store, &job, *step, n).await;
            let got = stored_row(&store, &job).await;
            assert_eq!(
                (stored, got),
                (taken, after),
                "{job}: {seq:?}, step {n}: the store disagrees with the definition (left: store)"
            );
            if let Step::Take(t, _) = step {
                if taken {
                    &mut taken_once
                } else {
                    &mut refused_once
                }
                .push(*t);
            }
            row = after;
        }
    }
    // Every transition was taken somewhere, and refused somewhere.
    for t in Transition::ALL {
        assert!(taken_once.contains(&t), "{} never taken", t.name());
        assert!(refused_once.contains(&t), "{} never refused", t.name());
    }
}
