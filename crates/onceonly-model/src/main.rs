//! `onceonly-model`: checks the protocol model for every effect kind and
//! policy, prints the states explored, and exits non-zero on a broken
//! property. `--workers N`, `--deliveries N`, `--crashes N` set the bounds.

use std::process::ExitCode;

use onceonly::{EffectKind, StalePolicy};
use onceonly_model::{check, Bounds};

const KINDS: [EffectKind; 6] = [
    EffectKind::Local,
    EffectKind::Keyed,
    EffectKind::Lookup,
    EffectKind::Opaque(StalePolicy::Hold),
    EffectKind::Opaque(StalePolicy::AtLeastOnce),
    EffectKind::Opaque(StalePolicy::AtMostOnce),
];

fn bounds() -> Result<Bounds, String> {
    let mut b = Bounds::default();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .ok_or_else(|| format!("{flag} needs a number"))?;
        let n: u8 = value
            .parse()
            .map_err(|_| format!("{flag} {value:?}: not a number from 0 to 255"))?;
        match flag.as_str() {
            "--workers" => b.workers = n,
            "--deliveries" => b.deliveries = n,
            "--crashes" => b.crashes = n,
            "--heartbeats" => b.heartbeats = n,
            "--cancels" => b.cancels = n,
            "--expiries" => b.expiries = n,
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(b)
}

fn main() -> ExitCode {
    let b = match bounds() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("onceonly-model: {e}");
            return ExitCode::from(2);
        }
    };
    println!("bounds: {b:?}");
    let mut failed = false;
    let mut total = 0;
    for kind in KINDS {
        let r = check(kind, b, None);
        total += r.unique_states;
        println!(
            "{:<22} {:>9} states explored ({} generated), depth {}, {:.1?}",
            kind.to_string(),
            r.unique_states,
            r.states,
            r.max_depth,
            r.elapsed
        );
        for (name, steps) in &r.violations {
            failed = true;
            println!("  BROKEN: {name}\n    steps: {}", steps.join(" -> "));
        }
        if !r.unreached.is_empty() {
            println!("  never reached: {}", r.unreached.join(", "));
        }
    }
    println!("total: {total} states explored");
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
