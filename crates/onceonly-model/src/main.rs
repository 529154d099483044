//! `onceonly-model`: checks the protocol model for every effect kind and
//! policy, prints the states explored, and exits non-zero on a broken
//! property. `--workers N`, `--deliveries N`, `--crashes N`, `--heartbeats
//! N`, `--cancels N`, `--expiries N` set the bounds; `--kind NAME` checks
//! one kind (`keyed`, `opaque/hold`, ...); `--bug NAME` plants a bug
//! (`release-ignores-cancel`, `complete-ignores-token`,
//! `cancel-skips-lookup`), which the checker must then report broken.

use std::process::ExitCode;

use onceonly::{EffectKind, StalePolicy};
use onceonly_model::{check, Bounds, Bug};

const KINDS: [EffectKind; 6] = [
    EffectKind::Local,
    EffectKind::Keyed,
    EffectKind::Lookup,
    EffectKind::Opaque(StalePolicy::Hold),
    EffectKind::Opaque(StalePolicy::AtLeastOnce),
    EffectKind::Opaque(StalePolicy::AtMostOnce),
];

/// What to check: the bounds, the kinds, and the bug planted.
struct Run {
    bounds: Bounds,
    kinds: Vec<EffectKind>,
    bug: Option<Bug>,
}

fn parse() -> Result<Run, String> {
    let mut run = Run {
        bounds: Bounds::default(),
        kinds: KINDS.to_vec(),
        bug: None,
    };
    let b = &mut run.bounds;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = || {
            value
                .parse::<u8>()
                .map_err(|_| format!("{flag} {value:?}: not a number from 0 to 255"))
        };
        match flag.as_str() {
            "--workers" => b.workers = number()?,
            "--deliveries" => b.deliveries = number()?,
            "--crashes" => b.crashes = number()?,
            "--heartbeats" => b.heartbeats = number()?,
            "--cancels" => b.cancels = number()?,
            "--expiries" => b.expiries = number()?,
            "--kind" => {
                let kind = KINDS.into_iter().find(|k| k.to_string() == value);
                let names: Vec<_> = KINDS.iter().map(|k| k.to_string()).collect();
                let kind = kind.ok_or_else(|| {
                    format!("--kind {value:?}: expected one of {}", names.join(", "))
                })?;
                run.kinds = vec![kind];
            }
            "--bug" => {
                let bug = Bug::ALL.into_iter().find(|b| b.name() == value);
                let names: Vec<_> = Bug::ALL.iter().map(|b| b.name()).collect();
                run.bug = Some(bug.ok_or_else(|| {
                    format!("--bug {value:?}: expected one of {}", names.join(", "))
                })?);
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(run)
}

fn main() -> ExitCode {
    let run = match parse() {
        Ok(run) => run,
        Err(e) => {
            eprintln!("onceonly-model: {e}");
            return ExitCode::from(2);
        }
    };
    println!("bounds: {:?}", run.bounds);
    if let Some(bug) = run.bug {
        println!("planted bug: {}", bug.name());
    }
    let mut failed = false;
    let mut total = 0;
    for kind in run.kinds {
        let r = check(kind, run.bounds, run.bug);
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
