//! Printing listings to stdout that a reader may stop reading early
//! (`onceonly inspect | head -1`).
//!
//! std's `println!` panics when stdout is a closed pipe (exit 101, "failed
//! printing to stdout: Broken pipe"). The listing commands import this
//! module's `println!` instead, which ends the process with exit 0 and
//! nothing on stderr when the reader has gone, as `head` users expect:
//! those commands only read, so there is nothing left to finish.

use std::io::{ErrorKind, Write};

/// Writes one line to stdout; a closed pipe ends the process quietly
/// (exit 0), any other write error ends it with exit 1 naming the error.
pub fn line(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{args}") {
        if e.kind() == ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("onceonly: writing to stdout: {e}");
        std::process::exit(1);
    }
}

/// `println!` for listings: see the module documentation.
macro_rules! println {
    ($($arg:tt)*) => {
        $crate::output::line(format_args!($($arg)*))
    };
}
pub(crate) use println;
