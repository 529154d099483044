//! docs/DESIGN.md section 5's scenarios through a real broker: a
//! [`ReplayJob`] whose every delivery is a message sent to the queue,
//! received from it and handled by the [`Consumer`], which acks, hands
//! back or dead-letters as it does in production.
//!
//! A redelivery after a dead worker is the broker's own: when the record
//! shows a claim past its lease (its worker died holding the message), the
//! delivery sends nothing and waits for the broker to deliver the dead
//! worker's message again after its redelivery timeout. Messages that come
//! back later (handed back while another worker held the claim, or left by
//! a dead naive worker) are handled as they arrive, by whichever delivery
//! is receiving: they are real deliveries of their operations.
//!
//! The guarded and the naive version read separate queues, and each job
//! type needs its own, so a stray message is never handled under another
//! job type.
//!
//! The job is [`ReplayJob::queued`]: given a worker command, the harness's
//! concurrent scenario runs consumer processes that read the queue
//! ([`ReplayJob::consume`], one message at a time, settled as `onceonly
//! consume` settles it), sends each run's message to the queue once per
//! process, and counts once the broker holds nothing more
//! ([`Publish::backlog`]).

use std::time::{Duration, Instant};

use onceonly::{BoxError, Guard, JobSpec, Outcome, Payload, State, Store};
use onceonly_replay::{Consumed, Naive, ReplayJob};
use tokio::sync::watch;

use crate::broker::{Broker, Publish};
use crate::consumer::{Consumer, ConsumerConfig};
use crate::error::Result;
use crate::shape::{envelope_body, KeyFrom, Operation};

/// How long a delivery waits for its own message, or for the broker's
/// redelivery beyond the redelivery timeout.
const ARRIVE_WITHIN: Duration = Duration::from_secs(30);

/// A job whose deliveries go through a broker.
pub struct BrokerJob<J, B: Broker> {
    inner: J,
    spec: JobSpec,
    guarded: Consumer<B>,
    naive: B,
}

impl<J, B: Publish> BrokerJob<J, B> {
    /// `inner` delivered through `guarded` (its consumer checked against
    /// `spec`, the inner job's with a job timeout the broker's redelivery
    /// timeout allows), its naive version through `naive`.
    pub async fn new<S: Store>(inner: J, spec: JobSpec, guarded: B, naive: B) -> Result<Self>
    where
        J: ReplayJob<S>,
    {
        let guarded = Consumer::new(guarded, &spec, ConsumerConfig::default()).await?;
        Ok(Self {
            inner,
            spec,
            guarded,
            naive,
        })
    }

    /// The inner job.
    pub fn inner(&self) -> &J {
        &self.inner
    }

    /// The guarded consumer (its counters).
    pub fn consumer(&self) -> &Consumer<B> {
        &self.guarded
    }
}

fn broker_error(e: crate::Error) -> onceonly::Error {
    onceonly::Error::Database(format!("broker: {e}"))
}

impl<J, B> BrokerJob<J, B>
where
    B: Publish,
{
    /// True when the record holds a claim past its lease: its worker died
    /// holding the message, which the broker will deliver again.
    async fn orphaned<S: Store>(&self, guard: &Guard<S>, op_key: &str) -> onceonly::Result<bool> {
        let snap = guard.store().op_get(&self.spec.job_type, op_key).await?;
        Ok(snap.is_some_and(|s| s.record.state == State::Claimed && s.record.lease_expired(s.now)))
    }
}

impl<S, J, B> ReplayJob<S> for BrokerJob<J, B>
where
    S: Store,
    J: ReplayJob<S>,
    B: Publish,
{
    fn spec(&self) -> JobSpec {
        self.spec.clone()
    }

    fn describe_key(&self) -> String {
        format!(
            "{} (sent as a message through {}; the consumer takes it from the body's \"key\")",
            self.inner.describe_key(),
            self.guarded.redelivery().source
        )
    }

    fn payload(&self, variant: u32) -> serde_json::Value {
        self.inner.payload(variant)
    }

    async fn deliver(
        &self,
        guard: &Guard<S>,
        op_key: &str,
        payload: &Payload,
    ) -> onceonly::Result<Outcome> {
        let broker = self.guarded.broker();
        let mut sent = !self.orphaned(guard, op_key).await?;
        if sent {
            let body = envelope_body(op_key, &payload.value());
            broker.publish(body).await.map_err(broker_error)?;
        }
        let redelivery = self.guarded.redelivery().timeout;
        let mut deadline =
            Instant::now() + ARRIVE_WITHIN + if sent { Duration::ZERO } else { redelivery };
        let handler =
            |op: Operation| async move { self.inner.deliver(guard, &op.key, &op.payload).await };
        loop {
            if Instant::now() > deadline {
                if sent {
                    return Err(onceonly::Error::Invalid(format!(
                        "the broker delivered no message for {op_key} within {}s",
                        ARRIVE_WITHIN.as_secs()
                    )));
                }
                // No dead worker's message came back: send one.
                let body = envelope_body(op_key, &payload.value());
                broker.publish(body).await.map_err(broker_error)?;
                sent = true;
                deadline = Instant::now() + ARRIVE_WITHIN;
            }
            for message in broker.receive(1).await.map_err(broker_error)? {
                let delivered = self.guarded.deliver(&message, &handler).await;
                if delivered.key.as_deref() == Some(op_key) {
                    if let Some(outcome) = delivered.outcome {
                        return outcome;
                    }
                }
            }
        }
    }

    async fn deliver_naive(
        &self,
        naive: &Naive<S>,
        op_key: &str,
        payload: &Payload,
    ) -> Result<(), BoxError> {
        self.naive
            .publish(envelope_body(op_key, &payload.value()))
            .await?;
        let deadline = Instant::now() + ARRIVE_WITHIN;
        while Instant::now() < deadline {
            for message in self.naive.receive(1).await? {
                let Ok(op) = KeyFrom::Envelope.operation(&message) else {
                    self.naive.dead_letter(&message, "not an envelope").await?;
                    continue;
                };
                // The naive consumer acks once its handler returns; a crash
                // leaves the message to the broker.
                self.inner
                    .deliver_naive(naive, &op.key, &op.payload)
                    .await?;
                self.naive.ack(&message).await?;
                if op.key == op_key {
                    return Ok(());
                }
            }
        }
        Err(format!("the broker delivered no naive message for {op_key}").into())
    }

    async fn effects(&self, store: &S, op_key: &str) -> Result<usize, BoxError> {
        self.inner.effects(store, op_key).await
    }

    fn queued(&self) -> bool {
        true
    }

    async fn enqueue(&self, op_key: &str, payload: &Payload, naive: bool) -> Result<(), BoxError> {
        let body = envelope_body(op_key, &payload.value());
        if naive {
            self.naive.publish(body).await?;
        } else {
            self.guarded.broker().publish(body).await?;
        }
        Ok(())
    }

    async fn backlog(&self, naive: bool) -> Result<u64, BoxError> {
        let left = if naive {
            self.naive.backlog().await?
        } else {
            self.guarded.broker().backlog().await?
        };
        Ok(left)
    }

    async fn consume(
        &self,
        guard: &Guard<S>,
        stop: watch::Receiver<bool>,
    ) -> Result<Consumed, BoxError> {
        let broker = self.guarded.broker();
        let handler =
            |op: Operation| async move { self.inner.deliver(guard, &op.key, &op.payload).await };
        let mut consumed = Consumed::new();
        while !*stop.borrow() {
            for message in broker.receive(1).await? {
                let delivered = self.guarded.deliver(&message, &handler).await;
                consumed.messages += 1;
                let key = delivered.key.as_deref().unwrap_or("-");
                match &delivered.outcome {
                    Some(Ok(Outcome::InProgress { .. })) => consumed.in_progress += 1,
                    Some(Ok(Outcome::Done { repeat: true, .. })) => consumed.repeats += 1,
                    Some(Ok(_)) => {}
                    Some(Err(e)) => consumed.error(format!("{key}: {e}")),
                    None => consumed.error(format!("poison: {:?}", delivered.action)),
                }
            }
        }
        Ok(consumed)
    }

    async fn consume_naive(
        &self,
        naive: &Naive<S>,
        stop: watch::Receiver<bool>,
    ) -> Result<Consumed, BoxError> {
        let mut consumed = Consumed::new();
        while !*stop.borrow() {
            for message in self.naive.receive(1).await? {
                consumed.messages += 1;
                let Ok(op) = KeyFrom::Envelope.operation(&message) else {
                    self.naive.dead_letter(&message, "not an envelope").await?;
                    consumed.error("a message that is not an envelope".into());
                    continue;
                };
                // Acked once the handler returns, whatever it returned.
                if let Err(e) = self.inner.deliver_naive(naive, &op.key, &op.payload).await {
                    consumed.error(format!("{}: {e}", op.key));
                }
                self.naive.ack(&message).await?;
            }
        }
        Ok(consumed)
    }

    async fn live(&self, store: &S, op_key: &str) -> Result<Option<usize>, BoxError> {
        self.inner.live(store, op_key).await
    }
}
