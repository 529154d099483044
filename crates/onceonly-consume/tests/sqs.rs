//! The consumer on SQS as moto emulates it (an emulator: the real SQS
//! cannot run here). Each test starts moto's server on a free loopback port
//! (ONCEONLY_MOTO_SERVER, default .venv/consume/bin/moto_server of the
//! repository, installed by .ci/steps/30-consume.sh).

mod support;

use std::path::Path;
use std::time::Duration;

use onceonly_consume::brokers::moto::MotoServer;
use onceonly_consume::brokers::sqs::{self as aws, SqsBroker, DEAD_REASON};
use support::Queues;

/// moto's server and a client on it.
struct Moto {
    _server: MotoServer,
    client: aws::aws_sdk_sqs::Client,
}

impl Moto {
    async fn start(test: &str) -> Option<Self> {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let program = MotoServer::program(&repo);
        match MotoServer::start(&program).await {
            Ok(server) => {
                let client = aws::client(Some(server.endpoint())).await;
                Some(Moto {
                    _server: server,
                    client,
                })
            }
            Err(e) => {
                support::unreachable(test, &e.to_string());
                None
            }
        }
    }
}

impl Queues for Moto {
    type B = SqsBroker;

    async fn make(&self, test: &str, redelivery: Duration) -> SqsBroker {
        let dead = aws::create_queue(&self.client, &format!("{test}-dead"), redelivery)
            .await
            .unwrap();
        let url = aws::create_queue(&self.client, test, redelivery)
            .await
            .unwrap();
        SqsBroker::new(self.client.clone(), &url, Some(&dead))
            .await
            .unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn visibility_timeout_shorter_than_the_job_timeout_is_refused() {
    let Some(q) = Moto::start("sqs refused").await else {
        return;
    };
    support::short_redelivery_is_refused(&q, "SQS", "VisibilityTimeout").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_operation_sent_twice_makes_one_effect() {
    let Some(q) = Moto::start("sqs twice").await else {
        return;
    };
    support::two_messages_one_effect(&q).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn poison_goes_to_the_dead_letter_queue_with_its_reason() {
    let Some(q) = Moto::start("sqs poison").await else {
        return;
    };
    let (broker, summary) = support::poison_goes_to_the_dead_letters(&q).await;
    assert!(summary.contains(", dead-lettered 3,"), "{summary}");
    let out = q
        .client
        .receive_message()
        .queue_url(broker.dead_letter_url())
        .max_number_of_messages(10)
        .message_attribute_names("All")
        .send()
        .await
        .unwrap();
    let mut reasons: Vec<String> = out
        .messages()
        .iter()
        .filter_map(|m| {
            m.message_attributes()?
                .get(DEAD_REASON)?
                .string_value()
                .map(str::to_owned)
        })
        .collect();
    reasons.sort();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(
        reasons.iter().any(|r| r.contains("not JSON")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.contains("no \"key\"")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.contains("another payload")),
        "{reasons:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_long_job_with_heartbeat_keeps_its_message() {
    let Some(q) = Moto::start("sqs heartbeat").await else {
        return;
    };
    support::heartbeat_keeps_the_message(&q).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_a_dead_letter_queue_it_refuses() {
    let Some(q) = Moto::start("sqs no dlq").await else {
        return;
    };
    let url = aws::create_queue(&q.client, "lonely", Duration::from_secs(30))
        .await
        .unwrap();
    let err = SqsBroker::new(q.client.clone(), &url, None)
        .await
        .err()
        .expect("no dead-letter queue: refused")
        .to_string();
    assert!(err.contains("no dead-letter queue"), "{err}");
}
