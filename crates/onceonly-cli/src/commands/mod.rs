//! One module per command of docs/DESIGN.md section 6.

#[cfg(feature = "bench")]
pub mod bench;
pub mod cancel;
pub mod check;
pub mod config;
#[cfg(feature = "console")]
pub mod console;
pub mod consume;
pub mod destination;
pub mod enqueue;
pub mod held;
pub mod history;
pub mod inspect;
pub mod migrate;
#[cfg(not(all(feature = "bench", feature = "console")))]
pub mod not_built;
pub mod purge;
pub mod purge_horizon;
pub mod repeats;
pub mod replay;
pub mod replay_queue;
pub mod resolve;
pub mod run;
