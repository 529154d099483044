//! Why a key repeated: the pattern its times show.
//!
//! - `deploy`: a repeat (any row after the first) lies within the deploy
//!   window of a listed deploy, before or after it;
//! - `re-enqueue`: otherwise, a gap between two rows is at least the retry
//!   window;
//! - `retry`: every gap is under the retry window.
//!
//! Deploy wins over re-enqueue, and re-enqueue over retry.

use std::fmt;

use serde::Serialize;

use super::time::Millis;

/// The pattern of one key's repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Every gap is under the retry window: the queue or the worker retried.
    Retry,
    /// A gap at least the retry window: the job was queued again.
    ReEnqueue,
    /// A repeat near a deploy: workers stopped mid-job and the queue redelivered.
    Deploy,
}

impl Pattern {
    /// Every pattern, in the order they are reported.
    pub const ALL: [Pattern; 3] = [Pattern::Retry, Pattern::ReEnqueue, Pattern::Deploy];

    /// The name printed and written in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Pattern::Retry => "retry",
            Pattern::ReEnqueue => "re-enqueue",
            Pattern::Deploy => "deploy",
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The windows the patterns are judged by, in milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct Windows {
    /// Gaps under this are retries.
    pub retry: Millis,
    /// A repeat this close to a deploy is the deploy's.
    pub deploy: Millis,
}

/// One key's repeats, classified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classified {
    /// The gaps between consecutive rows, in order.
    pub gaps: Vec<Millis>,
    /// The pattern.
    pub pattern: Pattern,
    /// For `deploy`, the deploy the first repeat near one is near.
    pub deploy_at: Option<Millis>,
}

/// Classifies one key's times (at least two, sorted ascending) against the
/// deploys (sorted ascending).
pub fn classify(times: &[Millis], deploys: &[Millis], w: Windows) -> Classified {
    let gaps: Vec<Millis> = times.windows(2).map(|p| p[1] - p[0]).collect();
    let deploy_at = times
        .iter()
        .skip(1)
        .find_map(|&t| nearest_deploy(t, deploys).filter(|d| (t - d).abs() <= w.deploy));
    let pattern = if deploy_at.is_some() {
        Pattern::Deploy
    } else if gaps.iter().any(|&g| g >= w.retry) {
        Pattern::ReEnqueue
    } else {
        Pattern::Retry
    };
    Classified {
        gaps,
        pattern,
        deploy_at,
    }
}

fn nearest_deploy(t: Millis, deploys: &[Millis]) -> Option<Millis> {
    let i = deploys.partition_point(|&d| d < t);
    [i.checked_sub(1), Some(i)]
        .into_iter()
        .flatten()
        .filter_map(|j| deploys.get(j).copied())
        .min_by_key(|d| (t - d).abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Millis = 1000;
    const M: Millis = 60 * S;
    const W: Windows = Windows {
        retry: 5 * M,
        deploy: 10 * M,
    };

    fn pattern(times: &[Millis], deploys: &[Millis]) -> Pattern {
        classify(times, deploys, W).pattern
    }

    #[test]
    fn gaps_under_the_retry_window_are_retries() {
        let c = classify(&[0, 20 * S, 50 * S], &[], W);
        assert_eq!(c.gaps, vec![20 * S, 30 * S]);
        assert_eq!(c.pattern, Pattern::Retry);
        assert_eq!(c.deploy_at, None);
        assert_eq!(pattern(&[0, 5 * M - 1], &[]), Pattern::Retry);
        assert_eq!(pattern(&[0, 0], &[]), Pattern::Retry, "same instant");
    }

    #[test]
    fn one_gap_at_or_over_the_retry_window_is_a_re_enqueue() {
        assert_eq!(pattern(&[0, 5 * M], &[]), Pattern::ReEnqueue);
        assert_eq!(pattern(&[0, 10 * S, 2 * 60 * M], &[]), Pattern::ReEnqueue);
    }

    #[test]
    fn a_repeat_near_a_deploy_wins_over_retry_and_re_enqueue() {
        let d = 100 * M;
        // A retry-sized gap whose repeat came 3 minutes after a deploy.
        let c = classify(&[d - M, d + 3 * M], &[d], W);
        assert_eq!((c.pattern, c.deploy_at), (Pattern::Deploy, Some(d)));
        // A re-enqueue-sized gap whose repeat came 2 minutes after a deploy.
        assert_eq!(pattern(&[d - 60 * M, d + 2 * M], &[d]), Pattern::Deploy);
        // Within the window before the deploy counts too (clocks differ).
        assert_eq!(pattern(&[d - 30 * M, d - 10 * M], &[d]), Pattern::Deploy);
    }

    #[test]
    fn only_repeats_count_near_a_deploy_not_the_first_row() {
        let d = 100 * M;
        assert_eq!(pattern(&[d, d + 60 * M], &[d]), Pattern::ReEnqueue);
        assert_eq!(pattern(&[d + M, d + 2 * M], &[d]), Pattern::Deploy);
    }

    #[test]
    fn a_deploy_outside_the_window_changes_nothing() {
        let d = 100 * M;
        assert_eq!(pattern(&[d + 11 * M, d + 12 * M], &[d]), Pattern::Retry);
        assert_eq!(pattern(&[0, 20 * S], &[d]), Pattern::Retry);
    }

    #[test]
    fn the_nearest_of_several_deploys_is_named() {
        let c = classify(&[0, 50 * M], &[10 * M, 45 * M, 200 * M], W);
        assert_eq!((c.pattern, c.deploy_at), (Pattern::Deploy, Some(45 * M)));
        assert_eq!(nearest_deploy(5, &[]), None);
        assert_eq!(nearest_deploy(5, &[1, 7]), Some(7));
        assert_eq!(nearest_deploy(50, &[1, 7]), Some(7));
        assert_eq!(nearest_deploy(0, &[1, 7]), Some(1));
    }

    #[test]
    fn windows_are_configurable() {
        let narrow = Windows {
            retry: 10 * S,
            deploy: M,
        };
        assert_eq!(
            classify(&[0, 20 * S], &[], narrow).pattern,
            Pattern::ReEnqueue
        );
        assert_eq!(
            classify(&[0, 20 * S], &[2 * M], narrow).pattern,
            Pattern::ReEnqueue
        );
        assert_eq!(
            classify(&[0, 20 * S], &[M], narrow).pattern,
            Pattern::Deploy
        );
    }
}
