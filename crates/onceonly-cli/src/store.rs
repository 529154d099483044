//! The store a `--db` URL names: opened by `onceonly_tools::store`, which
//! the console shares.

pub use onceonly_tools::store::{open, open_existing, open_migrated};
pub(crate) use onceonly_tools::with_store;
