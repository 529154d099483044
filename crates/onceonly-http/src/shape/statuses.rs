//! Which statuses mean what: ranges parsed from the settings, and the
//! defaults of docs/DESIGN.md section 6 for any status they do not name.

use super::spec::StatusSpec;

/// What an answer's status means for a send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    Done,
    NotSent,
    Unknown,
    Permanent,
}

/// Inclusive status ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Statuses(Vec<(u16, u16)>);

impl Statuses {
    pub(super) fn parse(specs: &[StatusSpec], field: &str) -> Result<Self, String> {
        let bad = |s: &str| {
            format!(
                "{field}: {s:?} is not a status (404), a class (\"4xx\") or a range (\"500-503\")"
            )
        };
        let mut ranges = Vec::new();
        for spec in specs {
            let (lo, hi) = match spec {
                StatusSpec::Code(c) => (*c, *c),
                StatusSpec::Text(t) => {
                    let t = t.trim();
                    if let Some(d) = t.strip_suffix("xx").filter(|d| d.len() == 1) {
                        let d: u16 = d.parse().map_err(|_| bad(t))?;
                        (d * 100, d * 100 + 99)
                    } else if let Some((a, b)) = t.split_once('-') {
                        let a = a.trim().parse().map_err(|_| bad(t))?;
                        let b = b.trim().parse().map_err(|_| bad(t))?;
                        (a, b)
                    } else {
                        let c = t.parse().map_err(|_| bad(t))?;
                        (c, c)
                    }
                }
            };
            if !(100..=599).contains(&lo) || !(100..=599).contains(&hi) || lo > hi {
                return Err(format!(
                    "{field}: {lo}-{hi} is not a range of HTTP statuses (100-599)"
                ));
            }
            ranges.push((lo, hi));
        }
        Ok(Self(ranges))
    }

    pub(super) fn contains(&self, code: u16) -> bool {
        self.0.iter().any(|&(lo, hi)| (lo..=hi).contains(&code))
    }

    pub(super) fn or(self, default: &[(u16, u16)]) -> Self {
        if self.0.is_empty() {
            Self(default.to_vec())
        } else {
            self
        }
    }
}
