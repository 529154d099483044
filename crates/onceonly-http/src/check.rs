//! The rules a destination meets before anything is claimed: the one set
//! that `run`, `consume`, `cancel` and `check` all apply, so a settings
//! file `check` passes is one `run` starts with.

use onceonly::answer::is_control;
use onceonly::EffectKind;

use crate::shape::{RequestShape, Shape};
use crate::template::{Template, Var};

/// Checks a destination at `base_url` with `shape` (and, when given, the
/// effect kind it serves): an http(s) URL, no credential over plain
/// http:// beyond loopback (unless allowed), header values a header can
/// carry, and a shape that fits the effect. Returns the parsed base URL;
/// the error is the sentence `run` refuses to start with.
pub fn check_destination(
    base_url: &str,
    shape: &Shape,
    effect: Option<EffectKind>,
) -> Result<reqwest::Url, String> {
    let parsed = reqwest::Url::parse(base_url)
        .map_err(|e| format!("destination {base_url:?} is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "destination {base_url:?}: only http:// and https:// destinations are supported"
        ));
    }
    shape
        .check_transport(&parsed)
        .map_err(|e| format!("destination {base_url}: {e}"))?;
    check_shape(shape, effect)?;
    Ok(parsed)
}

/// The rules of [`check_destination`] that need no base URL (for a
/// settings file that leaves the destination to `--http`).
pub fn check_shape(shape: &Shape, effect: Option<EffectKind>) -> Result<(), String> {
    if let Some(kind) = effect {
        shape.check_effect(kind)?;
    }
    let requests: [Option<&RequestShape>; 3] = [
        Some(&shape.send),
        shape.lookup.as_ref().map(|l| &l.request),
        shape.withdraw.as_ref().map(|w| &w.request),
    ];
    let headers = shape
        .headers
        .iter()
        .chain(requests.into_iter().flatten().flat_map(|r| &r.headers));
    for (name, template) in headers {
        check_header_value(name.as_str(), template, shape)?;
    }
    Ok(())
}

/// A header's text and the environment values it takes hold no control
/// character (CR/LF would end the header; a typo must not fail work for
/// good). The value itself is not shown: it may be a credential.
fn check_header_value(name: &str, template: &Template, shape: &Shape) -> Result<(), String> {
    let refuse = |found: char, within: &str| {
        Err(format!(
            "header {name}: {within} holds control character U+{:04X}, which a header \
             cannot carry: fix the --header flag or the settings file",
            u32::from(found)
        ))
    };
    for text in template.literals() {
        if let Some(c) = text.chars().find(|c| is_control(*c)) {
            return refuse(c, "the value");
        }
    }
    for var in template.vars() {
        if let Var::Env(env) = var {
            let value = shape.secrets.values().get(env).map_or("", String::as_str);
            if let Some(c) = value.chars().find(|c| is_control(*c)) {
                return refuse(c, &format!("environment variable {env}"));
            }
        }
    }
    Ok(())
}
