//! Guarded consumers for Amazon SQS and NATS JetStream: each message's
//! operation runs through an [`onceonly::Guard`], and the message is
//! acknowledged only once the operation record is completed, held, failed
//! or cancelled.
//!
//! - An operation another worker is on is handed back with a delay (the
//!   rest of that claim's lease); a retry with a backoff: never a busy loop.
//! - A message that can never be processed (no key, a body that is not
//!   JSON, a key reused with another payload) goes to the dead-letter queue
//!   (SQS) or is terminated (JetStream), with a log line naming why.
//! - Before consuming, [`Consumer::new`] reads the broker's redelivery
//!   timeout and delivery limit and refuses to start when they break
//!   docs/DESIGN.md section 4's rules ([`timing`]), naming both values.
//! - With a heartbeat, every beat that renews the lease also tells the
//!   broker the worker is alive, so a long job keeps its message and its
//!   claim together.
//!
//! The brokers sit behind the small [`Broker`] trait; the SQS adapter is
//! behind the cargo feature `sqs`, the JetStream one behind `nats`.
//!
//! ```no_run
//! # #[cfg(feature = "nats")]
//! # async fn demo<S: onceonly::Store>(store: S) -> Result<(), Box<dyn std::error::Error>> {
//! use onceonly::{EffectKind, Guard, JobSpec};
//! use onceonly_consume::brokers::nats::NatsBroker;
//! use onceonly_consume::{Consumer, ConsumerConfig, Guarded};
//! # let effect: onceonly::EffectFn<fn(onceonly::EffectCtx) -> std::future::Ready<onceonly::EffectOutcome>> = todo!();
//!
//! let spec = JobSpec::new("send_receipt", EffectKind::Keyed);
//! let guard = Guard::new(store, spec.clone())?;
//! let broker = NatsBroker::connect("nats://127.0.0.1:4222", "ORDERS", "receipts").await?;
//! let consumer = Consumer::new(broker, &spec, ConsumerConfig::default()).await?;
//! let (_stop, stop_rx) = tokio::sync::watch::channel(false);
//! consumer.run(&Guarded { guard: &guard, effect: &effect }, stop_rx).await?;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

mod broker;
pub mod brokers;
mod consumer;
mod error;
pub mod replay;
pub mod settle;
mod shape;
pub mod timing;

pub use broker::{Broker, Message, Publish, Redelivery};
pub use consumer::{ConsumeStats, Consumer, ConsumerConfig, Delivered, Guarded, Handler};
pub use error::{BoxError, Error, Result};
pub use settle::Action;
pub use shape::{envelope_body, KeyFrom, Operation, Poison, MAX_BODY_BYTES};
