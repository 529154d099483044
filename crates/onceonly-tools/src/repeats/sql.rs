//! The query `repeats` runs on the user's own table: identifiers checked and
//! quoted (nothing the user passes is spliced into SQL unchecked), a
//! read-only connection or transaction, and the exact statements kept so
//! they can be printed for the user to run.
//!
//! On MySQL and MariaDB keys are grouped by their bytes (`CAST(.. AS
//! BINARY)`), as onceonly keys are: under the default collations `k`, `K`
//! and `k ` would be one key, here they are three.

use std::str::FromStr;

use anyhow::Context;
use onceonly::db_url::DbKind;
use sqlx::mysql::MySqlConnection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{Connection, Executor, PgConnection, Row, TypeInfo, ValueRef};

/// Longest identifier accepted (PostgreSQL keeps 63 bytes, MySQL 64).
const MAX_IDENT: usize = 63;

/// Checks one identifier: ASCII letters, digits and `_`, not starting with a
/// digit, at most 63 bytes.
fn check_ident(what: &str, name: &str) -> anyhow::Result<()> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') || name.len() > MAX_IDENT
    {
        anyhow::bail!(
            "{what} {name:?} is not a plain identifier: use letters, digits and _ \
             (not starting with a digit, at most {MAX_IDENT} bytes); for any other \
             name, create a view with a plain name and pass that"
        );
    }
    Ok(())
}

/// `"name"` (`` `name` `` on MySQL, whatever its `ANSI_QUOTES`), with any
/// quote character doubled (none survive [`check_ident`]; this is the second
/// line of defence).
fn quote(name: &str, backend: DbKind) -> String {
    let q = match backend {
        DbKind::Sqlite | DbKind::Postgres => '"',
        DbKind::MySql => '`',
    };
    format!("{q}{}{q}", name.replace(q, &format!("{q}{q}")))
}

/// A checked, quoted table name: `table`, or `schema.table` on PostgreSQL
/// (`database.table` on MySQL).
pub fn table(name: &str, backend: DbKind) -> anyhow::Result<String> {
    let parts: Vec<&str> = name.split('.').collect();
    match (parts.as_slice(), backend) {
        ([t], _) => {
            check_ident("--table", t)?;
            Ok(quote(t, backend))
        }
        ([s, t], DbKind::Postgres | DbKind::MySql) => {
            check_ident(
                match backend {
                    DbKind::MySql => "--table's database",
                    _ => "--table's schema",
                },
                s,
            )?;
            check_ident("--table", t)?;
            Ok(format!("{}.{}", quote(s, backend), quote(t, backend)))
        }
        _ => anyhow::bail!(
            "--table {name:?} is not a plain identifier{}",
            match backend {
                DbKind::Postgres => " or schema.table",
                DbKind::MySql => " or database.table",
                DbKind::Sqlite => "",
            }
        ),
    }
}

/// A checked, quoted column name.
pub fn column(what: &str, name: &str, backend: DbKind) -> anyhow::Result<String> {
    check_ident(what, name)?;
    Ok(quote(name, backend))
}

/// The statements to run, in order; the last one returns the rows.
#[derive(Debug, Clone)]
pub struct Plan {
    backend: DbKind,
    /// The table, checked and quoted.
    table: String,
    /// The table as the user named it: `[database or schema, table]`.
    table_parts: (Option<String>, String),
    /// The key and time columns, as the user named them.
    columns: [String; 2],
    /// Every statement, as run.
    pub statements: Vec<String>,
}

impl Plan {
    /// The query listing every row of every key with more than one row,
    /// ordered by key and time: `repeat_key` as text, `repeat_at` as stored
    /// (SQLite) or as ISO text (PostgreSQL and MySQL, whose sessions print
    /// it in UTC).
    pub fn new(backend: DbKind, table: &str, key: &str, at: &str) -> anyhow::Result<Self> {
        let t = self::table(table, backend)?;
        let k = column("--key", key, backend)?;
        let a = column("--at", at, backend)?;
        // What identifies a key: the column itself, or on MySQL its bytes.
        let (key_text, at_value, same_key) = match backend {
            DbKind::Sqlite => (format!("CAST({k} AS TEXT)"), a.clone(), k.clone()),
            DbKind::Postgres => (format!("{k}::text"), format!("{a}::text"), k.clone()),
            DbKind::MySql => (
                format!("CAST({k} AS CHAR)"),
                format!("CAST({a} AS CHAR)"),
                format!("CAST({k} AS BINARY)"),
            ),
        };
        let select = [
            format!("SELECT {key_text} AS repeat_key, {at_value} AS repeat_at"),
            format!("FROM {t}"),
            format!("WHERE {a} IS NOT NULL"),
            format!("  AND {same_key} IN ("),
            format!("    SELECT {same_key} FROM {t}"),
            format!("    WHERE {k} IS NOT NULL AND {a} IS NOT NULL"),
            format!("    GROUP BY {same_key} HAVING COUNT(*) > 1)"),
            format!("ORDER BY {same_key}, {a}"),
        ]
        .join("\n");
        let statements = match backend {
            DbKind::Sqlite => vec![select],
            DbKind::Postgres => vec![
                "BEGIN READ ONLY".to_owned(),
                "SET LOCAL datestyle = 'ISO, YMD'".to_owned(),
                "SET LOCAL timezone = 'UTC'".to_owned(),
                select,
                "ROLLBACK".to_owned(),
            ],
            // MySQL has no transaction-local settings: the zone is the
            // session's (a TIMESTAMP prints in it; a DATETIME is read as UTC).
            DbKind::MySql => vec![
                "SET SESSION time_zone = '+00:00'".to_owned(),
                "START TRANSACTION READ ONLY".to_owned(),
                select,
                "ROLLBACK".to_owned(),
            ],
        };
        let table_parts = match table.split_once('.') {
            Some((s, t)) => (Some(s.to_owned()), t.to_owned()),
            None => (None, table.to_owned()),
        };
        Ok(Self {
            backend,
            table: t,
            table_parts,
            columns: [key.to_owned(), at.to_owned()],
            statements,
        })
    }

    /// Refuses to go on unless the table exists with both columns. SQLite
    /// would read a misspelt `"column"` as a string literal and call every
    /// row a repeat; the check names what is missing on either database.
    fn check_columns(&self, present: &[String]) -> anyhow::Result<()> {
        if present.is_empty() {
            anyhow::bail!("there is no table or view {} in this database", self.table);
        }
        // MySQL's column names ignore case; the others' quoted names do not.
        let same = |c: &String, name: &String| match self.backend {
            DbKind::MySql => c.eq_ignore_ascii_case(name),
            DbKind::Sqlite | DbKind::Postgres => c == name,
        };
        for (flag, name) in ["--key", "--at"].iter().zip(&self.columns) {
            if !present.iter().any(|c| same(c, name)) {
                anyhow::bail!(
                    "{flag}: table {} has no column {name:?} (its columns: {})",
                    self.table,
                    present.join(", ")
                );
            }
        }
        Ok(())
    }

    /// The statements as a script a person can paste into `sqlite3`, `psql`
    /// or `mysql`.
    pub fn script(&self) -> String {
        self.statements.iter().map(|s| format!("{s};\n")).collect()
    }

    /// Runs the plan read-only on `url`.
    pub async fn run(&self, url: &str) -> anyhow::Result<Vec<RawRow>> {
        match self.backend {
            DbKind::Sqlite => self.run_sqlite(url).await,
            DbKind::Postgres => self.run_postgres(url).await,
            DbKind::MySql => self.run_mysql(url).await,
        }
        .with_context(|| format!("reading repeats from {}", onceonly::db_url::redact(url)))
    }

    async fn run_sqlite(&self, url: &str) -> anyhow::Result<Vec<RawRow>> {
        // Read-only at the driver: SQLite itself refuses any write, and a
        // missing file is an error rather than a new empty database.
        let options = SqliteConnectOptions::from_str(url)?
            .read_only(true)
            .create_if_missing(false);
        let mut conn = SqliteConnection::connect_with(&options).await?;
        let unquoted = self.table.trim_matches('"').replace("\"\"", "\"");
        let present: Vec<String> = sqlx::query_scalar("SELECT name FROM pragma_table_info(?1)")
            .bind(unquoted)
            .fetch_all(&mut conn)
            .await?;
        self.check_columns(&present)?;
        let rows = sqlx::query(&self.statements[0])
            .fetch_all(&mut conn)
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let key: String = row.try_get(0)?;
            let raw = row.try_get_raw(1)?;
            let kind = raw.type_info().name().to_owned();
            let at = match kind.as_str() {
                "INTEGER" => RawTime::Int(row.try_get(1)?),
                "REAL" => RawTime::Real(row.try_get(1)?),
                "TEXT" => RawTime::Text(row.try_get(1)?),
                other => RawTime::Other(other.to_owned()),
            };
            out.push(RawRow { key, at });
        }
        conn.close().await?;
        Ok(out)
    }

    async fn run_postgres(&self, url: &str) -> anyhow::Result<Vec<RawRow>> {
        let mut conn = PgConnection::connect(url).await?;
        let present: Vec<String> = sqlx::query_scalar(
            "SELECT attname::text FROM pg_attribute \
             WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped \
             ORDER BY attnum",
        )
        .bind(&self.table)
        .fetch_all(&mut conn)
        .await?;
        self.check_columns(&present)?;
        let (last, setup) = self.statements.split_last().expect("statements");
        let (select, setup) = setup.split_last().expect("statements");
        // Each a plain (unprepared) statement, passed as `&str`: sqlx's
        // `raw_sql` future is not `Send` for every lifetime, which a caller
        // on a web server's task needs.
        for s in setup {
            conn.execute(s.as_str()).await?;
        }
        let rows = sqlx::query(select).fetch_all(&mut conn).await;
        // Always end the read-only transaction, whatever the query did.
        conn.execute(last.as_str()).await?;
        let rows = rows?;
        conn.close().await?;
        rows.iter()
            .map(|row| {
                Ok(RawRow {
                    key: row.try_get(0)?,
                    at: RawTime::Text(row.try_get(1)?),
                })
            })
            .collect()
    }

    async fn run_mysql(&self, url: &str) -> anyhow::Result<Vec<RawRow>> {
        let mut conn = MySqlConnection::connect(url).await?;
        let (database, table) = &self.table_parts;
        let present: Vec<String> = sqlx::query_scalar(
            "SELECT CAST(column_name AS CHAR) FROM information_schema.columns \
             WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ? \
             ORDER BY ordinal_position",
        )
        .bind(database)
        .bind(table)
        .fetch_all(&mut conn)
        .await?;
        self.check_columns(&present)?;
        let (last, setup) = self.statements.split_last().expect("statements");
        let (select, setup) = setup.split_last().expect("statements");
        for s in setup {
            conn.execute(s.as_str()).await?;
        }
        let rows = sqlx::query(select).fetch_all(&mut conn).await;
        // Always end the read-only transaction, whatever the query did.
        conn.execute(last.as_str()).await?;
        let rows = rows?;
        conn.close().await?;
        rows.iter()
            .map(|row| {
                Ok(RawRow {
                    key: row.try_get(0)?,
                    at: RawTime::Text(row.try_get(1)?),
                })
            })
            .collect()
    }
}

/// One row as the database returned it.
#[derive(Debug, Clone, PartialEq)]
pub struct RawRow {
    /// The key, as text.
    pub key: String,
    /// The time, as stored.
    pub at: RawTime,
}

/// A time value as stored.
#[derive(Debug, Clone, PartialEq)]
pub enum RawTime {
    /// Text: ISO 8601 (or Unix seconds written as text).
    Text(String),
    /// Integer Unix seconds.
    Int(i64),
    /// Decimal Unix seconds.
    Real(f64),
    /// Something that is not a time (a BLOB): its type.
    Other(String),
}

impl RawTime {
    /// Milliseconds since the epoch, or why not.
    pub fn millis(&self) -> Result<i64, String> {
        match self {
            RawTime::Text(t) => super::time::parse(t),
            RawTime::Int(s) => s
                .checked_mul(1000)
                .ok_or_else(|| format!("{s} is not Unix seconds in range")),
            RawTime::Real(s) if s.is_finite() && s.abs() < 1e15 => Ok((s * 1000.0).round() as i64),
            RawTime::Real(s) => Err(format!("{s} is not Unix seconds in range")),
            RawTime::Other(kind) => Err(format!("a {kind} value is not a time")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: [&str; 12] = [
        "x; DROP TABLE t",
        "t\"; DROP TABLE t; --",
        "\"quoted\"",
        "with space",
        "t--",
        "",
        "1abc",
        "a.b",
        "tab\tle",
        "naïve",
        "t'",
        "t)",
    ];

    #[test]
    fn plain_identifiers_are_quoted() {
        let pg = DbKind::Postgres;
        assert_eq!(column("--key", "order_id", pg).unwrap(), "\"order_id\"");
        assert_eq!(column("--key", "Order", pg).unwrap(), "\"Order\"");
        assert_eq!(column("--key", "_x9", pg).unwrap(), "\"_x9\"");
        assert_eq!(
            column("--key", "order_id", DbKind::MySql).unwrap(),
            "`order_id`"
        );
        assert_eq!(
            table("app.emails", DbKind::MySql).unwrap(),
            "`app`.`emails`"
        );
        assert_eq!(table("emails", DbKind::Sqlite).unwrap(), "\"emails\"");
        assert_eq!(
            table("app.emails", DbKind::Postgres).unwrap(),
            "\"app\".\"emails\""
        );
    }

    #[test]
    fn hostile_names_are_refused() {
        for name in HOSTILE {
            for backend in [DbKind::Sqlite, DbKind::Postgres, DbKind::MySql] {
                let err = column("--key", name, backend).unwrap_err().to_string();
                assert!(err.contains("not a plain identifier"), "{name:?}: {err}");
            }
            assert!(table(name, DbKind::Sqlite).is_err(), "{name:?}");
            assert!(
                table(&format!("{name}`"), DbKind::MySql).is_err(),
                "{name:?}"
            );
        }
        for name in [
            "a.b.c",
            "public.x; DROP TABLE t",
            ".t",
            "s.",
            "public.\"t\"",
        ] {
            assert!(table(name, DbKind::Postgres).is_err(), "{name:?}");
            assert!(table(name, DbKind::MySql).is_err(), "{name:?}");
        }
        assert!(table("t`; DROP TABLE t; --", DbKind::MySql).is_err());
        assert!(table(&"a".repeat(64), DbKind::Postgres).is_err());
        assert!(table(&"a".repeat(63), DbKind::Postgres).is_ok());
    }

    #[test]
    fn quoting_doubles_quotes_anyway() {
        assert_eq!(quote("a\"b", DbKind::Postgres), "\"a\"\"b\"");
        assert_eq!(quote("a`b", DbKind::MySql), "`a``b`");
    }

    #[test]
    fn the_plan_names_only_quoted_identifiers() {
        let p = Plan::new(DbKind::Postgres, "public.sent", "order_id", "sent_at").unwrap();
        assert_eq!(p.statements[0], "BEGIN READ ONLY");
        assert_eq!(p.statements.last().unwrap(), "ROLLBACK");
        let select = &p.statements[3];
        assert!(select.contains("FROM \"public\".\"sent\""), "{select}");
        assert!(select.contains("HAVING COUNT(*) > 1"), "{select}");
        let s = Plan::new(DbKind::Sqlite, "sent", "order_id", "sent_at").unwrap();
        assert_eq!(s.statements.len(), 1);
        assert!(s.script().contains("CAST(\"order_id\" AS TEXT)"));
        assert!(Plan::new(DbKind::Sqlite, "sent", "x; DROP TABLE sent", "at").is_err());
        let m = Plan::new(DbKind::MySql, "sent", "order_id", "sent_at").unwrap();
        assert_eq!(m.statements[1], "START TRANSACTION READ ONLY");
        assert_eq!(m.statements.last().unwrap(), "ROLLBACK");
        assert!(m.statements[2].contains("GROUP BY CAST(`order_id` AS BINARY)"));
    }

    #[test]
    fn raw_times() {
        assert_eq!(RawTime::Int(2).millis(), Ok(2000));
        assert_eq!(RawTime::Real(2.5).millis(), Ok(2500));
        assert_eq!(RawTime::Text("3".into()).millis(), Ok(3000));
        assert!(RawTime::Real(f64::NAN).millis().is_err());
        assert!(RawTime::Other("BLOB".into()).millis().is_err());
        assert!(RawTime::Int(i64::MAX).millis().is_err());
    }
}
