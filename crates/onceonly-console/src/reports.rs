//! The reports as pages: the timing check of the settings file against the
//! records (`onceonly check`), and the repeats in a configured table
//! (`onceonly repeats`). Both are the CLI's library calls
//! (`onceonly_tools`), run when the page is opened.

use askama::Template;
use axum::extract::State;
use axum::response::Html;
use onceonly::operator::OperatorStore;
use onceonly_tools::check::{records, rules};
use onceonly_tools::config::Config;
use onceonly_tools::repeats::{find, summary, time};

use crate::auth::Operator;
use crate::error::ConsoleError;
use crate::filters;
use crate::view::{cut, without_url, Chrome};
use crate::Shared;

type Page = Result<Html<String>, ConsoleError>;

fn render(t: impl Template) -> Page {
    t.render()
        .map(Html)
        .map_err(|e| ConsoleError::Io(std::io::Error::other(e)))
}

/// One line of the check, and how it reads: `ok`, `warn` or `bad`.
struct CheckLine {
    kind: &'static str,
    text: String,
}

#[derive(Template)]
#[template(path = "check.html")]
struct CheckPage {
    chrome: Chrome,
    file: String,
    /// Why there is no check (no file given, or it does not parse).
    problem: Option<String>,
    lines: Vec<CheckLine>,
    broken: usize,
    warnings: usize,
}

/// GET /check
pub(crate) async fn check<S: OperatorStore>(State(app): State<Shared<S>>, op: Operator) -> Page {
    let chrome = Chrome::new(op, app.options.read_only, &app.options.database);
    let mut page = CheckPage {
        chrome,
        file: String::new(),
        problem: None,
        lines: Vec::new(),
        broken: 0,
        warnings: 0,
    };
    let Some(path) = &app.options.config else {
        page.problem = Some(
            "No settings file: start the console with --config onceonly.toml to check it here."
                .into(),
        );
        return render(page);
    };
    page.file = path.display().to_string();
    let config = match Config::load(path) {
        Ok(c) => c,
        Err(e) => {
            page.problem = Some(format!("{e:#}"));
            return render(page);
        }
    };
    if config.jobs.is_empty() {
        page.problem = Some("No [jobs.NAME] tables: nothing to check.".into());
        return render(page);
    }
    let (rule_lines, broken) = rules(&config);
    let (record_lines, warnings) = records(&app.store, &config).await?;
    page.lines = rule_lines
        .into_iter()
        .chain(record_lines)
        .map(|text| CheckLine {
            kind: if text.contains("rule broken") {
                "bad"
            } else if text.contains("warning:") {
                "warn"
            } else {
                "ok"
            },
            text,
        })
        .collect();
    page.broken = broken;
    page.warnings = warnings;
    render(page)
}

/// One repeated key, as a row.
struct RepeatLine {
    key: String,
    count: usize,
    first_at: String,
    last_at: String,
    pattern: String,
    gaps: String,
}

#[derive(Template)]
#[template(path = "repeats.html")]
struct RepeatsPage {
    chrome: Chrome,
    problem: Option<String>,
    sql: String,
    rows: Vec<RepeatLine>,
    summary: String,
}

/// GET /repeats
pub(crate) async fn repeats<S: OperatorStore>(State(app): State<Shared<S>>, op: Operator) -> Page {
    let chrome = Chrome::new(op, app.options.read_only, &app.options.database);
    let mut page = RepeatsPage {
        chrome,
        problem: None,
        sql: String::new(),
        rows: Vec::new(),
        summary: String::new(),
    };
    let Some(request) = &app.options.repeats else {
        page.problem = Some(
            "No table: start the console with --repeats-table T --repeats-key K --repeats-at A \
             to report the repeats in your own table here."
                .into(),
        );
        return render(page);
    };
    match find(&app.options.db_url.0, request).await {
        Ok(report) => {
            page.sql = report.sql_note;
            page.summary = if report.repeats.is_empty() {
                "No key has more than one row.".into()
            } else {
                summary(&report.repeats)
            };
            page.rows = report
                .repeats
                .iter()
                .map(|r| {
                    let mut gaps: Vec<String> = r
                        .gaps_ms
                        .iter()
                        .take(8)
                        .map(|&g| time::format_gap(g))
                        .collect();
                    if r.gaps_ms.len() > 8 {
                        gaps.push(format!("… ({} more)", r.gaps_ms.len() - 8));
                    }
                    let near = r
                        .deploy_at
                        .as_deref()
                        .map(|d| format!(" (deploy at {d})"))
                        .unwrap_or_default();
                    RepeatLine {
                        key: cut(&r.key),
                        count: r.count,
                        first_at: r.first_at.clone(),
                        last_at: r.last_at.clone(),
                        pattern: format!("{}{near}", r.pattern.as_str()),
                        gaps: gaps.join(", "),
                    }
                })
                .collect();
        }
        Err(e) => page.problem = Some(without_url(&format!("{e:#}"), &app.options.db_url.0)),
    }
    render(page)
}
