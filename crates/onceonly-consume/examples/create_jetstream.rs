//! Creates a JetStream stream and the durable pull consumer `onceonly
//! consume nats` reads (docs/queues.md, "Creating the stream and the
//! consumer"):
//!
//! ```text
//! cargo run -p onceonly-consume --features nats --example create_jetstream -- \
//!     [--nats nats://127.0.0.1:4222] ORDERS 'orders.>' worker 30s
//! ```
//!
//! A work-queue stream on the subjects, and a durable pull consumer with
//! explicit acks, `ack_wait` as given (longer than the job timeout, or
//! renewed by `--heartbeat`) and unlimited deliveries. Running it again
//! changes nothing.

use std::time::Duration;

use onceonly_consume::brokers::nats;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut url = "nats://127.0.0.1:4222".to_owned();
    if args.first().map(String::as_str) == Some("--nats") && args.len() > 1 {
        url = args.remove(1);
        args.remove(0);
    }
    let [stream, subjects, consumer, ack_wait] = args.as_slice() else {
        return Err(
            "usage: create_jetstream [--nats URL] STREAM SUBJECTS CONSUMER ACK_WAIT".into(),
        );
    };
    let ack_wait: Duration = onceonly::parse_duration(ack_wait)?;
    let context = nats::connect(&url).await?;
    nats::create_work_queue(&context, stream, subjects, consumer, ack_wait).await?;
    println!(
        "stream {stream} on {subjects}, durable pull consumer {stream}/{consumer} with ack_wait {}: ready for onceonly consume nats --stream {stream} --consumer {consumer}",
        humantime::format_duration(ack_wait)
    );
    Ok(())
}
