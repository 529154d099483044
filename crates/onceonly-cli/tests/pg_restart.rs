//! The relay survives a restart of PostgreSQL while it runs (issue 4):
//! it reconnects with backoff, keeps every row and sends nothing twice.
//!
//! The test starts a private PostgreSQL of its own (initdb and pg_ctl in a
//! temp dir, trust auth, a free port on 127.0.0.1), never the shared server,
//! because it stops and starts it. A real `onceonly run` process relays to a
//! real keyed HTTP destination on 127.0.0.1 while the server goes down.
//!
//! Without initdb/pg_ctl the test fails, or skips loudly with
//! `ONCEONLY_SKIP_PG=1` outside CI (`onceonly_sqlx::test_db::TestDb::may_skip`).
//! ONCEONLY_KEEP_PG=1 keeps the temp dir (server and relay logs).

mod common;

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use onceonly::idempotency_key;
use onceonly_http::test_server::{Mode, TestServer};

/// Operations queued before the relay starts.
const OPS: usize = 300;
/// Claim loops of the relay (`--workers`; each claims one row at a time).
const WORKERS: usize = 4;
/// Items created at the destination before the restart.
const BEFORE_RESTART: usize = 60;

/// A private PostgreSQL cluster in a temp dir; stopped (immediate) on drop.
struct PrivatePg {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    /// PostgreSQL refuses to run as root: run its tools as `postgres` then.
    as_postgres: bool,
}

impl PrivatePg {
    /// The newest /usr/lib/postgresql/*/bin holding initdb and pg_ctl.
    fn find_bin() -> Option<PathBuf> {
        let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|entry| {
                let entry = entry.ok()?;
                let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
                let bin = entry.path().join("bin");
                (bin.join("initdb").is_file() && bin.join("pg_ctl").is_file())
                    .then_some((version, bin))
            })
            .collect();
        found.sort();
        found.pop().map(|(_, bin)| bin)
    }

    /// initdb and start, or None when the binaries are not installed and
    /// the PostgreSQL tests may skip (`ONCEONLY_SKIP_PG=1`, never under CI).
    fn start(test: &str) -> Option<Self> {
        let pg = &onceonly_sqlx::test_db::PG;
        let Some(bin) = Self::find_bin() else {
            pg.may_skip(
                test,
                "no /usr/lib/postgresql/*/bin/initdb and pg_ctl",
                "Install PostgreSQL's server package",
            );
            return None;
        };
        let as_postgres = std::fs::metadata("/proc/self").unwrap().uid() == 0;
        if as_postgres
            && !Command::new("runuser")
                .args(["-u", "postgres", "--", "true"])
                .status()
                .is_ok_and(|s| s.success())
        {
            pg.may_skip(
                test,
                "running as root, and `runuser -u postgres` fails (PostgreSQL refuses to run as root)",
                "Run as another user, or create the `postgres` user",
            );
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("onceonly-pg-restart")
            .tempdir()
            .unwrap()
            .keep();
        if as_postgres {
            let chown = Command::new("chown")
                .arg("postgres:")
                .arg(&dir)
                .status()
                .unwrap();
            assert!(chown.success(), "chown postgres {}", dir.display());
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let pg = Self {
            bin,
            dir,
            port,
            as_postgres,
        };
        std::fs::create_dir(pg.socket_dir()).unwrap();
        if as_postgres {
            let chown = Command::new("chown")
                .arg("postgres:")
                .arg(pg.socket_dir())
                .status()
                .unwrap();
            assert!(chown.success());
        }
        let data = pg.data().to_str().unwrap().to_owned();
        pg.tool(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
        );
        let mut conf = std::fs::OpenOptions::new()
            .append(true)
            .open(pg.data().join("postgresql.conf"))
            .unwrap();
        writeln!(
            conf,
            "\n# onceonly pg_restart test\nlisten_addresses = '127.0.0.1'\nport = {}\n\
             unix_socket_directories = '{}'\nfsync = off\nfull_page_writes = off\n\
             synchronous_commit = off\nmax_connections = 50\n",
            pg.port,
            pg.socket_dir().display()
        )
        .unwrap();
        drop(conf);
        pg.start_server();
        Some(pg)
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn socket_dir(&self) -> PathBuf {
        self.dir.join("sock")
    }

    fn log(&self) -> PathBuf {
        self.dir.join("postgres.log")
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Runs one of PostgreSQL's tools (as `postgres` when we are root).
    fn tool_output(&self, name: &str, args: &[&str]) -> Output {
        let program = self.bin.join(name);
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&program);
            c
        } else {
            Command::new(&program)
        };
        cmd.args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", program.display()))
    }

    fn tool(&self, name: &str, args: &[&str]) {
        let out = self.tool_output(name, args);
        assert!(
            out.status.success(),
            "{name} {args:?}: {}\nserver log:\n{}",
            text(&out),
            self.log_tail()
        );
    }

    fn pg_ctl(&self, args: &[&str]) {
        let data = self.data().to_str().unwrap().to_owned();
        let log = self.log().to_str().unwrap().to_owned();
        let mut all = vec!["-D", &data, "-l", &log];
        all.extend_from_slice(args);
        self.tool("pg_ctl", &all);
    }

    fn start_server(&self) {
        self.pg_ctl(&["-w", "-t", "60", "start"]);
    }

    fn stop_server(&self) {
        self.pg_ctl(&["-w", "-t", "60", "-m", "fast", "stop"]);
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.log()).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for PrivatePg {
    fn drop(&mut self) {
        let data = self.data().to_str().unwrap().to_owned();
        let out = self.tool_output("pg_ctl", &["-D", &data, "-w", "-m", "immediate", "stop"]);
        if !out.status.success() {
            eprintln!(
                "pg_restart: stopping the private PostgreSQL: {}",
                text(&out)
            );
        }
        if std::thread::panicking() || std::env::var_os("ONCEONLY_KEEP_PG").is_some() {
            eprintln!(
                "pg_restart: kept {} (server log, relay log) for inspection",
                self.dir.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A relay process, SIGKILLed if the test fails while it runs.
struct RelayProcess(Child);

impl Drop for RelayProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// The destination's id for `idempotency_key` (GET /items?idempotency_key=,
/// which the keyed test server answers too).
async fn destination_id(base: &str, idempotency_key: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let host = base.strip_prefix("http://").unwrap();
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
    let query: String = idempotency_key
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    let request = format!(
        "GET /items?idempotency_key={query} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    if !response.starts_with("HTTP/1.1 200") {
        return None;
    }
    let body = response.split_once("\r\n\r\n")?.1;
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    v["id"].as_str().map(str::to_owned)
}

/// Starts `onceonly run` with its stderr in `log` (read afterwards, so a
/// chatty relay never blocks on a full pipe).
fn spawn_relay(db: &str, args: &[&str], log: &Path) -> RelayProcess {
    RelayProcess(
        Command::new(bin())
            .arg("--db")
            .arg(db)
            .args(args)
            .env(
                "ONCEONLY_LOG",
                std::env::var("ONCEONLY_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(File::create(log.with_extension("out")).unwrap())
            .stderr(File::create(log).unwrap())
            .spawn()
            .unwrap(),
    )
}

/// Waits for `child` at most `limit`; SIGKILLs it (and fails) past that.
async fn wait_bounded(child: &mut Child, limit: Duration, log: &Path) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if started.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!(
                "the relay did not exit within {limit:?} after the restart; its log:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_survives_a_postgres_restart() {
    let test = "relay_survives_a_postgres_restart";
    let Some(pg) = PrivatePg::start(test) else {
        return;
    };
    let pg = Arc::new(pg);
    let db = pg.url();
    let started = Instant::now();

    let job = unique_job("pgrestart");
    let keys: Vec<String> = (0..OPS).map(|i| format!("op-{i}")).collect();
    let lines: String = keys
        .iter()
        .map(|k| format!("{{\"key\": \"{k}\", \"payload\": {{\"k\": \"{k}\"}}}}\n"))
        .collect();
    let out = oo_stdin(
        &db,
        &["enqueue", "--job", &job, "--jsonl", "-"],
        Some(&lines),
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(inspect(&db, &job).len(), OPS, "all queued");

    // Every send is in flight a while after the item exists, so the restart
    // lands between effects and their write-backs.
    let server = TestServer::start(Mode::Keyed).await.unwrap();
    server.delay_after_create(Duration::from_millis(40));
    let base = server.base_url();
    let relay_log = pg.dir.join("relay.log");
    let mut relay = spawn_relay(
        &db,
        &[
            "run",
            "--job",
            &job,
            "--http",
            &base,
            "--effect",
            "keyed",
            "--drain",
            "--workers",
            &WORKERS.to_string(),
            "--lease",
            "5s",
            "--timeout",
            "2s",
        ],
        &relay_log,
    );

    let claimed = watch_claims(&db, &job);

    let waiting = Instant::now();
    while server.all_effects().len() < BEFORE_RESTART {
        assert!(
            waiting.elapsed() < Duration::from_secs(60),
            "only {} items after 60 s; relay log:\n{}",
            server.all_effects().len(),
            std::fs::read_to_string(&relay_log).unwrap_or_default()
        );
        if let Some(status) = relay.0.try_wait().unwrap() {
            panic!(
                "the relay exited ({status}) before the restart:\n{}",
                std::fs::read_to_string(&relay_log).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let at_restart = server.all_effects().len();
    let posts_at_restart = server.posts();
    assert!(
        at_restart < OPS,
        "everything was sent before the restart; the test proves nothing"
    );

    // A fast shutdown cuts the statements in flight (57P01), then the server
    // stays down a while (connections refused: the claim loops back off and
    // the pool keeps trying to connect), then comes up again (every pooled
    // connection is now dead and must be replaced).
    let restart = Instant::now();
    let p = pg.clone();
    let stop = tokio::task::spawn_blocking(move || p.stop_server());
    stop.await.unwrap();
    let down_at = server.all_effects().len();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        relay.0.try_wait().unwrap().is_none(),
        "the relay exited while PostgreSQL was down:\n{}",
        std::fs::read_to_string(&relay_log).unwrap_or_default()
    );
    let p = pg.clone();
    let restarted = tokio::task::spawn_blocking(move || p.start_server());
    restarted.await.unwrap();
    let outage = restart.elapsed();

    let status = wait_bounded(&mut relay.0, Duration::from_secs(120), &relay_log).await;
    let relay_stderr = std::fs::read_to_string(&relay_log).unwrap_or_default();
    claimed.stop.store(true, Ordering::Relaxed);
    let most_claimed = claimed.max.load(Ordering::Relaxed);
    assert!(
        status.success(),
        "the relay exited {status} after the restart:\n{relay_stderr}"
    );

    // Every row kept, every operation completed with the destination's id,
    // and one item per key at the destination.
    let records = inspect(&db, &job);
    assert_eq!(records.len(), OPS, "rows lost: {}", OPS - records.len());
    let mut states = std::collections::BTreeMap::<String, usize>::new();
    for r in records.values() {
        *states
            .entry(r["state"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    for key in &keys {
        let record = &records[key];
        assert_eq!(
            record["state"], "completed",
            "{key}: {record}\nall states: {states:?}\nrelay log:\n{relay_stderr}"
        );
        let ik = idempotency_key(&job, key);
        assert_eq!(server.effects(&ik), 1, "{key}: items at the destination");
        let id = destination_id(&base, &ik)
            .await
            .unwrap_or_else(|| panic!("{key}: the destination has no item for {ik}"));
        assert_eq!(
            record["external_ref"].as_str(),
            Some(id.as_str()),
            "{key}: external_ref vs the destination's id"
        );
    }
    let all = server.all_effects();
    assert_eq!(all.len(), OPS, "keys at the destination");
    assert!(
        all.keys().all(|k| k.starts_with(&format!("{job}:"))),
        "only this job's keys"
    );
    let posts = server.posts();
    assert!(posts >= OPS as u64, "{posts} POSTs for {OPS} operations");

    // At most one live claim per worker (batch 1), plus the claims orphaned
    // by statements the shutdown cut off (each counted as an error), which
    // wait for their lease.
    let summary = relay_stderr
        .lines()
        .rfind(|l| l.contains("onceonly run: completed"))
        .unwrap_or("(no summary line)");
    let errors: usize = summary
        .rsplit_once("errors ")
        .and_then(|(_, n)| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no error count in the relay's summary: {summary:?}"));
    assert!(
        most_claimed <= WORKERS + errors,
        "{most_claimed} rows claimed at once by {WORKERS} workers claiming 1 row each \
         ({errors} errors): a batch claim took more than its limit"
    );

    let attempts: i64 = records
        .values()
        .map(|r| r["attempts"].as_i64().unwrap_or(0))
        .sum();
    let by_kind = log_kinds(&relay_stderr);
    eprintln!(
        "pg_restart: {OPS} ops; {at_restart} items created (posts {posts_at_restart}) when the stop began, \
         {down_at} when it finished; outage {outage:?}; total {:?}\n\
         pg_restart: {posts} POSTs, {} repeats (the keyed destination answered them with the first id); \
         claims (attempts) summed: {attempts}; most rows claimed at once (sampled): {most_claimed}\n\
         pg_restart: relay: {summary}\n\
         pg_restart: the relay's WARN/ERROR lines, by kind:\n{}",
        started.elapsed(),
        posts - OPS as u64,
        by_kind
            .iter()
            .map(|(kind, n)| format!("  {n:4} x {kind}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The most rows of `job` seen claimed at once, sampled every 10 ms.
struct ClaimWatch {
    max: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

/// Samples how many rows of `job` are claimed (errors while the server is
/// down are skipped) until `stop` is set.
fn watch_claims(db: &str, job: &str) -> ClaimWatch {
    let watch = ClaimWatch {
        max: Arc::default(),
        stop: Arc::default(),
    };
    let (max, stop) = (watch.max.clone(), watch.stop.clone());
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_millis(500))
        .connect_lazy(db)
        .unwrap();
    let job = job.to_owned();
    tokio::spawn(async move {
        while !stop.load(Ordering::Relaxed) {
            let n: Result<i64, _> = sqlx::query_scalar(
                "SELECT count(*) FROM onceonly.ops WHERE job_type = $1 AND state = 'claimed'",
            )
            .bind(&job)
            .fetch_one(&pool)
            .await;
            if let Ok(n) = n {
                max.fetch_max(n as usize, Ordering::Relaxed);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    watch
}

/// The relay's WARN and ERROR log lines counted by level, target and message
/// (the words before the first `field=value`).
fn log_kinds(log: &str) -> std::collections::BTreeMap<String, usize> {
    let mut kinds = std::collections::BTreeMap::new();
    for line in log.lines() {
        let mut words = line.split_whitespace().skip(1); // the timestamp
        let Some(level @ ("WARN" | "ERROR")) = words.next() else {
            continue;
        };
        let message: Vec<&str> = words.take_while(|w| !w.contains('=')).collect();
        *kinds
            .entry(format!("{level} {}", message.join(" ")))
            .or_default() += 1;
    }
    kinds
}
