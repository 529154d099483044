//! A real worker process, killed with SIGKILL at a named point.
//!
//! The harness starts the worker command with the [`WorkerRequest`] as JSON
//! in the environment variable [`REQUEST_ENV`]. The worker ([`crate::worker::serve`]) delivers the
//! message and, on reaching the point, prints a line starting with
//! [`REACHED`] on stdout and stops there; the harness then kills it with
//! SIGKILL (no cleanup of any kind runs) and waits for it.
//!
//! A consumer process ([`WorkerRequest::consume`], for a job whose
//! deliveries go through a queue) prints [`READY`] once connected, consumes
//! the queue until its stdin closes, then prints [`CONSUMED`] and what it
//! did as JSON, and exits 0.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use onceonly::FaultPoint;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::job::Consumed;

/// What a worker prints on stdout when it reaches its point (then the point's name).
pub const REACHED: &str = "onceonly-replay-worker reached";

/// The environment variable that carries the request JSON to the worker.
pub const REQUEST_ENV: &str = "ONCEONLY_REPLAY_REQUEST";

/// What a consumer process prints once it consumes the queue.
pub const READY: &str = "onceonly-replay-consumer ready";

/// What a consumer process prints before its [`Consumed`] JSON, on stopping.
pub const CONSUMED: &str = "onceonly-replay-consumer consumed";

/// How long a consumer process may take to stop once its stdin closes
/// (it finishes the message in hand).
pub const STOP_WITHIN: Duration = Duration::from_secs(60);

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
    /// Consume the job's queue until stdin closes instead of delivering
    /// `op_key` and stopping at `point` (which are then unused).
    #[serde(default)]
    pub consume: bool,
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

/// A running consumer process ([`WorkerRequest::consume`]).
pub struct ConsumerProcess {
    child: Child,
    pid: u32,
    stdin: Option<ChildStdin>,
    lines: tokio::io::Lines<BufReader<ChildStdout>>,
    stderr: JoinHandle<String>,
}

impl ConsumerProcess {
    /// Starts `command` with `request` (its `consume` set) and waits (up to
    /// [`REACH_WITHIN`]) for it to say it is consuming.
    pub async fn start(command: &WorkerCommand, request: &WorkerRequest) -> Result<Self> {
        let request = WorkerRequest {
            consume: true,
            ..request.clone()
        };
        let mut child = Command::new(&command.program)
            .args(&command.args)
            .envs(command.env.iter().map(|(k, v)| (k, v)))
            .env(REQUEST_ENV, request.to_json())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                Error::Worker(format!("cannot start {}: {e}", command.program.display()))
            })?;
        let pid = child.id().unwrap_or(0);
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = tokio::spawn(tail(child.stderr.take().expect("stderr is piped"), 2000));
        let mut process = Self {
            child,
            pid,
            stdin,
            lines: BufReader::new(stdout).lines(),
            stderr,
        };
        match tokio::time::timeout(REACH_WITHIN, process.line_starting(READY)).await {
            Ok(Ok(Some(_))) => Ok(process),
            Ok(Ok(None)) => Err(process.failed("exited before consuming").await),
            Ok(Err(e)) => Err(process.failed(&format!("its stdout failed: {e}")).await),
            Err(_) => {
                let why = format!("did not start consuming within {}s", REACH_WITHIN.as_secs());
                Err(process.failed(&why).await)
            }
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The rest of the first line that starts with `marker` (a test harness
    /// may print before it on the same line), or `None` at end of output.
    async fn line_starting(&mut self, marker: &str) -> std::io::Result<Option<String>> {
        while let Some(line) = self.lines.next_line().await? {
            if let Some(at) = line.find(marker) {
                return Ok(Some(line[at + marker.len()..].trim().to_owned()));
            }
        }
        Ok(None)
    }

    /// Kills the process and names what went wrong, with its stderr.
    async fn failed(mut self, why: &str) -> Error {
        let _ = self.child.start_kill();
        let status = self.child.wait().await.ok();
        let stderr = self.stderr.await.unwrap_or_default();
        Error::Worker(format!(
            "consumer pid {} {why} ({}); stderr: {stderr}",
            self.pid,
            status.map_or_else(|| "?".to_owned(), |s| s.to_string())
        ))
    }

    /// Closes its stdin (the signal to stop), waits (up to [`STOP_WITHIN`])
    /// for what it consumed and for a clean exit.
    pub async fn stop(mut self) -> Result<Consumed> {
        drop(self.stdin.take());
        let reported = tokio::time::timeout(STOP_WITHIN, self.line_starting(CONSUMED)).await;
        let json = match reported {
            Ok(Ok(Some(json))) => json,
            Ok(Ok(None)) => return Err(self.failed("exited without its report").await),
            Ok(Err(e)) => return Err(self.failed(&format!("its stdout failed: {e}")).await),
            Err(_) => {
                let why = format!("did not stop within {}s", STOP_WITHIN.as_secs());
                return Err(self.failed(&why).await);
            }
        };
        let consumed: Consumed = match serde_json::from_str(&json) {
            Ok(c) => c,
            Err(e) => return Err(self.failed(&format!("reported {json:?}: {e}")).await),
        };
        match tokio::time::timeout(STOP_WITHIN, self.child.wait()).await {
            Ok(Ok(status)) if status.success() => Ok(consumed),
            Ok(Ok(status)) => Err(self.failed(&format!("exited with {status}")).await),
            Ok(Err(e)) => Err(self.failed(&format!("cannot be reaped: {e}")).await),
            Err(_) => Err(self.failed("did not exit after its report").await),
        }
    }
}
