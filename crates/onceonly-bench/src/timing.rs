//! Throughput and latency percentiles of a run of operations.

use std::future::Future;

use futures::stream::{self, StreamExt, TryStreamExt};
use hdrhistogram::Histogram;
// tokio's clock, so that a test can pause it; the system's otherwise.
use tokio::time::Instant;

/// Throughput and latency of one measurement.
pub struct Timing {
    /// Operations per second over the whole run.
    pub ops_per_s: f64,
    /// Median latency.
    pub p50_ms: f64,
    /// 99th percentile latency.
    pub p99_ms: f64,
}

/// Latencies from 1 µs to an hour, to 3 significant digits. The histogram
/// is a fixed-size array of counts (under 200 KiB), so peak memory does not
/// grow with the number of operations.
fn histogram() -> Histogram<u32> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

/// Runs `ops` operations, `concurrency` at a time, and times each.
pub async fn timed<F, Fut>(ops: usize, concurrency: usize, op: F) -> anyhow::Result<Timing>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let op = &op;
    let start = Instant::now();
    let mut latencies = histogram();
    let mut runs = stream::iter(0..ops)
        .map(|i| async move {
            let t = Instant::now();
            op(i).await?;
            Ok::<_, anyhow::Error>(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX))
        })
        .buffer_unordered(concurrency.max(1));
    while let Some(micros) = runs.try_next().await? {
        latencies.saturating_record(micros.max(1));
    }
    let elapsed = start.elapsed();
    let ms = |q: f64| latencies.value_at_quantile(q) as f64 / 1000.0;
    Ok(Timing {
        ops_per_s: ops as f64 / elapsed.as_secs_f64(),
        p50_ms: ms(0.50),
        p99_ms: ms(0.99),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn percentiles_come_from_the_recorded_latencies() {
        // 100 operations: 98 instant ones, then two of 40 ms (on the paused
        // clock, which the sleeps move), one at a time: the median is
        // instant, the 99th percentile is a slow one.
        let timing = timed(100, 1, |i| async move {
            if i >= 98 {
                tokio::time::sleep(std::time::Duration::from_millis(40)).await;
            }
            Ok(())
        })
        .await
        .unwrap();
        assert!(timing.p50_ms < 1.0, "p50 {}", timing.p50_ms);
        assert!(timing.p99_ms >= 40.0, "p99 {}", timing.p99_ms);
        // 100 operations in the 80 ms the two slow ones took.
        assert!(
            (timing.ops_per_s - 1250.0).abs() < 1.0,
            "{}",
            timing.ops_per_s
        );
    }

    #[tokio::test]
    async fn a_failed_operation_fails_the_run() {
        let err = timed(10, 4, |i| async move {
            anyhow::ensure!(i != 7, "op {i} failed");
            Ok(())
        })
        .await
        .err()
        .expect("the run fails");
        assert!(err.to_string().contains("op 7 failed"), "{err}");
    }
}
