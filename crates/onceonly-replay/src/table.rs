//! The report as a plain-text table: one row per scenario and effect kind,
//! grouped by scenario, with every failure spelled out below it.

use std::fmt::Write;

use crate::report::{Count, Entry, Report, Verdict};

const HEADERS: [&str; 8] = [
    "#", "scenario", "kind", "allowed", "naive", "guarded", "records", "result",
];

fn count(c: Option<&Count>) -> String {
    c.map_or_else(|| "-".to_owned(), |c| c.total.to_string())
}

fn allowed(e: &Entry) -> String {
    let short = e.allowed.short();
    if e.runs > 1 && e.allowed.not_applicable.is_none() {
        // Totals over the runs, like the naive and guarded columns.
        let total = |n: usize| n * e.runs;
        let range = if e.allowed.min == e.allowed.max {
            total(e.allowed.min).to_string()
        } else {
            format!("{}-{}", total(e.allowed.min), total(e.allowed.max))
        };
        format!("{range} ({short}/run)")
    } else {
        short
    }
}

fn result(e: &Entry) -> &'static str {
    match e.verdict {
        Verdict::Pass => "pass",
        Verdict::Fail => "FAIL",
        Verdict::NotApplicable => "n/a",
        Verdict::Skipped => "skipped",
        Verdict::Planned => "planned",
    }
}

fn row(e: &Entry, first_of_group: bool) -> [String; 8] {
    let (number, title) = if first_of_group {
        (e.number.to_string(), e.title.clone())
    } else {
        (String::new(), String::new())
    };
    let na = e.verdict == Verdict::NotApplicable;
    [
        number,
        title,
        e.kind.clone(),
        allowed(e),
        if na {
            "-".into()
        } else {
            count(e.naive.as_ref())
        },
        if na {
            "-".into()
        } else {
            count(e.guarded.as_ref())
        },
        if na { "-".into() } else { e.records.short() },
        result(e).to_owned(),
    ]
}

/// Renders `report`: rows grouped by scenario in the order they ran, then
/// the reason for every failure, skip and n/a. Counts are totals over a
/// scenario's runs; `allowed` also says the count each run may leave.
pub fn render(report: &Report) -> String {
    let mut labels: Vec<String> = Vec::new();
    for e in &report.entries {
        let label = e.label();
        if !labels.contains(&label) {
            labels.push(label);
        }
    }
    let mut rows: Vec<[String; 8]> = Vec::new();
    for label in &labels {
        let group = report.entries.iter().filter(|e| &e.label() == label);
        for (i, e) in group.enumerate() {
            rows.push(row(e, i == 0));
        }
    }
    let mut widths = HEADERS.map(str::len);
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: [&str; 8]| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            // Counts read best right-aligned.
            if (3..=5).contains(&i) {
                let _ = write!(text, "{cell:>w$}  ");
            } else {
                let _ = write!(text, "{cell:<w$}  ");
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&mut out, HEADERS);
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    line(&mut out, std::array::from_fn(|i| rule[i].as_str()));
    for r in &rows {
        line(&mut out, std::array::from_fn(|i| r[i].as_str()));
    }
    out.push('\n');
    for e in &report.entries {
        let why = match e.verdict {
            Verdict::Fail => e.failures.join("; "),
            Verdict::Skipped => e.skipped.clone().unwrap_or_default(),
            Verdict::NotApplicable => e.allowed.not_applicable.clone().unwrap_or_default(),
            _ => continue,
        };
        let _ = writeln!(out, "{} {} [{}]: {why}", result(e), e.label(), e.kind);
    }
    out
}
