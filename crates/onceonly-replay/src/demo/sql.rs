//! The demo local effect's table, on SQLite and PostgreSQL: one thin
//! function per query file, each returning what the database did.

use std::future::Future;

use sqlx::{MySqlConnection, PgConnection, Row, SqliteConnection};

/// A connection the demo local effect can write its row on.
pub trait DemoConn: Send {
    /// Creates the demo table if it is missing.
    fn demo_create(&mut self) -> impl Future<Output = Result<(), sqlx::Error>> + Send;

    /// Inserts one effect row; returns the affected-row count (1).
    fn demo_insert(
        &mut self,
        job_type: &str,
        op_key: &str,
        payload: &str,
        token: i64,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;

    /// Rows for one operation.
    fn demo_count(
        &mut self,
        job_type: &str,
        op_key: &str,
    ) -> impl Future<Output = Result<i64, sqlx::Error>> + Send;

    /// Deletes a job type's rows; returns how many.
    fn demo_clear(
        &mut self,
        job_type: &str,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;
}

macro_rules! demo_conn {
    ($conn:ty, $dir:literal) => {
        impl DemoConn for $conn {
            async fn demo_create(&mut self) -> Result<(), sqlx::Error> {
                // One statement per query: the file's statements end with `;`.
                let file = include_str!(concat!("../../queries/", $dir, "/demo_create.sql"));
                for statement in file.split(';').filter(|s| !s.trim().is_empty()) {
                    sqlx::query(statement).execute(&mut *self).await?;
                }
                Ok(())
            }

            async fn demo_insert(
                &mut self,
                job_type: &str,
                op_key: &str,
                payload: &str,
                token: i64,
            ) -> Result<u64, sqlx::Error> {
                let done = sqlx::query(include_str!(concat!(
                    "../../queries/",
                    $dir,
                    "/demo_insert.sql"
                )))
                .bind(job_type)
                .bind(op_key)
                .bind(payload)
                .bind(token)
                .execute(self)
                .await?;
                Ok(done.rows_affected())
            }

            async fn demo_count(
                &mut self,
                job_type: &str,
                op_key: &str,
            ) -> Result<i64, sqlx::Error> {
                let row = sqlx::query(include_str!(concat!(
                    "../../queries/",
                    $dir,
                    "/demo_count.sql"
                )))
                .bind(job_type)
                .bind(op_key)
                .fetch_one(self)
                .await?;
                row.try_get("n")
            }

            async fn demo_clear(&mut self, job_type: &str) -> Result<u64, sqlx::Error> {
                let done = sqlx::query(include_str!(concat!(
                    "../../queries/",
                    $dir,
                    "/demo_clear.sql"
                )))
                .bind(job_type)
                .execute(self)
                .await?;
                Ok(done.rows_affected())
            }
        }
    };
}

demo_conn!(SqliteConnection, "sqlite");
demo_conn!(PgConnection, "postgres");
demo_conn!(MySqlConnection, "mysql");
