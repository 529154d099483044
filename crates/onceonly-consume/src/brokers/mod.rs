//! The broker adapters, each behind its cargo feature.

#[cfg(feature = "sqs")]
pub mod moto;
#[cfg(feature = "nats")]
pub mod nats;
#[cfg(feature = "sqs")]
pub mod sqs;
mod sqs_attribute;
