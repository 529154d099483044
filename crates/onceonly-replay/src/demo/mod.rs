//! Built-in demo jobs, one per effect kind, for `onceonly replay`: a local
//! row in the same database, a keyed and a lookup call to a real HTTP
//! destination on 127.0.0.1, and an opaque call under each policy.

mod sql;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use onceonly::{
    idempotency_key, BoxError, Effect, EffectCtx, EffectKind, Guard, JobSpec, Outcome, Payload,
    StalePolicy, Store,
};
use onceonly_http::test_server::{Mode, TestServer};
use onceonly_http::HttpDestination;

pub use sql::DemoConn;

use crate::error::{Error, Result};
use crate::job::ReplayJob;
use crate::naive::Naive;

/// Where the demo jobs' operation keys come from, in words (for the note).
pub const DEMO_KEY: &str = "the order number: one operation per order, whatever message carried it";

/// How long one HTTP request of a demo job may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Which demo job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DemoKind {
    /// A row in `onceonly_replay_demo`, in the guard's transaction.
    Local,
    /// A POST to a destination that dedups on the idempotency key.
    Keyed,
    /// A POST to a destination searchable by idempotency key.
    Lookup,
    /// A POST to a destination with neither, under a stale-claim policy.
    Opaque(StalePolicy),
}

impl DemoKind {
    /// Every demo job, in the order `onceonly replay` runs them.
    pub const ALL: [DemoKind; 6] = [
        DemoKind::Local,
        DemoKind::Keyed,
        DemoKind::Lookup,
        DemoKind::Opaque(StalePolicy::Hold),
        DemoKind::Opaque(StalePolicy::AtLeastOnce),
        DemoKind::Opaque(StalePolicy::AtMostOnce),
    ];

    /// `local`, `keyed`, `lookup`, `opaque-hold`, `opaque-at-least-once`, `opaque-at-most-once`.
    pub fn name(self) -> &'static str {
        match self {
            DemoKind::Local => "local",
            DemoKind::Keyed => "keyed",
            DemoKind::Lookup => "lookup",
            DemoKind::Opaque(StalePolicy::Hold) => "opaque-hold",
            DemoKind::Opaque(StalePolicy::AtLeastOnce) => "opaque-at-least-once",
            DemoKind::Opaque(StalePolicy::AtMostOnce) => "opaque-at-most-once",
        }
    }

    /// Parses a [`DemoKind::name`].
    pub fn parse(name: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| Error::Job(format!("no demo job {name:?}")))
    }

    /// The effect kind the demo job declares.
    pub fn effect(self) -> EffectKind {
        match self {
            DemoKind::Local => EffectKind::Local,
            DemoKind::Keyed => EffectKind::Keyed,
            DemoKind::Lookup => EffectKind::Lookup,
            DemoKind::Opaque(policy) => EffectKind::Opaque(policy),
        }
    }

    /// The demo job's spec under `job_type`: the command line's defaults
    /// (lease 30s, timeout 10s) and this kind's effect.
    pub fn spec(self, job_type: &str) -> JobSpec {
        JobSpec::new(job_type, self.effect())
    }

    fn mode(self) -> Option<Mode> {
        match self {
            DemoKind::Local => None,
            DemoKind::Keyed => Some(Mode::Keyed),
            DemoKind::Lookup => Some(Mode::Searchable),
            DemoKind::Opaque(_) => Some(Mode::Neither),
        }
    }
}

/// A demo job: its spec, its effect, and (in the harness's process) the
/// destination that counts what reached it.
pub struct DemoJob {
    kind: DemoKind,
    spec: JobSpec,
    destination: Option<HttpDestination>,
    server: Option<TestServer>,
}

impl DemoJob {
    /// The demo job `kind` under `job_type`, starting its HTTP destination
    /// on 127.0.0.1 when it has one.
    pub async fn start(kind: DemoKind, job_type: &str) -> Result<Self> {
        let server = match kind.mode() {
            Some(mode) => Some(
                TestServer::start(mode)
                    .await
                    .map_err(|e| Error::Job(format!("cannot start the demo destination: {e}")))?,
            ),
            None => None,
        };
        let mut job = Self::attach(
            kind,
            job_type,
            server.as_ref().map(TestServer::base_url).as_deref(),
        )?;
        job.server = server;
        Ok(job)
    }

    /// The demo job `kind` under `job_type` sending to a destination that
    /// runs elsewhere (a worker process): it can deliver, not count.
    pub fn attach(kind: DemoKind, job_type: &str, base_url: Option<&str>) -> Result<Self> {
        let spec = kind.spec(job_type);
        spec.validate()?;
        let destination = match (kind.mode(), base_url) {
            (None, _) => None,
            (Some(_), Some(url)) => Some(HttpDestination::new(url, REQUEST_TIMEOUT)?),
            (Some(_), None) => {
                return Err(Error::Job(format!(
                    "demo job {} needs the destination's base URL",
                    kind.name()
                )))
            }
        };
        Ok(Self {
            kind,
            spec,
            destination,
            server: None,
        })
    }

    /// Which demo job this is.
    pub fn kind(&self) -> DemoKind {
        self.kind
    }

    /// The job's spec.
    pub fn spec(&self) -> &JobSpec {
        &self.spec
    }

    /// The destination's base URL, when the job sends over HTTP.
    pub fn base_url(&self) -> Option<String> {
        self.destination.as_ref().map(|d| d.base_url().to_owned())
    }

    /// Creates the demo table the local job writes to (a no-op for the others).
    pub async fn prepare<S: Store>(&self, store: &S) -> Result<()>
    where
        S::Conn: DemoConn,
    {
        if self.kind != DemoKind::Local {
            return Ok(());
        }
        let mut tx = store.begin().await?;
        DemoConn::demo_create(&mut *tx).await.map_err(sql_err)?;
        S::commit(tx).await?;
        Ok(())
    }

    /// Deletes the local job's demo rows (a no-op for the others); returns how many.
    pub async fn clear<S: Store>(&self, store: &S) -> Result<u64>
    where
        S::Conn: DemoConn,
    {
        if self.kind != DemoKind::Local {
            return Ok(0);
        }
        let mut tx = store.begin().await?;
        let n = DemoConn::demo_clear(&mut *tx, &self.spec.job_type)
            .await
            .map_err(sql_err)?;
        S::commit(tx).await?;
        Ok(n)
    }

    async fn rows<S: Store>(&self, store: &S, op_key: &str) -> Result<usize, BoxError>
    where
        S::Conn: DemoConn,
    {
        let mut tx = store.begin().await?;
        let n = DemoConn::demo_count(&mut *tx, &self.spec.job_type, op_key).await?;
        S::commit(tx).await?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    fn server(&self) -> Result<&TestServer, BoxError> {
        self.server
            .as_ref()
            .ok_or_else(|| "this process runs no demo destination to count at".into())
    }
}

fn sql_err(e: sqlx::Error) -> Error {
    let why = e.to_string();
    Error::Store(onceonly::DbError::new(onceonly::DbErrorKind::Other, why, e).into())
}

/// The local effect: one row, written on the guard's transaction.
fn insert_row<'c, C: DemoConn>(
    conn: &'c mut C,
    ctx: &'c EffectCtx,
) -> Pin<Box<dyn Future<Output = Result<serde_json::Value, BoxError>> + Send + 'c>> {
    Box::pin(async move {
        let payload = ctx.payload.to_string();
        conn.demo_insert(&ctx.job_type, &ctx.op_key, &payload, ctx.token)
            .await?;
        Ok(serde_json::json!({ "row": "inserted", "token": ctx.token }))
    })
}

impl<S: Store> ReplayJob<S> for DemoJob
where
    S::Conn: DemoConn,
{
    fn spec(&self) -> JobSpec {
        self.spec.clone()
    }

    fn describe_key(&self) -> String {
        DEMO_KEY.into()
    }

    async fn deliver(
        &self,
        guard: &Guard<S>,
        op_key: &str,
        payload: &Payload,
    ) -> onceonly::Result<Outcome> {
        match &self.destination {
            None => {
                guard
                    .run_local(op_key, payload, insert_row::<S::Conn>)
                    .await
            }
            Some(destination) => guard.run(op_key, payload, destination).await,
        }
    }

    async fn deliver_naive(
        &self,
        naive: &Naive<S>,
        op_key: &str,
        payload: &Payload,
    ) -> Result<(), BoxError> {
        if naive.done(op_key).await? {
            return Ok(());
        }
        match &self.destination {
            None => {
                let mut tx = naive.store().begin().await?;
                let text = payload.value().to_string();
                DemoConn::demo_insert(&mut *tx, &self.spec.job_type, op_key, &text, 0).await?;
                S::commit(tx).await?;
            }
            Some(destination) => {
                let ctx = EffectCtx::detached(&self.spec.job_type, op_key, payload.value());
                // Whatever the destination said, the naive worker marks it done.
                let _ = destination.perform(&ctx).await;
            }
        }
        naive.mark_done(op_key, payload).await?;
        Ok(())
    }

    async fn effects(&self, store: &S, op_key: &str) -> Result<usize, BoxError> {
        match self.kind {
            DemoKind::Local => self.rows(store, op_key).await,
            _ => Ok(self
                .server()?
                .effects(&idempotency_key(&self.spec.job_type, op_key))),
        }
    }

    async fn live(&self, store: &S, op_key: &str) -> Result<Option<usize>, BoxError> {
        match self.kind {
            DemoKind::Local => self.rows(store, op_key).await.map(Some),
            _ => Ok(Some(
                self.server()?
                    .live(&idempotency_key(&self.spec.job_type, op_key)),
            )),
        }
    }
}
