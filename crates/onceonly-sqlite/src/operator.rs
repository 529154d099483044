//! [`OperatorStore`] for SQLite: the operator's lists and counts, each
//! through the partial index over the rows it reads (`queries/operator_*.sql`).

use std::time::Duration;

use onceonly::operator::{millis, EventCount, LiveCount, OpPage, OperatorStore, StateCount, Which};
use onceonly::{DbTime, Record, Result};
use rusqlite::types::{Type, Value};
use rusqlite::Row;

use crate::queries::Query;
use crate::{direct, SqliteStore};

const LIVE: &str = include_str!("../queries/operator_live.sql");
const FINISHED: &str = include_str!("../queries/operator_finished.sql");
const EVENTS: &str = include_str!("../queries/operator_events.sql");
const HELD: &str = include_str!("../queries/operator_held.sql");
const STUCK: &str = include_str!("../queries/operator_stuck.sql");

/// A column's text parsed as `T` (a state or an event name).
fn parsed<T>(row: &Row<'_>, col: &'static str) -> rusqlite::Result<T>
where
    T: std::str::FromStr,
    T::Err: Into<onceonly::Error>,
{
    let text: String = row.get(col)?;
    text.parse().map_err(|e: T::Err| {
        let e: onceonly::Error = e.into();
        let index = row.as_ref().column_index(col).unwrap_or(0);
        rusqlite::Error::FromSqlConversionFailure(index, Type::Text, Box::new(e))
    })
}

fn live(row: &Row<'_>) -> rusqlite::Result<LiveCount> {
    Ok(LiveCount {
        job_type: row.get("job_type")?,
        state: parsed(row, "state")?,
        count: row.get("n")?,
        stuck: row.get("stuck")?,
        oldest: row.get::<_, Option<i64>>("oldest")?.map(DbTime),
    })
}

fn state_count(row: &Row<'_>) -> rusqlite::Result<StateCount> {
    Ok(StateCount {
        job_type: row.get("job_type")?,
        state: parsed(row, "state")?,
        count: row.get("n")?,
    })
}

fn event_count(row: &Row<'_>) -> rusqlite::Result<EventCount> {
    Ok(EventCount {
        event: parsed(row, "event")?,
        count: row.get("n")?,
    })
}

impl SqliteStore {
    async fn all<T: Send + 'static>(
        &self,
        q: Query,
        decode: fn(&Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>> {
        self.writer.read(move |c| direct::all(c, &q, decode)).await
    }
}

impl OperatorStore for SqliteStore {
    async fn op_counts_live(&self) -> Result<Vec<LiveCount>> {
        let q = Query {
            sql: LIVE,
            args: vec![Value::Integer(self.offset())],
        };
        self.all(q, live).await
    }

    async fn op_counts_finished(&self, window: Duration) -> Result<Vec<StateCount>> {
        let q = Query {
            sql: FINISHED,
            args: vec![
                Value::Integer(self.offset()),
                Value::Integer(millis(window)),
            ],
        };
        self.all(q, state_count).await
    }

    async fn op_counts_events(&self, window: Duration) -> Result<Vec<EventCount>> {
        let q = Query {
            sql: EVENTS,
            args: vec![
                Value::Integer(self.offset()),
                Value::Integer(millis(window)),
            ],
        };
        self.all(q, event_count).await
    }

    async fn op_page(&self, p: &OpPage<'_>) -> Result<Vec<Record>> {
        let q = Query {
            sql: match p.which {
                Which::Held => HELD,
                Which::Stuck => STUCK,
            },
            args: vec![
                Value::Integer(self.offset()),
                p.job_type
                    .map_or(Value::Null, |j| Value::Text(j.to_owned())),
                Value::Integer(p.limit.map_or(-1, i64::from)),
                Value::Integer(i64::try_from(p.offset).unwrap_or(i64::MAX)),
            ],
        };
        self.all(q, direct::record).await
    }
}
