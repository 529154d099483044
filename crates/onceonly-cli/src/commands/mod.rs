//! One module per command of docs/DESIGN.md section 6.

pub mod bench;
pub mod cancel;
pub mod check;
pub mod config;
pub mod console;
pub mod consume;
pub mod destination;
pub mod enqueue;
pub mod held;
pub mod history;
pub mod inspect;
pub mod migrate;
pub mod purge;
pub mod purge_horizon;
pub mod repeats;
pub mod replay;
pub mod replay_queue;
pub mod resolve;
pub mod run;
