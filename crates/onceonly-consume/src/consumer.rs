//! The broker-neutral consumer loop: receive, guard, then ack, hand back
//! or dead-letter as the record says; broker progress at every heartbeat.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use onceonly::{Effect, Guard, JobSpec, Outcome, Store};
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::broker::{Broker, Message, Redelivery};
use crate::error::Result;
use crate::settle::{self, Action};
use crate::shape::{KeyFrom, Operation};
use crate::timing;

/// What the consumer does with one operation: usually [`Guarded`] (the
/// guard running an effect), or a closure (a local effect through
/// [`Guard::run_local`]).
pub trait Handler: Send + Sync {
    /// Runs one delivery of `op` and reports what became of it.
    fn handle(&self, op: Operation) -> impl Future<Output = onceonly::Result<Outcome>> + Send;
}

impl<F, Fut> Handler for F
where
    F: Fn(Operation) -> Fut + Send + Sync,
    Fut: Future<Output = onceonly::Result<Outcome>> + Send,
{
    fn handle(&self, op: Operation) -> impl Future<Output = onceonly::Result<Outcome>> + Send {
        self(op)
    }
}

/// `guard.run(key, payload, effect)` for each message.
pub struct Guarded<'a, S: Store, E: Effect> {
    /// The guard.
    pub guard: &'a Guard<S>,
    /// The effect it runs.
    pub effect: &'a E,
}

impl<S: Store, E: Effect> Handler for Guarded<'_, S, E> {
    async fn handle(&self, op: Operation) -> onceonly::Result<Outcome> {
        self.guard.run(&op.key, &op.payload, self.effect).await
    }
}

/// How a consumer runs.
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    /// Concurrent receive loops.
    pub workers: usize,
    /// Messages received per call by each loop (handled concurrently).
    pub batch: usize,
    /// Where a message's key and payload come from.
    pub key_from: KeyFrom,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        Self {
            workers: 4,
            batch: 1,
            key_from: KeyFrom::Envelope,
        }
    }
}

/// What a consumer did, counted by what it told the broker.
#[derive(Debug, Default)]
pub struct ConsumeStats {
    /// Messages received.
    pub received: AtomicU64,
    /// Acknowledged: the record is settled.
    pub acked: AtomicU64,
    /// Of the acknowledged, those whose effect this consumer did.
    pub effects: AtomicU64,
    /// Handed back with a delay (in progress elsewhere, retry later).
    pub handed_back: AtomicU64,
    /// Sent to the dead letters (poison).
    pub dead_lettered: AtomicU64,
    /// Broker progress calls (one per heartbeat of a long job).
    pub progress: AtomicU64,
    /// Broker calls that failed.
    pub broker_errors: AtomicU64,
}

impl ConsumeStats {
    /// One line for people, poison counted as `dead-lettered`.
    pub fn summary(&self) -> String {
        self.summary_as("dead-lettered")
    }

    /// One line for people, poison counted under the broker's word for
    /// what it does with it ([`Broker::poison_action`]).
    pub fn summary_as(&self, poison_action: &str) -> String {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "received {}, acked {} ({} effects done here), handed back {}, {poison_action} {}, progress {}, broker errors {}",
            n(&self.received),
            n(&self.acked),
            n(&self.effects),
            n(&self.handed_back),
            n(&self.dead_lettered),
            n(&self.progress),
            n(&self.broker_errors)
        )
    }
}

/// What became of one message.
#[derive(Debug)]
pub struct Delivered {
    /// The operation's key; for poison, the unusable key as found (`None`
    /// when there was none).
    pub key: Option<String>,
    /// What the guard answered (`None` for poison).
    pub outcome: Option<onceonly::Result<Outcome>>,
    /// What the broker was told.
    pub action: Action,
}

/// Consumes one broker queue through a guard.
pub struct Consumer<B: Broker> {
    broker: Arc<B>,
    config: ConsumerConfig,
    heartbeat: Option<Duration>,
    redelivery: Redelivery,
    stats: Arc<ConsumeStats>,
}

impl<B: Broker> Consumer<B> {
    /// Reads the broker's redelivery settings and checks them against
    /// `spec` (docs/DESIGN.md section 4); refuses, naming both values,
    /// when a rule is broken.
    pub async fn new(broker: B, spec: &JobSpec, config: ConsumerConfig) -> Result<Self> {
        spec.validate()?;
        let redelivery = broker.redelivery().await?;
        timing::check(spec, &redelivery)?;
        Ok(Self {
            broker: Arc::new(broker),
            config,
            heartbeat: spec.heartbeat,
            redelivery,
            stats: Arc::default(),
        })
    }

    /// The broker.
    pub fn broker(&self) -> &B {
        &self.broker
    }

    /// The broker back, once nothing else holds it.
    pub fn into_broker(self) -> B {
        Arc::try_unwrap(self.broker)
            .ok()
            .expect("the broker is held only by its consumer")
    }

    /// The redelivery settings read at start.
    pub fn redelivery(&self) -> &Redelivery {
        &self.redelivery
    }

    /// What the consumer has done so far.
    pub fn stats(&self) -> &ConsumeStats {
        &self.stats
    }

    /// [`ConsumeStats::summary_as`] in this broker's words.
    pub fn summary(&self) -> String {
        self.stats.summary_as(self.broker.poison_action())
    }

    /// Consumes until `stop` turns true, then lets the messages in hand
    /// finish (each bounded by the job timeout).
    pub async fn run<H: Handler>(&self, handler: &H, stop: watch::Receiver<bool>) -> Result<()> {
        let loops =
            (0..self.config.workers.max(1)).map(|_| self.receive_loop(handler, stop.clone()));
        join_all(loops).await;
        Ok(())
    }

    async fn receive_loop<H: Handler>(&self, handler: &H, mut stop: watch::Receiver<bool>) {
        let mut pause = Duration::from_millis(200);
        while !*stop.borrow() {
            let received = tokio::select! {
                r = self.broker.receive(self.config.batch.max(1)) => r,
                _ = stop.changed() => break,
            };
            match received {
                Ok(messages) => {
                    pause = Duration::from_millis(200);
                    join_all(messages.into_iter().map(|m| async move {
                        self.deliver(&m, handler).await;
                    }))
                    .await;
                }
                Err(e) => {
                    self.stats.broker_errors.fetch_add(1, Ordering::Relaxed);
                    error!(broker = self.broker.name(), error = %e, retry_in = ?pause, "receive failed");
                    tokio::select! {
                        _ = tokio::time::sleep(pause) => {}
                        _ = stop.changed() => {}
                    }
                    pause = (pause * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    /// Handles one received message: its operation through `handler`
    /// (with broker progress at every heartbeat), then the broker told what
    /// the record says. Poison goes to the dead letters with the reason.
    pub async fn deliver<H: Handler>(&self, message: &B::Message, handler: &H) -> Delivered {
        self.stats.received.fetch_add(1, Ordering::Relaxed);
        let delivered = match self.config.key_from.operation(message) {
            Err(poison) => Delivered {
                key: poison.key,
                outcome: None,
                action: Action::DeadLetter(poison.reason),
            },
            Ok(op) => {
                let key = op.key.clone();
                let outcome = self.with_progress(message, handler.handle(op)).await;
                let action = settle::after(&outcome, message.deliveries());
                Delivered {
                    key: Some(key),
                    outcome: Some(outcome),
                    action,
                }
            }
        };
        self.tell(message, &delivered).await;
        delivered
    }

    /// Runs `work`, telling the broker the message is still in hand at
    /// every heartbeat (the same interval that renews the lease).
    async fn with_progress<T>(&self, message: &B::Message, work: impl Future<Output = T>) -> T {
        let Some(every) = self.heartbeat else {
            return work.await;
        };
        tokio::pin!(work);
        loop {
            tokio::select! {
                out = &mut work => return out,
                _ = tokio::time::sleep(every) => {
                    self.stats.progress.fetch_add(1, Ordering::Relaxed);
                    if let Err(e) = self.broker.progress(message).await {
                        self.stats.broker_errors.fetch_add(1, Ordering::Relaxed);
                        warn!(broker = self.broker.name(), id = %message.id(), error = %e, "progress failed; will retry at the next beat");
                    }
                }
            }
        }
    }

    async fn tell(&self, message: &B::Message, d: &Delivered) {
        let broker = self.broker.name();
        let id = message.id();
        // Debug-escaped and bounded: a poison key may hold anything.
        let key = d.key.as_deref().map_or_else(|| "-".to_owned(), shown_key);
        let key = key.as_str();
        let told = match &d.action {
            Action::Ack => {
                if let Some(Ok(Outcome::Done { repeat: false, .. })) = &d.outcome {
                    self.stats.effects.fetch_add(1, Ordering::Relaxed);
                }
                self.stats.acked.fetch_add(1, Ordering::Relaxed);
                info!(broker, %id, key = %key, outcome = ?d.outcome, "settled; acked");
                self.broker.ack(message).await
            }
            Action::HandBack(delay) => {
                self.stats.handed_back.fetch_add(1, Ordering::Relaxed);
                info!(broker, %id, key = %key, ?delay, outcome = ?d.outcome, "not settled; handed back");
                self.broker.hand_back(message, *delay).await
            }
            Action::DeadLetter(why) => {
                self.stats.dead_lettered.fetch_add(1, Ordering::Relaxed);
                let done = self.broker.poison_action();
                error!(broker, %id, key = %key, deliveries = message.deliveries(), reason = %why, "poison message: {done}");
                self.broker.dead_letter(message, why).await
            }
            Action::Leave => {
                warn!(broker, %id, key = %key, "worker crashed (injected); the broker redelivers after its timeout");
                Ok(())
            }
        };
        if let Err(e) = told {
            self.stats.broker_errors.fetch_add(1, Ordering::Relaxed);
            // The broker redelivers after its timeout; the record decides then.
            warn!(broker, %id, key = %key, action = ?d.action, error = %e, "telling the broker failed");
        }
    }
}

/// A key for a log line: escaped as a Rust string (control characters
/// shown, not printed), at most 200 characters of it.
fn shown_key(key: &str) -> String {
    const MAX: usize = 200;
    match key.char_indices().nth(MAX) {
        Some((at, _)) => format!("{:?}… ({} bytes)", &key[..at], key.len()),
        None => format!("{key:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_shown_escaped_and_bounded() {
        assert_eq!(shown_key("ord\u{7}er\n"), r#""ord\u{7}er\n""#);
        let long = "k".repeat(1000);
        let shown = shown_key(&long);
        assert!(shown.ends_with("… (1000 bytes)"), "{shown}");
        assert!(shown.len() < 220, "{shown}");
    }
}
