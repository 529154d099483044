//! NATS JetStream through a durable pull consumer (async-nats).
//!
//! Redelivery is the consumer's `ack_wait`; its `max_deliver` limits the
//! deliveries (-1: unlimited). Ack is a double ack (the server confirms),
//! a hand-back is a NAK with a delay, progress is AckProgress (`+WPI`),
//! and a poison message is terminated (`+TERM`): JetStream never delivers
//! it again and publishes a MSG_TERMINATED advisory; the reason is in the
//! consumer's error log line.

use std::time::Duration;

use async_nats::jetstream::consumer::{pull, Consumer as JsConsumer};
use async_nats::jetstream::message::AckKind;
use async_nats::jetstream::{self, stream};
use futures::StreamExt;

/// The client this adapter uses, for callers that need its types.
pub use async_nats;

use crate::broker::{Broker, Message, Publish, Redelivery};
use crate::error::{Error, Result};

/// A JetStream durable pull consumer.
pub struct NatsBroker {
    context: jetstream::Context,
    consumer: JsConsumer<pull::Config>,
    source: String,
    subject: Option<String>,
}

/// A message received from JetStream.
pub struct NatsMessage(jetstream::Message);

impl Message for NatsMessage {
    fn body(&self) -> &[u8] {
        &self.0.payload
    }

    fn header(&self, name: &str) -> Option<String> {
        let value = self.0.headers.as_ref()?.get(name)?;
        Some(value.as_str().to_owned())
    }

    fn id(&self) -> String {
        match self.0.info() {
            Ok(info) => format!("{}#{}", info.stream, info.stream_sequence),
            Err(_) => "?".into(),
        }
    }

    fn deliveries(&self) -> u64 {
        self.0
            .info()
            .map_or(1, |info| u64::try_from(info.delivered).unwrap_or(1))
    }
}

/// Connects to the server at `url` (a `nats://` URL).
pub async fn connect(url: &str) -> Result<jetstream::Context> {
    let client = async_nats::connect(url)
        .await
        .map_err(|e| Error::broker(format!("connecting to NATS at {url}"), e))?;
    Ok(jetstream::new(client))
}

/// Creates (or updates) a stream on `subject` and a durable pull consumer
/// on it with `ack_wait` and unlimited deliveries: a work queue for tests,
/// benchmarks and replay.
pub async fn create_work_queue(
    context: &jetstream::Context,
    stream_name: &str,
    subject: &str,
    consumer_name: &str,
    ack_wait: Duration,
) -> Result<()> {
    let stream = context
        .get_or_create_stream(stream::Config {
            name: stream_name.to_owned(),
            subjects: vec![subject.to_owned()],
            retention: stream::RetentionPolicy::WorkQueue,
            ..Default::default()
        })
        .await
        .map_err(|e| Error::broker(format!("creating JetStream stream {stream_name}"), e))?;
    stream
        .create_consumer(pull::Config {
            durable_name: Some(consumer_name.to_owned()),
            ack_wait,
            max_deliver: -1,
            max_ack_pending: 100_000,
            ..Default::default()
        })
        .await
        .map_err(|e| {
            Error::broker(
                format!("creating JetStream consumer {stream_name}/{consumer_name}"),
                e,
            )
        })?;
    Ok(())
}

/// Publishes `body` on `subject` and waits for the stream's acknowledgement.
pub async fn publish(context: &jetstream::Context, subject: &str, body: Vec<u8>) -> Result<()> {
    let what = || format!("publishing to JetStream subject {subject}");
    context
        .publish(subject.to_owned(), body.into())
        .await
        .map_err(|e| Error::broker(what(), e))?
        .await
        .map_err(|e| Error::broker(what(), e))?;
    Ok(())
}

impl NatsBroker {
    /// Connects to `url` and binds the durable pull consumer `consumer` of
    /// `stream` (both must exist).
    pub async fn connect(url: &str, stream: &str, consumer: &str) -> Result<Self> {
        let context = connect(url).await?;
        Self::bind(context, stream, consumer).await
    }

    /// Binds the durable pull consumer `consumer` of `stream` on a connection.
    pub async fn bind(context: jetstream::Context, stream: &str, consumer: &str) -> Result<Self> {
        let source = format!("JetStream consumer {stream}/{consumer}");
        let js_stream = context
            .get_stream(stream)
            .await
            .map_err(|e| Error::broker(format!("reading JetStream stream {stream}"), e))?;
        let consumer = js_stream
            .get_consumer::<pull::Config>(consumer)
            .await
            .map_err(|e| Error::broker(format!("reading {source}"), e))?;
        Ok(Self {
            context,
            consumer,
            source,
            subject: None,
        })
    }

    /// Publishes (through [`Publish`]) on `subject`, one the stream holds.
    pub fn publishing_to(mut self, subject: impl Into<String>) -> Self {
        self.subject = Some(subject.into());
        self
    }

    /// The JetStream context (to publish on the same connection).
    pub fn context(&self) -> &jetstream::Context {
        &self.context
    }

    fn failed(&self, what: &str, e: impl Into<crate::BoxError>) -> Error {
        Error::broker(format!("{what} on {}", self.source), e)
    }
}

impl Broker for NatsBroker {
    type Message = NatsMessage;

    fn name(&self) -> &'static str {
        "nats"
    }

    fn poison_action(&self) -> &'static str {
        // JetStream has no dead-letter queue: +TERM ends the message.
        "terminated"
    }

    async fn redelivery(&self) -> Result<Redelivery> {
        let mut consumer = self.consumer.clone();
        let info = consumer
            .info()
            .await
            .map_err(|e| self.failed("reading consumer info", e))?;
        Ok(Redelivery {
            timeout: info.config.ack_wait,
            max_deliveries: u64::try_from(info.config.max_deliver)
                .ok()
                .filter(|n| *n > 0),
            source: self.source.clone(),
            timeout_name: "ack_wait",
            limit_name: "max_deliver",
        })
    }

    async fn receive(&self, max: usize) -> Result<Vec<NatsMessage>> {
        // Wait up to a second for the first message, then take whatever
        // else is there at once: nothing is fetched ahead of its handling,
        // so no message waits in this process while its ack_wait runs.
        let mut first = self
            .consumer
            .batch()
            .max_messages(1)
            .expires(Duration::from_secs(1))
            .messages()
            .await
            .map_err(|e| self.failed("pulling", e))?;
        let mut out = Vec::with_capacity(max);
        while let Some(m) = first.next().await {
            out.push(NatsMessage(m.map_err(|e| self.failed("pulling", e))?));
        }
        if out.is_empty() || max <= 1 {
            return Ok(out);
        }
        let mut rest = self
            .consumer
            .fetch()
            .max_messages(max - 1)
            .messages()
            .await
            .map_err(|e| self.failed("pulling", e))?;
        while let Some(m) = rest.next().await {
            out.push(NatsMessage(m.map_err(|e| self.failed("pulling", e))?));
        }
        Ok(out)
    }

    async fn ack(&self, message: &NatsMessage) -> Result<()> {
        message
            .0
            .double_ack()
            .await
            .map_err(|e| self.failed("acking", e))
    }

    async fn hand_back(&self, message: &NatsMessage, delay: Duration) -> Result<()> {
        message
            .0
            .ack_with(AckKind::Nak(Some(delay)))
            .await
            .map_err(|e| self.failed("NAK with delay", e))
    }

    async fn dead_letter(&self, message: &NatsMessage, _reason: &str) -> Result<()> {
        message
            .0
            .double_ack_with(AckKind::Term)
            .await
            .map_err(|e| self.failed("terminating", e))
    }

    async fn progress(&self, message: &NatsMessage) -> Result<()> {
        message
            .0
            .ack_with(AckKind::Progress)
            .await
            .map_err(|e| self.failed("AckProgress", e))
    }
}

impl Publish for NatsBroker {
    async fn publish(&self, body: Vec<u8>) -> Result<()> {
        let subject = self.subject.as_deref().ok_or_else(|| {
            Error::Invalid(format!(
                "{}: no subject to publish on (publishing_to)",
                self.source
            ))
        })?;
        publish(&self.context, subject, body).await
    }

    async fn backlog(&self) -> Result<u64> {
        let mut consumer = self.consumer.clone();
        let info = consumer
            .info()
            .await
            .map_err(|e| self.failed("reading consumer info", e))?;
        // num_pending: not yet delivered (a NAK with delay counts here
        // again); num_ack_pending: delivered, not yet acked.
        Ok(info.num_pending + info.num_ack_pending as u64)
    }
}
