//! Effects that count what they did, per operation key, in memory: the
//! suite's stand-in for a destination (the HTTP destination is tested end to
//! end elsewhere).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use onceonly::{Effect, EffectCtx, EffectOutcome, LookupOutcome, WithdrawOutcome};

/// Something a test runs inside the effect, before it acts: request a
/// cancel, move the clock, let another worker take the claim over.
pub type Hook = Arc<dyn Fn(EffectCtx) -> BoxFuture<'static, ()> + Send + Sync>;

/// Counts effects per key; dedups by idempotency key when `keyed`.
///
/// Clones share the destination (counts, live items, script); a hook or a
/// delay belongs to the clone it was set on, so one destination can be
/// reached by a worker with a hook and another without.
#[derive(Clone, Default)]
pub struct CountingEffect {
    inner: Arc<Mutex<Inner>>,
    /// Dedup on the idempotency key, as a keyed destination does.
    pub keyed: bool,
    hook: Option<Hook>,
    delay: Option<Duration>,
}

#[derive(Default)]
struct Inner {
    effects: HashMap<String, u32>,
    calls: HashMap<String, u32>,
    live: HashMap<String, bool>,
    withdrawals: HashMap<String, u32>,
    abandoned: HashMap<String, u32>,
    script: Vec<EffectOutcome>,
    withdraw_fails: Option<String>,
}

impl CountingEffect {
    /// A destination with no dedup (opaque).
    pub fn opaque() -> Self {
        Self::default()
    }

    /// A destination that dedups on the idempotency key.
    pub fn keyed() -> Self {
        Self {
            keyed: true,
            ..Self::default()
        }
    }

    /// This clone runs `hook` at the start of every `perform`, before acting.
    pub fn with_hook<H, Fut>(mut self, hook: H) -> Self
    where
        H: Fn(EffectCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.hook = Some(Arc::new(move |ctx| Box::pin(hook(ctx))));
        self
    }

    /// This clone waits `delay` (after the hook) before acting: a slow
    /// destination. A `perform` dropped while waiting never acts.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }

    /// Effects that reached the destination for `op_key` (dedup included).
    pub fn count(&self, op_key: &str) -> u32 {
        let inner = self.inner.lock().unwrap();
        inner.effects.get(op_key).copied().unwrap_or(0)
    }

    /// Effects that reached the destination, over every key.
    pub fn total(&self) -> u32 {
        self.inner.lock().unwrap().effects.values().sum()
    }

    /// How many times `perform` got as far as the destination for `op_key`
    /// (deduplicated, not-sent and failed attempts included).
    pub fn calls(&self, op_key: &str) -> u32 {
        let inner = self.inner.lock().unwrap();
        inner.calls.get(op_key).copied().unwrap_or(0)
    }

    /// True when the item for `op_key` exists and was not withdrawn.
    pub fn live(&self, op_key: &str) -> bool {
        self.inner
            .lock()
            .unwrap()
            .live
            .get(op_key)
            .copied()
            .unwrap_or(false)
    }

    /// How many `perform`s of `op_key` were dropped (stopped) before they
    /// reached the destination. A dropped future never runs again, so such
    /// a perform can never act later: no need to wait and see.
    pub fn abandoned(&self, op_key: &str) -> u32 {
        let inner = self.inner.lock().unwrap();
        inner.abandoned.get(op_key).copied().unwrap_or(0)
    }

    /// How many withdraws of `op_key`'s item succeeded.
    pub fn withdrawals(&self, op_key: &str) -> u32 {
        let inner = self.inner.lock().unwrap();
        inner.withdrawals.get(op_key).copied().unwrap_or(0)
    }

    /// The next `perform` calls report these outcomes (after really acting
    /// for `Done` and `Unknown`, not acting for `NotSent` and `Failed`), in
    /// order; afterwards each call acts and reports done with `ref-KEY`.
    pub fn script(&self, outcomes: Vec<EffectOutcome>) {
        let mut inner = self.inner.lock().unwrap();
        inner.script = outcomes.into_iter().rev().collect();
    }

    /// From now on every withdraw fails with `reason` (the item stays live).
    pub fn fail_withdraws(&self, reason: &str) {
        self.inner.lock().unwrap().withdraw_fails = Some(reason.to_owned());
    }
}

impl Effect for CountingEffect {
    async fn perform(&self, ctx: &EffectCtx) -> EffectOutcome {
        // Counts the perform as abandoned if it is dropped before it acts.
        struct Pending<'a>(&'a Mutex<Inner>, &'a str, bool);
        impl Drop for Pending<'_> {
            fn drop(&mut self) {
                if !self.2 {
                    let mut inner = self.0.lock().unwrap_or_else(|e| e.into_inner());
                    *inner.abandoned.entry(self.1.to_owned()).or_default() += 1;
                }
            }
        }
        let mut pending = Pending(&self.inner, &ctx.op_key, false);
        if let Some(hook) = &self.hook {
            hook(ctx.clone()).await;
        }
        if let Some(delay) = self.delay {
            tokio::time::sleep(delay).await;
        }
        pending.2 = true;
        drop(pending);
        let mut inner = self.inner.lock().unwrap();
        *inner.calls.entry(ctx.op_key.clone()).or_default() += 1;
        let scripted = inner.script.pop();
        let acts = !matches!(
            scripted,
            Some(EffectOutcome::NotSent(_) | EffectOutcome::Failed(_))
        );
        if acts {
            let seen = inner.effects.get(&ctx.op_key).copied().unwrap_or(0);
            if !(self.keyed && seen > 0) {
                *inner.effects.entry(ctx.op_key.clone()).or_default() += 1;
            }
            inner.live.insert(ctx.op_key.clone(), true);
        }
        scripted.unwrap_or_else(|| EffectOutcome::done_with_ref(format!("ref-{}", ctx.op_key)))
    }

    async fn lookup(&self, ctx: &EffectCtx) -> LookupOutcome {
        let inner = self.inner.lock().unwrap();
        match inner.live.get(&ctx.op_key) {
            Some(true) => LookupOutcome::Found {
                external_ref: Some(format!("ref-{}", ctx.op_key)),
                result: serde_json::Value::Null,
            },
            _ => LookupOutcome::NotFound,
        }
    }

    async fn withdraw(&self, ctx: &EffectCtx, _external_ref: &str) -> WithdrawOutcome {
        let mut inner = self.inner.lock().unwrap();
        if let Some(reason) = inner.withdraw_fails.clone() {
            return WithdrawOutcome::NotWithdrawn(reason);
        }
        inner.live.insert(ctx.op_key.clone(), false);
        *inner.withdrawals.entry(ctx.op_key.clone()).or_default() += 1;
        WithdrawOutcome::Withdrawn
    }
}
