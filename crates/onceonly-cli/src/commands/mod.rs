//! One module per command of DESIGN.md section 6.

pub mod bench;
pub mod cancel;
pub mod enqueue;
pub mod inspect;
pub mod migrate;
pub mod replay;
pub mod run;
