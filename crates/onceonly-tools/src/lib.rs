//! What onceonly's operator commands compute, as library calls: the CLI
//! (`onceonly check`, `onceonly repeats`, `run --config`) prints them, the
//! console (`onceonly console`) shows them as pages.
//!
//! - [`config`]: the job settings file, `onceonly.toml`;
//! - [`check`]: its timing rules, and the records' longest runs against them;
//! - [`repeats`]: past repeats in the user's own table;
//! - [`store`]: the store a database URL names, opened.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! let config = onceonly_tools::config::Config::load(std::path::Path::new("onceonly.toml"))?;
//! let (lines, broken) = onceonly_tools::check::rules(&config);
//! for line in lines {
//!     println!("{line}");
//! }
//! assert_eq!(broken, 0);
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

pub mod check;
pub mod config;
pub mod repeats;
pub mod store;
