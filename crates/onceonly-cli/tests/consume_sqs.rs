//! `onceonly consume sqs`, `check --sqs-queue-url` and `replay --queue
//! sqs` on moto's SQS emulator (the real SQS cannot run here), started by
//! each test on a free loopback port.

mod common;
mod queues;

use std::path::Path;
use std::time::Duration;

use onceonly_consume::brokers::moto::MotoServer;
use onceonly_consume::brokers::sqs as aws;
use queues::Target;

/// moto, a queue with `visibility` and its dead-letter queue, or None
/// (skipping loudly outside CI) when moto_server is missing.
async fn queue(
    test: &str,
    visibility: Duration,
) -> Option<(MotoServer, aws::aws_sdk_sqs::Client, String, Target)> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let server = match MotoServer::start(&MotoServer::program(&repo)).await {
        Ok(s) => s,
        Err(e) => {
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("{test}: {e} under CI=true");
            }
            eprintln!("\n*** SKIPPED {test}: {e} ***\n");
            return None;
        }
    };
    let endpoint = server.endpoint().to_owned();
    let client = aws::client(Some(&endpoint)).await;
    let dead = aws::create_queue(&client, &format!("{test}-dead"), visibility)
        .await
        .unwrap();
    let url = aws::create_queue(&client, test, visibility).await.unwrap();
    let env = vec![
        ("AWS_ACCESS_KEY_ID".to_owned(), "testing".to_owned()),
        ("AWS_SECRET_ACCESS_KEY".to_owned(), "testing".to_owned()),
    ];
    let target = Target {
        consume: [
            "sqs",
            "--queue-url",
            &url,
            "--sqs-endpoint",
            &endpoint,
            "--dead-letter-queue",
            &dead,
        ]
        .map(str::to_owned)
        .to_vec(),
        check: ["--sqs-queue-url", &url, "--sqs-endpoint", &endpoint]
            .map(str::to_owned)
            .to_vec(),
        replay: ["--queue", "sqs", "--sqs-endpoint", &endpoint]
            .map(str::to_owned)
            .to_vec(),
        env,
    };
    Some((server, client, url, target))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_consumer_processes_make_one_effect_per_operation() {
    let Some((_moto, client, url, target)) = queue("two", Duration::from_secs(5)).await else {
        return;
    };
    use aws::aws_sdk_sqs::types::QueueAttributeName as A;
    queues::two_processes(
        &target,
        async |body| {
            aws::send(&client, &url, String::from_utf8(body).unwrap())
                .await
                .unwrap();
        },
        async || {
            let out = client
                .get_queue_attributes()
                .queue_url(&url)
                .attribute_names(A::ApproximateNumberOfMessages)
                .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
                .send()
                .await
                .unwrap();
            let attributes = out.attributes().cloned().unwrap_or_default();
            [
                A::ApproximateNumberOfMessages,
                A::ApproximateNumberOfMessagesNotVisible,
            ]
            .iter()
            .all(|a| attributes.get(a).map(String::as_str) == Some("0"))
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn visibility_timeout_shorter_than_the_job_timeout_is_refused_and_checked() {
    let Some((_moto, _, _, target)) = queue("refused", Duration::from_secs(5)).await else {
        return;
    };
    queues::refused(&target, "VisibilityTimeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replay_through_sqs() {
    let Some((_moto, _, _, target)) = queue("replay", Duration::from_secs(5)).await else {
        return;
    };
    queues::replay(&target, "sqs");
}
