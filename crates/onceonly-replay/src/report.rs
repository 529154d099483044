//! The report: one entry per scenario and job, with the allowed count
//! written before the run and what the naive and guarded versions did.

use std::collections::BTreeMap;

use onceonly::Record;
use serde::Serialize;

use crate::allowed::{Allowed, Counted};
use crate::scenario::Scenario;

/// Counted items over a scenario's runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Count {
    /// Items over all runs.
    pub total: usize,
    /// How many runs left each count (`{count: runs}`).
    pub by_run: BTreeMap<usize, usize>,
}

impl Count {
    /// One run that left `n`.
    pub fn one(n: usize) -> Self {
        let mut c = Self::default();
        c.add(n);
        c
    }

    /// Adds a run that left `n`.
    pub fn add(&mut self, n: usize) {
        self.total += n;
        *self.by_run.entry(n).or_default() += 1;
    }

    /// How many runs were counted.
    pub fn runs(&self) -> usize {
        self.by_run.values().sum()
    }

    /// Runs whose count `allowed` does not admit.
    pub fn runs_outside(&self, allowed: &Allowed) -> usize {
        self.by_run
            .iter()
            .filter(|(n, _)| !allowed.admits(**n))
            .map(|(_, runs)| runs)
            .sum()
    }
}

/// The operation records a scenario left, by state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Records {
    /// Records found (one per operation key when all is well).
    pub count: usize,
    /// Records per state.
    pub states: BTreeMap<String, usize>,
}

impl Records {
    /// Adds a record, or notes that none was found.
    pub fn add(&mut self, record: Option<&Record>) {
        if let Some(r) = record {
            self.count += 1;
            *self.states.entry(r.state.as_str().to_owned()).or_default() += 1;
        }
    }

    /// `100 completed`, `1 held`, `none`.
    pub fn short(&self) -> String {
        if self.count == 0 {
            return "none".into();
        }
        self.states
            .iter()
            .map(|(state, n)| format!("{n} {state}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// One named condition a scenario checked besides the count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// What should hold.
    pub name: String,
    /// Whether it held.
    pub passed: bool,
    /// What was seen.
    pub detail: String,
}

/// Where an entry stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Written before the run; not run yet.
    Planned,
    /// The guarded version kept to the allowed count and every check held.
    Pass,
    /// The guarded version broke the allowed count, a check, or erred.
    Fail,
    /// The scenario cannot apply to this effect kind (the allowed entry says why).
    NotApplicable,
    /// Not run here (the reason is in `skipped`).
    Skipped,
}

/// One scenario run on one job.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    /// The scenario's number in docs/DESIGN.md section 5.
    pub number: u8,
    /// Its stable name.
    pub scenario: &'static str,
    /// Its variant (`2 workers`, `SIGKILL`), if it has several.
    pub variant: Option<String>,
    /// What it does, in a few words.
    pub title: String,
    /// The effect kind and policy (`keyed`, `opaque/hold`).
    pub kind: String,
    /// The job type its records are under.
    pub job_type: String,
    /// Runs (messages) in the scenario: 1, or the concurrent run count.
    pub runs: usize,
    /// What the scenario may produce, written before it ran.
    pub allowed: Allowed,
    /// What the naive version (read the state, then act) produced.
    pub naive: Option<Count>,
    /// What the guarded version produced.
    pub guarded: Option<Count>,
    /// The guarded version's operation records.
    pub records: Records,
    /// Conditions checked besides the count.
    pub checks: Vec<Check>,
    /// What happened, step by step.
    pub notes: Vec<String>,
    /// Why the guarded version could not finish, if it could not.
    pub error: Option<String>,
    /// Why the scenario was not run here, if it was not.
    pub skipped: Option<String>,
    /// The verdict.
    pub verdict: Verdict,
    /// `true` pass, `false` fail, `null` not applicable or skipped.
    pub pass: Option<bool>,
    /// Every reason for a failure, in words.
    pub failures: Vec<String>,
    /// Wall time of the scenario, naive and guarded.
    pub elapsed_ms: u64,
    /// Worker processes the scenario started, naive and guarded.
    pub processes: usize,
    /// Of those, the ones killed with SIGKILL.
    pub sigkills: usize,
    #[serde(skip)]
    pub(crate) which: Scenario,
}

impl Entry {
    /// An entry with its allowed count, before anything runs.
    pub fn planned(
        which: Scenario,
        kind: String,
        job_type: String,
        runs: usize,
        allowed: Allowed,
    ) -> Self {
        Self {
            number: which.number(),
            scenario: which.id(),
            variant: which.variant(),
            title: which.title(),
            kind,
            job_type,
            runs,
            allowed,
            naive: None,
            guarded: None,
            records: Records::default(),
            checks: Vec::new(),
            notes: Vec::new(),
            error: None,
            skipped: None,
            verdict: Verdict::Planned,
            pass: None,
            failures: Vec::new(),
            elapsed_ms: 0,
            processes: 0,
            sigkills: 0,
            which,
        }
    }

    /// The scenario this entry runs.
    pub fn scenario(&self) -> Scenario {
        self.which
    }

    /// Operation keys each run uses.
    fn ops_per_run(&self) -> usize {
        match self.which {
            Scenario::Similar => 2,
            _ => 1,
        }
    }

    /// Judges the guarded result against the allowed count written before
    /// the run, and sets the verdict.
    pub fn judge(&mut self) {
        if self.allowed.not_applicable.is_some() {
            self.verdict = Verdict::NotApplicable;
            self.pass = None;
            return;
        }
        if self.skipped.is_some() {
            self.verdict = Verdict::Skipped;
            self.pass = None;
            return;
        }
        let mut failures = Vec::new();
        if let Some(e) = &self.error {
            failures.push(format!("the guarded run stopped: {e}"));
        }
        let what = match self.allowed.counted {
            Counted::Effects => "effect(s)",
            Counted::Live => "live item(s)",
        };
        match &self.guarded {
            None if self.error.is_none() => failures.push("the guarded version was not run".into()),
            None => {}
            Some(count) => {
                // Count per operation: a run of 2 operations is allowed twice over.
                for (n, runs) in &count.by_run {
                    if !self.allowed.admits(*n) {
                        failures.push(format!(
                            "{runs} run(s) left {n} {what}; allowed {}",
                            self.allowed.short()
                        ));
                    }
                }
                let expected = self.runs * self.ops_per_run();
                if self.records.count != expected {
                    failures.push(format!(
                        "{} operation record(s) found, {expected} expected",
                        self.records.count
                    ));
                }
            }
        }
        for (state, n) in &self.records.states {
            if !self.allowed.states.iter().any(|s| s.as_str() == state) {
                let allowed: Vec<&str> = self.allowed.states.iter().map(|s| s.as_str()).collect();
                failures.push(format!(
                    "{n} record(s) ended {state}; allowed {}",
                    allowed.join(" or ")
                ));
            }
        }
        for check in self.checks.iter().filter(|c| !c.passed) {
            failures.push(format!("{}: {}", check.name, check.detail));
        }
        self.pass = Some(failures.is_empty());
        self.verdict = if failures.is_empty() {
            Verdict::Pass
        } else {
            Verdict::Fail
        };
        self.failures = failures;
    }

    /// `3 dies after claim (SIGKILL)`.
    pub fn label(&self) -> String {
        format!("{} {}", self.number, self.title)
    }
}

/// Counts of entries by verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Entries that passed.
    pub pass: usize,
    /// Entries that failed.
    pub fail: usize,
    /// Entries that do not apply to their effect kind.
    pub not_applicable: usize,
    /// Entries not run here.
    pub skipped: usize,
    /// Entries not run yet.
    pub planned: usize,
    /// Worker processes started, over every entry.
    pub processes: usize,
    /// Of those, the ones killed with SIGKILL.
    pub sigkills: usize,
}

/// Every entry of one or more harness runs.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// The run id in every operation key the harness used.
    pub run_id: String,
    /// One entry per scenario and job, in run order.
    pub entries: Vec<Entry>,
}

impl Report {
    /// True when no entry failed (and every planned entry was run).
    pub fn passed(&self) -> bool {
        let s = self.summary();
        s.fail == 0 && s.planned == 0
    }

    /// Entries by verdict.
    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for e in &self.entries {
            match e.verdict {
                Verdict::Pass => s.pass += 1,
                Verdict::Fail => s.fail += 1,
                Verdict::NotApplicable => s.not_applicable += 1,
                Verdict::Skipped => s.skipped += 1,
                Verdict::Planned => s.planned += 1,
            }
            s.processes += e.processes;
            s.sigkills += e.sigkills;
        }
        s
    }

    /// The failed entries.
    pub fn failures(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(|e| e.verdict == Verdict::Fail)
    }

    /// Appends another report's entries (another job's).
    pub fn merge(&mut self, other: Report) {
        if self.run_id.is_empty() {
            self.run_id = other.run_id;
        }
        self.entries.extend(other.entries);
    }

    /// The report as a table a person reads at a glance; see [`crate::table`].
    pub fn table(&self) -> String {
        crate::table::render(self)
    }
}
