//! `onceonly consume nats`, `check --nats-consumer` and `replay --queue
//! nats` on the machine's NATS JetStream server (ONCEONLY_TEST_NATS,
//! default nats://127.0.0.1:4222), each test on streams of its own.

mod common;
mod queues;

use std::time::Duration;

use onceonly_consume::brokers::nats as js;
use queues::Target;

fn url() -> String {
    std::env::var("ONCEONLY_TEST_NATS").unwrap_or_else(|_| "nats://127.0.0.1:4222".into())
}

/// A fresh stream and consumer with `ack_wait`, or None (skipping loudly
/// outside CI) when NATS is unreachable.
async fn stream(
    test: &str,
    ack_wait: Duration,
) -> Option<(js::async_nats::jetstream::Context, String, Target)> {
    let context = match js::connect(&url()).await {
        Ok(c) => c,
        Err(e) => {
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("{test}: NATS unreachable under CI=true: {e}");
            }
            eprintln!("\n*** SKIPPED {test}: NATS unreachable: {e} ***\n");
            return None;
        }
    };
    let name = common::unique_job(&format!("cli_{test}")).replace('-', "_");
    let subject = format!("{name}.in");
    js::create_work_queue(&context, &name, &subject, "worker", ack_wait)
        .await
        .unwrap();
    let target = Target {
        consume: [
            "nats",
            "--nats",
            &url(),
            "--stream",
            &name,
            "--consumer",
            "worker",
        ]
        .map(str::to_owned)
        .to_vec(),
        check: [
            "--nats",
            &url(),
            "--nats-consumer",
            &format!("{name}/worker"),
        ]
        .map(str::to_owned)
        .to_vec(),
        replay: ["--queue", "nats", "--nats", &url()]
            .map(str::to_owned)
            .to_vec(),
        env: Vec::new(),
    };
    Some((context, subject, target))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_consumer_processes_make_one_effect_per_operation() {
    let Some((context, subject, target)) = stream("two", Duration::from_secs(5)).await else {
        return;
    };
    let stream = subject.trim_end_matches(".in").to_owned();
    queues::two_processes(
        &target,
        async |body| {
            js::publish(&context, &subject, body).await.unwrap();
        },
        async || {
            let mut consumer = context
                .get_stream(&stream)
                .await
                .unwrap()
                .get_consumer::<js::async_nats::jetstream::consumer::pull::Config>("worker")
                .await
                .unwrap();
            let info = consumer.info().await.unwrap();
            info.num_pending == 0 && info.num_ack_pending == 0
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ack_wait_shorter_than_the_job_timeout_is_refused_and_checked() {
    let Some((_, _, target)) = stream("refused", Duration::from_secs(5)).await else {
        return;
    };
    queues::refused(&target, "ack_wait");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replay_through_jetstream() {
    let Some((_, _, target)) = stream("replay", Duration::from_secs(5)).await else {
        return;
    };
    queues::replay(&target, "nats");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slow_destination_within_the_timeout_completes_once() {
    let Some((context, subject, target)) = stream("slow", Duration::from_secs(5)).await else {
        return;
    };
    queues::slow_destination_completes_once(&target, async |body| {
        js::publish(&context, &subject, body).await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn poison_lines_name_the_bad_key_and_say_terminated() {
    let Some((context, subject, target)) = stream("poison", Duration::from_secs(5)).await else {
        return;
    };
    queues::poison_lines_name_the_bad_key(&target, "terminated", async |body| {
        js::publish(&context, &subject, body).await.unwrap();
    })
    .await;
}
