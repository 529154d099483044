//! The actions: resolve a held operation, cancel one. Each is the library
//! call the CLI makes (`ops::resolve_as`, `ops::cancel_seen`), fenced on the
//! state and token the page showed, with the person's name as the actor.
//! The outcome is left as a message for the operation's page, which the
//! browser is sent back to (so a reload never repeats an action).

use axum::extract::{Form, State};
use axum::http::HeaderMap;
use axum::response::Redirect;
use onceonly::operator::OperatorStore;
use onceonly::ops::{cancel_seen, resolve_as, CancelOutcome, Resolution};
use onceonly::{Error, Record, State as OpState};
use onceonly_http::HttpDestination;
use serde::Deserialize;

use crate::auth::{same_origin, Flash, Operator};
use crate::error::ConsoleError;
use crate::view::op_link;
use crate::Shared;

/// The fields every action form carries: what it acts on, as the page
/// showed it, and the session's CSRF token.
#[derive(Deserialize)]
pub(crate) struct Seen {
    job: String,
    key: String,
    state: String,
    token: i64,
    csrf: String,
}

/// The resolve form: [`Seen`]'s fields and the decision. (Spelled out, not
/// `#[serde(flatten)]`: flattened form fields arrive as text, and the token
/// would not parse.)
#[derive(Deserialize)]
pub(crate) struct ResolveForm {
    job: String,
    key: String,
    state: String,
    token: i64,
    csrf: String,
    #[serde(rename = "as")]
    resolution: String,
    #[serde(default, rename = "ref")]
    external_ref: String,
    #[serde(default)]
    reason: String,
}

/// Checks what every action needs before it touches the database.
fn admit<S>(
    app: &Shared<S>,
    op: &Operator,
    headers: &HeaderMap,
    seen: &Seen,
) -> Result<OpState, ConsoleError> {
    same_origin(headers)?;
    op.check_csrf(&seen.csrf)?;
    if app.options.read_only {
        return Err(ConsoleError::Forbidden(
            "the console is read-only; nothing was changed".into(),
        ));
    }
    seen.state
        .parse::<OpState>()
        .map_err(|e| ConsoleError::BadRequest(e.to_string()))
}

fn done(text: String) -> Flash {
    Flash { kind: "done", text }
}

/// Not what was asked, but something changed: parked for a person.
fn held(text: String) -> Flash {
    Flash { kind: "held", text }
}

fn refused(text: String) -> Flash {
    Flash {
        kind: "refused",
        text,
    }
}

/// "You saw it held with token 3; it is now queued with token 3."
fn moved(seen: &Seen, now: &Record) -> Flash {
    let reference = now
        .external_ref
        .as_deref()
        .map(|r| format!(", reference {r}"))
        .unwrap_or_default();
    refused(format!(
        "Nothing was changed: this operation moved since you looked. You saw it {} with token {}; \
         it is now {} with token {}{reference}. Look at it again and decide on what it is now.",
        seen.state, seen.token, now.state, now.token
    ))
}

/// POST /op/resolve
pub(crate) async fn resolve<S: OperatorStore>(
    State(app): State<Shared<S>>,
    op: Operator,
    headers: HeaderMap,
    Form(form): Form<ResolveForm>,
) -> Result<Redirect, ConsoleError> {
    let seen = &Seen {
        job: form.job,
        key: form.key,
        state: form.state,
        token: form.token,
        csrf: form.csrf,
    };
    admit(&app, &op, &headers, seen)?;
    let back = Redirect::to(&op_link(&seen.job, &seen.key));
    let external_ref = Some(form.external_ref.trim()).filter(|r| !r.is_empty());
    let resolution = match (form.resolution.as_str(), external_ref) {
        ("completed", r) => Resolution::Completed {
            external_ref: r.map(str::to_owned),
        },
        (other, Some(_)) => {
            app.sessions.flash(
                &op.session,
                refused(format!(
                    "Nothing was changed: a reference names the effect at the destination and goes \
                     with \"completed\", not \"{other}\"."
                )),
            );
            return Ok(back);
        }
        ("queued", None) => Resolution::Queued,
        ("failed", None) => Resolution::Failed,
        ("cancelled", None) => Resolution::Cancelled,
        (other, None) => {
            return Err(ConsoleError::BadRequest(format!(
                "resolve as {other:?}: expected completed, queued, failed or cancelled"
            )))
        }
    };
    let reason = form.reason.trim();
    if reason.is_empty() {
        app.sessions.flash(
            &op.session,
            refused(
                "Nothing was changed: say why (the reason is recorded on the operation).".into(),
            ),
        );
        return Ok(back);
    }
    let actor = op.actor();
    let outcome = resolve_as(
        &app.store,
        &seen.job,
        &seen.key,
        &resolution,
        reason,
        Some(seen.token),
        &actor,
    )
    .await;
    let flash = match outcome {
        Ok(r) => {
            tracing::info!(job = %seen.job, key = %seen.key, operator = %actor, state = %r.state, "console: resolved");
            let reference = r
                .external_ref
                .as_deref()
                .map(|x| format!(", reference {x}"))
                .unwrap_or_default();
            done(format!(
                "Resolved as {} (token {}{reference}), recorded as done by {actor}.",
                r.state, r.token
            ))
        }
        Err(Error::Moved { record, .. }) => {
            tracing::info!(job = %seen.job, key = %seen.key, operator = %actor, "console: resolve refused, the row moved");
            moved(seen, &record)
        }
        Err(e @ Error::NotFound { .. }) => refused(format!("Nothing was changed: {e}.")),
        Err(e) => return Err(e.into()),
    };
    app.sessions.flash(&op.session, flash);
    Ok(back)
}

/// POST /op/cancel
pub(crate) async fn cancel<S: OperatorStore>(
    State(app): State<Shared<S>>,
    op: Operator,
    headers: HeaderMap,
    Form(seen): Form<Seen>,
) -> Result<Redirect, ConsoleError> {
    let state = admit(&app, &op, &headers, &seen)?;
    let back = Redirect::to(&op_link(&seen.job, &seen.key));
    let actor = op.actor();
    let outcome = cancel_seen::<S, HttpDestination>(
        &app.store,
        &seen.job,
        &seen.key,
        app.options.destination.as_ref(),
        &actor,
        (state, seen.token),
    )
    .await;
    let flash = match outcome {
        Ok(CancelOutcome::Cancelled { withdrawn_ref }) => done(match withdrawn_ref {
            Some(r) => format!("Cancelled by {actor}; item {r} withdrawn at the destination."),
            None => format!("Cancelled by {actor}; nothing of it was sent."),
        }),
        Ok(CancelOutcome::AlreadyCancelled) => done("It was already cancelled.".into()),
        Ok(CancelOutcome::Requested { owner }) => done(format!(
            "Cancel requested by {actor}: its owner {} stops before sending or withdraws after. \
             Reload to see where it stands.",
            owner.as_deref().unwrap_or("?")
        )),
        Ok(CancelOutcome::StillLive {
            state,
            external_ref,
            reason,
        }) => refused(format!(
            "It stays {state}: item {} is still live at the destination ({reason}).",
            external_ref.as_deref().unwrap_or("(no reference)")
        )),
        Ok(CancelOutcome::NotLookedUp { attempts, reason }) => refused(format!(
            "Nothing was changed: it was claimed {attempts} time(s) and may have been sent, \
             and {reason}. Start the console with --http naming a destination that can look \
             it up, or check the destination by hand."
        )),
        Ok(CancelOutcome::HeldNotLookedUp { attempts, reason }) => held(format!(
            "Held by {actor}, not cancelled: it was claimed {attempts} time(s) and may have been \
             sent, and {reason}; its retry is stopped. Check the destination, then resolve it \
             below: cancelled (withdrawn by hand, or never sent) or queued to send it after all."
        )),
        Ok(CancelOutcome::Held) => refused(
            "Nothing was changed: it is held, and nobody knows whether the item exists; resolve it."
                .into(),
        ),
        Err(Error::Moved { record, .. }) => moved(&seen, &record),
        Err(e @ Error::NotFound { .. }) => refused(format!("Nothing was changed: {e}.")),
        Err(e) => return Err(e.into()),
    };
    tracing::info!(job = %seen.job, key = %seen.key, operator = %actor, outcome = flash.kind, "console: cancel");
    app.sessions.flash(&op.session, flash);
    Ok(back)
}
