//! Effects that count what they did, per operation key, in memory: the
//! suite's stand-in for a destination (the HTTP destination is tested end to
//! end elsewhere).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use onceonly::{Effect, EffectCtx, EffectOutcome, LookupOutcome, WithdrawOutcome};

/// Counts effects per key; dedups by idempotency key when `keyed`.
#[derive(Clone, Default)]
pub struct CountingEffect {
    inner: Arc<Mutex<Inner>>,
    /// Dedup on the idempotency key, as a keyed destination does.
    pub keyed: bool,
}

#[derive(Default)]
struct Inner {
    effects: HashMap<String, u32>,
    live: HashMap<String, bool>,
    script: Vec<EffectOutcome>,
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

    /// Effects that reached the destination for `op_key` (dedup included).
    pub fn count(&self, op_key: &str) -> u32 {
        let inner = self.inner.lock().unwrap();
        inner.effects.get(op_key).copied().unwrap_or(0)
    }

    /// True when the item for `op_key` exists and was not withdrawn.
    pub fn live(&self, op_key: &str) -> bool {
        self.inner.lock().unwrap().live.get(op_key).copied().unwrap_or(false)
    }

    /// The next `perform` calls report these outcomes (after really acting
    /// for `Unknown`, not acting for `NotSent` and `Failed`), in order.
    pub fn script(&self, outcomes: Vec<EffectOutcome>) {
        let mut inner = self.inner.lock().unwrap();
        inner.script = outcomes.into_iter().rev().collect();
    }
}

impl Effect for CountingEffect {
    async fn perform(&self, ctx: &EffectCtx) -> EffectOutcome {
        let mut inner = self.inner.lock().unwrap();
        let scripted = inner.script.pop();
        let acts = !matches!(scripted, Some(EffectOutcome::NotSent(_) | EffectOutcome::Failed(_)));
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
        self.inner.lock().unwrap().live.insert(ctx.op_key.clone(), false);
        WithdrawOutcome::Withdrawn
    }
}
