//! The consumer on the NATS JetStream server of the machine
//! (ONCEONLY_TEST_NATS, default nats://127.0.0.1:4222), each test on a
//! stream of its own.

mod support;

use std::time::Duration;

use onceonly_consume::brokers::nats::{self as js, NatsBroker};
use support::Queues;

fn url() -> String {
    std::env::var("ONCEONLY_TEST_NATS").unwrap_or_else(|_| "nats://127.0.0.1:4222".into())
}

struct Nats(js::async_nats::jetstream::Context);

impl Nats {
    async fn connect(test: &str) -> Option<Self> {
        match js::connect(&url()).await {
            Ok(context) => Some(Nats(context)),
            Err(e) => {
                support::unreachable(test, &format!("NATS at {} ({e})", url()));
                None
            }
        }
    }
}

impl Queues for Nats {
    type B = NatsBroker;

    async fn make(&self, test: &str, redelivery: Duration) -> NatsBroker {
        let unique = format!(
            "onceonly_test_{test}_{}_{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        );
        let subject = format!("{unique}.in");
        js::create_work_queue(&self.0, &unique, &subject, "worker", redelivery)
            .await
            .unwrap();
        NatsBroker::bind(self.0.clone(), &unique, "worker")
            .await
            .unwrap()
            .publishing_to(subject)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ack_wait_shorter_than_the_job_timeout_is_refused() {
    let Some(q) = Nats::connect("nats refused").await else {
        return;
    };
    support::short_redelivery_is_refused(&q, "JetStream", "ack_wait").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_operation_sent_twice_makes_one_effect() {
    let Some(q) = Nats::connect("nats twice").await else {
        return;
    };
    support::two_messages_one_effect(&q).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn poison_is_terminated_not_redelivered() {
    let Some(q) = Nats::connect("nats poison").await else {
        return;
    };
    let (_, summary) = support::poison_goes_to_the_dead_letters(&q).await;
    // JetStream has no dead letters: the summary says what was done.
    assert!(summary.contains(", terminated 3,"), "{summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_long_job_with_heartbeat_keeps_its_message() {
    let Some(q) = Nats::connect("nats heartbeat").await else {
        return;
    };
    support::heartbeat_keeps_the_message(&q).await;
}
