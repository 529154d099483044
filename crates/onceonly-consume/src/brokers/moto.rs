//! moto's SQS emulator as a child process, for tests and replay runs: the
//! real SQS cannot run on a test machine. Killed when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// A running `moto_server` on a free loopback port.
pub struct MotoServer {
    child: Child,
    endpoint: String,
}

impl MotoServer {
    /// The `moto_server` to use: env `ONCEONLY_MOTO_SERVER`, else
    /// `.venv/consume/bin/moto_server` under `repo` (where
    /// .ci/steps/30-consume.sh installs it).
    pub fn program(repo: &Path) -> PathBuf {
        std::env::var_os("ONCEONLY_MOTO_SERVER")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo.join(".venv/consume/bin/moto_server"))
    }

    /// Starts `program` on a free port of 127.0.0.1 and waits (up to 30s)
    /// until it listens. Sets dummy AWS credentials in this process's
    /// environment when none are set (moto takes any; the SDK wants some).
    pub async fn start(program: &Path) -> Result<Self> {
        let failed =
            |why: String| Error::Invalid(format!("moto_server ({}): {why}", program.display()));
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| failed(format!("no free port: {e}")))?
            .port();
        let mut child = Command::new(program)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| failed(format!("cannot start: {e}")))?;
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if started.elapsed() > Duration::from_secs(30)
                || child.try_wait().ok().flatten().is_some()
            {
                let _ = child.kill();
                let _ = child.wait();
                return Err(failed(format!("did not listen on port {port} within 30s")));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
            // Tests and replay runs set these before starting any other thread's work.
            std::env::set_var("AWS_ACCESS_KEY_ID", "testing");
            std::env::set_var("AWS_SECRET_ACCESS_KEY", "testing");
        }
        Ok(Self {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
        })
    }

    /// Its endpoint URL.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
