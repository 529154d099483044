//! `onceonly resolve`: a person decides a held operation. Fenced on the
//! token the person looked at (`--token`, from `onceonly held`), or on the
//! current one; refused, changing nothing, when the row moved meanwhile or
//! is not held.

use std::process::ExitCode;

use onceonly::ops::{resolve_as, Resolution, DEFAULT_ACTOR};
use onceonly::{Error, State, Store};

use crate::store::{open_migrated, with_store};

/// Arguments of `onceonly resolve`.
#[derive(clap::Args)]
pub struct Args {
    /// Job type.
    #[arg(long)]
    job: String,
    /// Operation key.
    #[arg(long)]
    key: String,
    /// What happened: completed (the effect did happen), queued (it did
    /// not: do it), failed (give it up) or cancelled.
    #[arg(long = "as", value_parser = ["completed", "queued", "failed", "cancelled"])]
    resolution: String,
    /// With --as completed: the effect's reference at the destination.
    #[arg(long = "ref")]
    external_ref: Option<String>,
    /// Why: recorded on the operation.
    #[arg(long)]
    reason: String,
    /// The token you looked at (onceonly held); refused if the row has moved
    /// on since. The current token when omitted.
    #[arg(long)]
    token: Option<i64>,
}

/// Resolves; exits 1 with a sentence when refused.
pub async fn run(db: &str, args: Args) -> anyhow::Result<ExitCode> {
    let resolution = match (args.resolution.as_str(), &args.external_ref) {
        ("completed", r) => Resolution::Completed {
            external_ref: r.clone(),
        },
        (other, Some(_)) => anyhow::bail!(
            "--ref names the effect at the destination and goes with --as completed, not --as {other}"
        ),
        ("queued", None) => Resolution::Queued,
        ("failed", None) => Resolution::Failed,
        ("cancelled", None) => Resolution::Cancelled,
        (other, None) => unreachable!("clap allows no --as {other}"),
    };
    if args.reason.trim().is_empty() {
        anyhow::bail!("--reason must say why (it is recorded on the operation)");
    }
    let store = open_migrated(db).await?;
    with_store!(&store, s => decide(s, &args, &resolution).await)
}

async fn decide<S: Store>(
    store: &S,
    args: &Args,
    resolution: &Resolution,
) -> anyhow::Result<ExitCode> {
    let name = format!("{}:{}", args.job, args.key);
    match resolve_as(
        store,
        &args.job,
        &args.key,
        resolution,
        &args.reason,
        args.token,
        &actor(),
    )
    .await
    {
        Ok(r) => {
            let reference = r
                .external_ref
                .as_deref()
                .map(|x| format!(", reference {x}"))
                .unwrap_or_default();
            let line = format!(
                "{name} resolved as {} (token {}{reference})",
                r.state, r.token
            );
            println!("{}", onceonly::escape_controls(&line));
            Ok(ExitCode::SUCCESS)
        }
        Err(Error::Moved {
            expected_token,
            record,
        }) => {
            let now = format!("it is now {} with token {}", record.state, record.token);
            let sentence = if record.state != State::Held {
                let saw = match args.token {
                    Some(t) if t != record.token => format!(", and you saw token {t}"),
                    _ => String::new(),
                };
                format!(
                    "{name} is not held ({now}{saw}); nothing was changed: only a held operation is resolved"
                )
            } else {
                format!(
                    "{name} moved since you looked: you saw token {expected_token}, {now}; \
                     nothing was changed. Look again (onceonly held) and decide on what it is now"
                )
            };
            eprintln!("{}", onceonly::escape_controls(&sentence));
            Ok(ExitCode::from(1))
        }
        Err(e @ Error::NotFound { .. }) => {
            eprintln!(
                "{}; nothing was changed",
                onceonly::escape_controls(&e.to_string())
            );
            Ok(ExitCode::from(1))
        }
        Err(e) => Err(e.into()),
    }
}

/// Who an operator command names in the audit trail: the OS user (`USER`),
/// or `operator` when it is not set.
pub(crate) fn actor() -> String {
    std::env::var("USER")
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_ACTOR.to_owned())
}
