//! A real worker process, killed with SIGKILL at a named point.
//!
//! The harness starts the worker command with the [`WorkerRequest`] as JSON
//! in the environment variable [`REQUEST_ENV`]. The worker ([`crate::worker::serve`]) delivers the
//! message and, on reaching the point, prints a line starting with
//! [`REACHED`] on stdout and stops there; the harness then kills it with
//! SIGKILL (no cleanup of any kind runs) and waits for it.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use onceonly::FaultPoint;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::Command;

use crate::error::{Error, Result};

/// What a worker prints on stdout when it reaches its point (then the point's name).
pub const REACHED: &str = "onceonly-replay-worker reached";

/// The environment variable that carries the request JSON to the worker.
pub const REQUEST_ENV: &str = "ONCEONLY_REPLAY_REQUEST";

/// How long a worker may take to reach its point before the harness gives up.
pub const REACH_WITHIN: Duration = Duration::from_secs(30);

/// The program the harness starts as a worker, its arguments and environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerCommand {
    /// The executable.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment variables set for it (besides [`REQUEST_ENV`]).
    pub env: Vec<(String, String)>,
}

impl WorkerCommand {
    /// `program` with no arguments yet.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
        }
    }

    /// Sets an environment variable for the worker.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Appends an argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }
}

/// What a worker process is asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerRequest {
    /// The operation key to deliver.
    pub op_key: String,
    /// The payload to deliver.
    pub payload: serde_json::Value,
    /// Where to stop and wait for the SIGKILL: `after_claim` or `after_effect`.
    pub point: String,
    /// Deliver through the naive version instead of the guard.
    pub naive: bool,
    /// The harness's clock offset (ms), so both processes read one clock.
    pub clock_offset_ms: i64,
}

impl WorkerRequest {
    /// The crash point, parsed.
    pub fn fault_point(&self) -> Result<FaultPoint> {
        FaultPoint::ALL
            .into_iter()
            .find(|p| p.name() == self.point)
            .ok_or_else(|| {
                Error::Worker(format!(
                    "unknown point {:?}; one of after_claim, after_effect",
                    self.point
                ))
            })
    }

    /// The request as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a request serializes")
    }

    /// Parses the request JSON.
    pub fn from_json(text: &str) -> Result<Self> {
        serde_json::from_str(text)
            .map_err(|e| Error::Worker(format!("bad worker request {text:?}: {e}")))
    }

    /// The request this process was started with ([`REQUEST_ENV`]), if any.
    pub fn from_env() -> Result<Option<Self>> {
        match std::env::var(REQUEST_ENV) {
            Ok(text) => Self::from_json(&text).map(Some),
            Err(_) => Ok(None),
        }
    }
}

/// How a worker process ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Killed {
    /// Its process id.
    pub pid: u32,
    /// The line it printed on reaching its point.
    pub reached: String,
    /// The signal that ended it (9 for SIGKILL).
    pub signal: Option<i32>,
    /// From start to the reported point.
    pub reached_after_ms: u64,
}

impl Killed {
    /// `pid 4242 reached after_claim in 35ms, ended by signal 9`.
    pub fn describe(&self) -> String {
        let reached = self
            .reached
            .trim_start_matches(REACHED)
            .split_whitespace()
            .next()
            .unwrap_or("?");
        format!(
            "pid {} reached {reached} in {}ms, ended by signal {}",
            self.pid,
            self.reached_after_ms,
            self.signal
                .map_or_else(|| "none".to_owned(), |s| s.to_string())
        )
    }
}

#[cfg(unix)]
fn signal_of(status: std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.signal()
}

#[cfg(not(unix))]
fn signal_of(_status: std::process::ExitStatus) -> Option<i32> {
    None
}

/// The last `limit` bytes of what a reader yields, as text.
async fn tail(mut reader: impl tokio::io::AsyncRead + Unpin, limit: usize) -> String {
    let mut all = Vec::new();
    let _ = reader.read_to_end(&mut all).await;
    let start = all.len().saturating_sub(limit);
    String::from_utf8_lossy(&all[start..]).trim().to_owned()
}

/// Starts `command` with `request`, waits (up to [`REACH_WITHIN`]) for it
/// to report its point, and kills it with SIGKILL there.
///
/// Returns [`Error::Worker`] with the worker's stderr when it exits or
/// stalls before reaching the point.
pub async fn kill_at(command: &WorkerCommand, request: &WorkerRequest) -> Result<Killed> {
    let point = request.fault_point()?;
    let started = Instant::now();
    let mut child = Command::new(&command.program)
        .args(&command.args)
        .envs(command.env.iter().map(|(k, v)| (k, v)))
        .env(REQUEST_ENV, request.to_json())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| Error::Worker(format!("cannot start {}: {e}", command.program.display())))?;
    let pid = child.id().unwrap_or(0);
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    let stderr = tokio::spawn(tail(stderr, 2000));
    let mut lines = BufReader::new(stdout).lines();
    let wanted = format!("{REACHED} {point}");
    let reached = tokio::time::timeout(REACH_WITHIN, async {
        // Ends at the marker, at end of output, or at the timeout.
        while let Some(line) = lines.next_line().await? {
            // Anywhere in the line: a test harness may print before it.
            if let Some(at) = line.find(&wanted) {
                return Ok(Some(line[at..].to_owned()));
            }
        }
        Ok::<_, std::io::Error>(None)
    })
    .await;
    let reached_after_ms = started.elapsed().as_millis() as u64;
    match reached {
        Ok(Ok(Some(line))) => {
            // tokio's kill sends SIGKILL on Unix: no handler, no cleanup runs.
            child
                .kill()
                .await
                .map_err(|e| Error::Worker(format!("cannot kill pid {pid}: {e}")))?;
            let status = child
                .wait()
                .await
                .map_err(|e| Error::Worker(format!("cannot reap pid {pid}: {e}")))?;
            Ok(Killed {
                pid,
                reached: line,
                signal: signal_of(status),
                reached_after_ms,
            })
        }
        outcome => {
            let _ = child.start_kill();
            let status = child.wait().await.ok();
            let stderr = stderr.await.unwrap_or_default();
            let why = match outcome {
                Err(_) => format!("did not reach {point} within {}s", REACH_WITHIN.as_secs()),
                Ok(Err(e)) => format!("its stdout failed: {e}"),
                Ok(_) => format!(
                    "exited ({}) without reaching {point}",
                    status.map_or_else(|| "?".to_owned(), |s| s.to_string())
                ),
            };
            Err(Error::Worker(format!(
                "worker pid {pid} {why}; stderr: {stderr}"
            )))
        }
    }
}
