//! `onceonly migrate`: create or upgrade the tables.

use std::process::ExitCode;

use crate::store::open_migrated;

/// Migrates the database; running it again changes nothing.
pub async fn run(db: &str) -> anyhow::Result<ExitCode> {
    open_migrated(db).await?;
    println!("migrated {}", onceonly::db_url::redact(db));
    Ok(ExitCode::SUCCESS)
}
