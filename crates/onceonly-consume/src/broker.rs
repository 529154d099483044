//! The small surface a broker gives the consumer loop: receive, ack, hand
//! back with a delay, dead-letter, progress, and its redelivery settings.

use std::future::Future;
use std::time::Duration;

use crate::error::Result;

/// How a broker redelivers an unacknowledged message, as read from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redelivery {
    /// After how long an unacknowledged message is delivered again
    /// (SQS VisibilityTimeout, JetStream ack_wait).
    pub timeout: Duration,
    /// How many deliveries a message gets before the broker gives up on it
    /// (SQS RedrivePolicy maxReceiveCount, JetStream max_deliver); `None`
    /// when unlimited.
    pub max_deliveries: Option<u64>,
    /// Where the numbers come from, for messages: `SQS queue orders
    /// VisibilityTimeout`, `JetStream consumer ORDERS/worker ack_wait`.
    pub source: String,
    /// The setting's name for the timeout (`VisibilityTimeout`, `ack_wait`).
    pub timeout_name: &'static str,
    /// The setting's name for the delivery limit (`maxReceiveCount`, `max_deliver`).
    pub limit_name: &'static str,
}

/// One received message.
pub trait Message: Send + Sync + 'static {
    /// The body as sent.
    fn body(&self) -> &[u8];
    /// A header (JetStream) or String message attribute (SQS).
    fn header(&self, name: &str) -> Option<String>;
    /// Why `name` is there but cannot carry a key (an SQS Number or
    /// Binary attribute); `None` when it is absent or usable.
    fn header_unusable(&self, _name: &str) -> Option<String> {
        None
    }
    /// The broker's id for the message, for log lines.
    fn id(&self) -> String;
    /// How many times the broker has delivered it, this time included.
    fn deliveries(&self) -> u64;
}

/// A queue the consumer loop reads. Every call names what failed in its error.
pub trait Broker: Send + Sync + 'static {
    /// A received message.
    type Message: Message;

    /// `sqs` or `nats`, for log lines.
    fn name(&self) -> &'static str;

    /// Reads the redelivery settings from the broker.
    fn redelivery(&self) -> impl Future<Output = Result<Redelivery>> + Send;

    /// Waits up to about a second for messages; returns at most `max`
    /// (possibly none).
    fn receive(&self, max: usize) -> impl Future<Output = Result<Vec<Self::Message>>> + Send;

    /// Removes the message for good (SQS DeleteMessage, JetStream ack).
    fn ack(&self, message: &Self::Message) -> impl Future<Output = Result<()>> + Send;

    /// Makes the message invisible for `delay`, then delivers it again
    /// (SQS ChangeMessageVisibility, JetStream NAK with delay).
    fn hand_back(
        &self,
        message: &Self::Message,
        delay: Duration,
    ) -> impl Future<Output = Result<()>> + Send;

    /// What [`Broker::dead_letter`] does, as log lines and the summary
    /// say it: `dead-lettered` (SQS) or `terminated` (JetStream).
    fn poison_action(&self) -> &'static str {
        "dead-lettered"
    }

    /// Takes the message out of circulation because it can never be
    /// processed: to the dead-letter queue (SQS) or terminated (JetStream).
    fn dead_letter(
        &self,
        message: &Self::Message,
        reason: &str,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Says a live worker still has the message: its redelivery timeout
    /// starts again (SQS ChangeMessageVisibility, JetStream AckProgress).
    fn progress(&self, message: &Self::Message) -> impl Future<Output = Result<()>> + Send;
}

/// A queue that can also be sent to (tests, benchmarks, replay).
pub trait Publish: Broker {
    /// Sends `body` to the queue this broker consumes, confirmed by the broker.
    fn publish(&self, body: Vec<u8>) -> impl Future<Output = Result<()>> + Send;

    /// Messages the queue still holds: waiting, received but not yet
    /// acked, or handed back with a delay. Zero means the broker has
    /// nothing left to deliver.
    fn backlog(&self) -> impl Future<Output = Result<u64>> + Send;
}
