//! The job settings file, `onceonly.toml`: parsed by
//! [`onceonly_tools::config`], which the console reads too.

pub use onceonly_tools::config::*;
