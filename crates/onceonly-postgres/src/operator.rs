//! [`OperatorStore`] for PostgreSQL: the operator's lists and counts, each
//! an index range over the rows it reads (`queries/operator_*.sql`).

use std::time::Duration;

use onceonly::operator::{millis, EventCount, LiveCount, OpPage, OperatorStore, StateCount, Which};
use onceonly::{DbTime, Record, Result};
use onceonly_sqlx::record_from_row;
use sqlx::postgres::PgRow;
use sqlx::Row;

use crate::queries::in_schema;
use crate::PgStore;

const LIVE: &str = include_str!("../queries/operator_live.sql");
const FINISHED: &str = include_str!("../queries/operator_finished.sql");
const EVENTS: &str = include_str!("../queries/operator_events.sql");
const HELD: &str = include_str!("../queries/operator_held.sql");
const STUCK: &str = include_str!("../queries/operator_stuck.sql");

/// A column's text parsed as `T` (a state or an event name).
fn parsed<T>(row: &PgRow, col: &'static str) -> sqlx::Result<T>
where
    T: std::str::FromStr,
    T::Err: Into<onceonly::Error>,
{
    let text: String = row.try_get(col)?;
    text.parse().map_err(|e: T::Err| sqlx::Error::ColumnDecode {
        index: col.to_owned(),
        source: Box::new(e.into()),
    })
}

fn live(row: &PgRow) -> sqlx::Result<LiveCount> {
    Ok(LiveCount {
        job_type: row.try_get("job_type")?,
        state: parsed(row, "state")?,
        count: row.try_get("n")?,
        stuck: row.try_get("stuck")?,
        oldest: row.try_get::<Option<i64>, _>("oldest")?.map(DbTime),
    })
}

fn state_count(row: &PgRow) -> sqlx::Result<StateCount> {
    Ok(StateCount {
        job_type: row.try_get("job_type")?,
        state: parsed(row, "state")?,
        count: row.try_get("n")?,
    })
}

fn event_count(row: &PgRow) -> sqlx::Result<EventCount> {
    Ok(EventCount {
        event: parsed(row, "event")?,
        count: row.try_get("n")?,
    })
}

impl PgStore {
    /// Runs one of the operator's count queries (bound to the clock offset
    /// and, for the finished rows and events, the window) and decodes its rows.
    async fn operator_counts<T>(
        &self,
        query: &str,
        window: Option<Duration>,
        decode: fn(&PgRow) -> sqlx::Result<T>,
    ) -> Result<Vec<T>> {
        let sql = in_schema(query, self.schema());
        let mut q = sqlx::query(&sql).bind(self.offset());
        if let Some(window) = window {
            q = q.bind(millis(window));
        }
        let rows = q.fetch_all(self.pool()).await.map_err(self.err())?;
        rows.iter()
            .map(decode)
            .collect::<sqlx::Result<_>>()
            .map_err(self.err())
    }
}

impl OperatorStore for PgStore {
    async fn op_counts_live(&self) -> Result<Vec<LiveCount>> {
        self.operator_counts(LIVE, None, live).await
    }

    async fn op_counts_finished(&self, window: Duration) -> Result<Vec<StateCount>> {
        self.operator_counts(FINISHED, Some(window), state_count)
            .await
    }

    async fn op_counts_events(&self, window: Duration) -> Result<Vec<EventCount>> {
        self.operator_counts(EVENTS, Some(window), event_count)
            .await
    }

    async fn op_page(&self, p: &OpPage<'_>) -> Result<Vec<Record>> {
        let sql = in_schema(
            match p.which {
                Which::Held => HELD,
                Which::Stuck => STUCK,
            },
            self.schema(),
        );
        let rows = sqlx::query(&sql)
            .bind(self.offset())
            .bind(p.job_type)
            .bind(p.limit.map(i64::from))
            .bind(i64::try_from(p.offset).unwrap_or(i64::MAX))
            .fetch_all(self.pool())
            .await
            .map_err(self.err())?;
        rows.iter()
            .map(record_from_row)
            .collect::<sqlx::Result<_>>()
            .map_err(self.err())
    }
}
