//! The consumer on SQS as moto emulates it (an emulator: the real SQS
//! cannot run here). Each test starts moto's server on a free loopback port
//! (ONCEONLY_MOTO_SERVER, default .venv/consume/bin/moto_server of the
//! repository, installed by .ci/steps/30-consume.sh).

mod support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use onceonly_consume::brokers::sqs::{self as aws, SqsBroker, DEAD_REASON};
use support::Queues;

/// moto's server, killed when dropped.
struct Moto {
    child: Child,
    endpoint: String,
    client: aws::aws_sdk_sqs::Client,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn moto_server() -> PathBuf {
    std::env::var_os("ONCEONLY_MOTO_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv/consume/bin/moto_server")
        })
}

impl Moto {
    async fn start(test: &str) -> Option<Self> {
        let program = moto_server();
        if !program.exists() {
            support::unreachable(test, &format!("moto_server ({})", program.display()));
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(&program)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{test}: moto_server did not listen on {port} within 30s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // moto takes any credentials; the SDK wants some.
        std::env::set_var("AWS_ACCESS_KEY_ID", "testing");
        std::env::set_var("AWS_SECRET_ACCESS_KEY", "testing");
        let endpoint = format!("http://127.0.0.1:{port}");
        let client = aws::client(Some(&endpoint)).await;
        Some(Moto {
            child,
            endpoint,
            client,
        })
    }
}

impl Queues for Moto {
    type B = SqsBroker;

    async fn make(&self, test: &str, redelivery: Duration) -> SqsBroker {
        let _ = &self.endpoint;
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
    let broker = support::poison_goes_to_the_dead_letters(&q).await;
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
