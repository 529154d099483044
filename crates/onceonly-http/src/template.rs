//! Request templates: `{name}` placeholders in a URL, a header value or a
//! body, filled from the operation (job, key, payload), the destination's
//! base URL, the item's reference and environment variables.
//!
//! | placeholder          | value                                          |
//! |----------------------|------------------------------------------------|
//! | `{base}`             | the destination's base URL, inserted as is     |
//! | `{job}` `{key}`      | the job type and the operation key             |
//! | `{idempotency_key}`  | `JOB:KEY`                                      |
//! | `{ref}`              | the item's reference (lookup results, withdraw)|
//! | `{payload}`          | the whole payload                              |
//! | `{payload.a.0.b}`    | a field of the payload (numbers index arrays)  |
//! | `{env.NAME}`         | environment variable NAME, read once at start; |
//! |                      | its value is a secret, never shown             |
//!
//! In a URL every value is percent-encoded, except one that starts the URL
//! (`{base}`, `{ref}` when the reference is itself a URL, or `{env.NAME}`
//! holding a whole secret URL such as a chat webhook's). `{{` and `}}`
//! are literal braces.

use std::collections::BTreeMap;

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// Characters left as they are in a URL value: RFC 3986's unreserved ones.
const URL_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// One placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Var {
    /// `{base}`
    Base,
    /// `{job}`
    Job,
    /// `{key}`
    Key,
    /// `{idempotency_key}`
    IdempotencyKey,
    /// `{ref}`
    Ref,
    /// `{payload}` (empty path) or `{payload.a.b}`
    Payload(Vec<String>),
    /// `{env.NAME}`
    Env(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Var(Var),
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
}

/// What a template is filled from.
pub struct Values<'a> {
    /// The base URL (no trailing `/`).
    pub base: &'a str,
    /// The operation.
    pub ctx: &'a onceonly::EffectCtx,
    /// The item's reference, where there is one.
    pub reference: Option<&'a str>,
    /// The environment variables the templates name, read at start.
    pub env: &'a BTreeMap<String, String>,
}

impl Template {
    /// Parses `text`, naming an unknown or unclosed placeholder.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    literal.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    literal.push('}');
                }
                '{' => {
                    let mut name = String::new();
                    let mut closed = false;
                    for c in chars.by_ref() {
                        if c == '}' {
                            closed = true;
                            break;
                        }
                        name.push(c);
                    }
                    if !closed {
                        return Err(format!("{text:?}: placeholder {{{name} is not closed"));
                    }
                    if !literal.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut literal)));
                    }
                    parts.push(Part::Var(
                        parse_var(&name).map_err(|e| format!("{text:?}: {e}"))?,
                    ));
                }
                '}' => return Err(format!("{text:?}: a lone }} (write }}}} for a brace)")),
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            parts.push(Part::Text(literal));
        }
        Ok(Self { parts })
    }

    /// The template is exactly one placeholder (a body field that keeps
    /// the value's JSON type).
    pub fn single_var(&self) -> Option<&Var> {
        match self.parts.as_slice() {
            [Part::Var(v)] => Some(v),
            _ => None,
        }
    }

    /// Every placeholder.
    pub fn vars(&self) -> impl Iterator<Item = &Var> {
        self.parts.iter().filter_map(|p| match p {
            Part::Var(v) => Some(v),
            Part::Text(_) => None,
        })
    }

    /// The literal text between its placeholders.
    pub fn literals(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Text(t) => Some(t.as_str()),
            Part::Var(_) => None,
        })
    }

    /// The template starts with this literal text (a fixed scheme and host).
    pub fn leading_text(&self) -> Option<&str> {
        match self.parts.first() {
            Some(Part::Text(t)) => Some(t),
            _ => None,
        }
    }

    /// The template starts with this placeholder.
    pub fn leading_var(&self) -> Option<&Var> {
        match self.parts.first() {
            Some(Part::Var(v)) => Some(v),
            _ => None,
        }
    }

    /// Fills the template as text (a header value, a body string).
    pub fn render_text(&self, values: &Values<'_>) -> Result<String, String> {
        self.render(values, false)
    }

    /// Fills the template as a URL: values percent-encoded, except one that
    /// starts it.
    pub fn render_url(&self, values: &Values<'_>) -> Result<String, String> {
        self.render(values, true)
    }

    fn render(&self, values: &Values<'_>, url: bool) -> Result<String, String> {
        let mut out = String::new();
        for (i, part) in self.parts.iter().enumerate() {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Var(v) => {
                    let value = text_of(&value_of(v, values)?);
                    if url && i > 0 {
                        out.extend(utf8_percent_encode(&value, URL_VALUE));
                    } else {
                        out.push_str(&value);
                    }
                }
            }
        }
        Ok(out)
    }
}

fn parse_var(name: &str) -> Result<Var, String> {
    let name = name.trim();
    Ok(match name {
        "base" => Var::Base,
        "job" => Var::Job,
        "key" => Var::Key,
        "idempotency_key" => Var::IdempotencyKey,
        "ref" => Var::Ref,
        "payload" => Var::Payload(Vec::new()),
        _ => {
            if let Some(path) = name.strip_prefix("payload.") {
                if path.split('.').any(str::is_empty) {
                    return Err(format!("{{{name}}}: an empty field name in the path"));
                }
                Var::Payload(path.split('.').map(str::to_owned).collect())
            } else if let Some(var) = name.strip_prefix("env.") {
                if var.is_empty() || !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    return Err(format!(
                        "{{{name}}}: an environment variable name is letters, digits and _"
                    ));
                }
                Var::Env(var.to_owned())
            } else {
                return Err(format!(
                    "unknown placeholder {{{name}}}; known: {{base}}, {{job}}, {{key}}, \
                     {{idempotency_key}}, {{ref}}, {{payload}}, {{payload.FIELD}}, {{env.NAME}}"
                ));
            }
        }
    })
}

/// A placeholder's value as JSON.
pub fn value_of(var: &Var, values: &Values<'_>) -> Result<serde_json::Value, String> {
    use serde_json::Value;
    Ok(match var {
        Var::Base => Value::String(values.base.to_owned()),
        Var::Job => Value::String(values.ctx.job_type.clone()),
        Var::Key => Value::String(values.ctx.op_key.clone()),
        Var::IdempotencyKey => Value::String(values.ctx.idempotency_key.clone()),
        Var::Ref => Value::String(
            values
                .reference
                .ok_or("{ref} used where there is no reference")?
                .to_owned(),
        ),
        Var::Payload(path) => {
            let mut at = &values.ctx.payload;
            for field in path {
                at = match at {
                    Value::Object(map) => map.get(field),
                    Value::Array(items) => field.parse::<usize>().ok().and_then(|i| items.get(i)),
                    _ => None,
                }
                .filter(|v| !v.is_null())
                .ok_or_else(|| format!("the payload has no field {}", path.join(".")))?;
            }
            at.clone()
        }
        // Checked at start: every named variable is there.
        Var::Env(name) => Value::String(
            values
                .env
                .get(name)
                .ok_or_else(|| format!("environment variable {name} was not read at start"))?
                .clone(),
        ),
    })
}

/// A JSON value as text: strings without quotes, the rest as JSON.
fn text_of(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(payload: serde_json::Value) -> onceonly::EffectCtx {
        onceonly::EffectCtx::detached("mail", "k 1/é", payload)
    }

    #[test]
    fn urls_encode_values_but_not_the_base() {
        let t = Template::parse("{base}/v1/{job}/{key}?to={payload.to}&n={payload.n.0}").unwrap();
        let env = BTreeMap::new();
        let c = ctx(serde_json::json!({"to": "a&b=c", "n": [7]}));
        let v = Values {
            base: "https://h:1/x",
            ctx: &c,
            reference: None,
            env: &env,
        };
        assert_eq!(
            t.render_url(&v).unwrap(),
            "https://h:1/x/v1/mail/k%201%2F%C3%A9?to=a%26b%3Dc&n=7"
        );
    }

    #[test]
    fn text_env_braces_and_errors() {
        let t = Template::parse("Bearer {env.TOKEN} {{x}}").unwrap();
        let env = BTreeMap::from([("TOKEN".to_owned(), "s3cr3t".to_owned())]);
        let c = ctx(serde_json::Value::Null);
        let v = Values {
            base: "",
            ctx: &c,
            reference: None,
            env: &env,
        };
        assert_eq!(t.render_text(&v).unwrap(), "Bearer s3cr3t {x}");
        assert!(Template::parse("{nope}")
            .unwrap_err()
            .contains("unknown placeholder {nope}"));
        assert!(Template::parse("{payload")
            .unwrap_err()
            .contains("not closed"));
        assert!(Template::parse("a}b").unwrap_err().contains("lone"));
        let missing = Template::parse("{payload.to}").unwrap();
        assert!(missing.render_text(&v).unwrap_err().contains("no field to"));
        assert!(Template::parse("{ref}").unwrap().render_text(&v).is_err());
    }
}
