//! How a run ends, and the exit code each ending maps to.

use crate::domain::exit_codes;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunEnd {
    /// Every task DONE or SKIPPED.
    AllDone,
    /// Some task FAILED, or tasks can never run (their dependencies failed, or they wait for a human).
    SomeFailed,
    BudgetExhausted,
    TimedOut,
    Interrupted,
    /// The run could not start or go on: the queue unreachable, an agent's program missing, no
    /// repository. Never produced by the engine's loop; the command line reports it.
    Environment,
    /// The run was refused before it started: a plan file with errors, an unknown plan, a bad
    /// flag. Never produced by the engine's loop either.
    InvalidInput,
}

impl RunEnd {
    pub fn exit_code(self) -> i32 {
        match self {
            RunEnd::AllDone => 0,
            RunEnd::SomeFailed => 1,
            RunEnd::BudgetExhausted => exit_codes::BUDGET_EXHAUSTED,
            RunEnd::TimedOut => exit_codes::TIMED_OUT,
            RunEnd::Interrupted => exit_codes::INTERRUPTED,
            RunEnd::Environment => exit_codes::ENVIRONMENT,
            RunEnd::InvalidInput => 1,
        }
    }

    /// How the run ended, for people: the console and the summary line show this, not the
    /// variant's name.
    pub fn describe(self) -> &'static str {
        match self {
            RunEnd::AllDone => "all tasks done",
            RunEnd::SomeFailed => "some tasks failed or wait for a human",
            RunEnd::BudgetExhausted => "budget exhausted",
            RunEnd::TimedOut => "timed out",
            RunEnd::Interrupted => "interrupted",
            RunEnd::Environment => "environment error",
            RunEnd::InvalidInput => "refused: invalid input",
        }
    }
}

/// What a run did.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RunSummary {
    pub end: RunEnd,
    pub exit_code: i32,
    pub attempts: u64,
    pub done: u64,
    pub failed: u64,
    pub skipped: u64,
    pub total: u64,
    pub cost_usd: f64,
    pub elapsed_sec: f64,
    /// Tasks that can never run in this plan (dependencies failed, or waiting for a human).
    pub stuck: Vec<super::stuck::Stuck>,
    /// Tasks whose work was done and checked but did not land (see [`super::landing`]).
    pub unlanded: Vec<Unlanded>,
    /// DONE tasks whose agent changed nothing (their checks passed on the base as it was).
    pub unchanged: Vec<String>,
}

/// One task whose work did not land, as the run's summary names it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Unlanded {
    pub task_id: String,
    pub branch: String,
    pub files: Vec<String>,
    /// `base_dirty`, `base_busy`, `conflict` or `not_pushed`.
    pub kind: String,
    pub detail: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_match_the_original() {
        assert_eq!(RunEnd::AllDone.exit_code(), 0);
        assert_eq!(RunEnd::SomeFailed.exit_code(), 1);
        assert_eq!(RunEnd::BudgetExhausted.exit_code(), 2);
        assert_eq!(RunEnd::TimedOut.exit_code(), 3);
        assert_eq!(RunEnd::Interrupted.exit_code(), 130);
        // Not 2 as the original did: a script must tell a spent budget from a machine to fix.
        assert_eq!(RunEnd::Environment.exit_code(), 4);
        assert_eq!(RunEnd::InvalidInput.exit_code(), 1);
    }

    #[test]
    fn endings_read_as_phrases_not_variant_names() {
        assert_eq!(RunEnd::AllDone.describe(), "all tasks done");
        assert_eq!(
            RunEnd::SomeFailed.describe(),
            "some tasks failed or wait for a human"
        );
        assert_eq!(RunEnd::BudgetExhausted.describe(), "budget exhausted");
        assert_eq!(RunEnd::TimedOut.describe(), "timed out");
        assert_eq!(RunEnd::Interrupted.describe(), "interrupted");
    }
}
