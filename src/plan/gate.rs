//! The decision gate: pure rules a task must pass before an agent is given it.
//!
//! Exactly the original's rules, in its order: a description of at least 20 characters (after
//! trimming; characters, not bytes, so Cyrillic text counts the same), at least one acceptance
//! criterion, at least one test step. Without `--strict` failures are warnings; with it the task
//! is imported as SKIPPED with reason [`GATE_SKIP_REASON`].

use crate::domain::TaskSpec;
use serde::Serialize;
use std::fmt;

/// Shortest description (in characters, after trimming) the gate accepts.
pub(crate) const MIN_DESCRIPTION_CHARS: usize = 20;

/// The reason recorded on tasks the strict gate skips.
pub const GATE_SKIP_REASON: &str = "decision_gate_failed";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum GateFailure {
    ShortDescription { chars: usize },
    NoAcceptanceCriteria,
    NoTestSteps,
}

impl GateFailure {
    /// The diagnostic code (`gate_short_description`, …).
    pub fn code(self) -> &'static str {
        match self {
            GateFailure::ShortDescription { .. } => "gate_short_description",
            GateFailure::NoAcceptanceCriteria => "gate_no_acceptance_criteria",
            GateFailure::NoTestSteps => "gate_no_test_steps",
        }
    }

    /// The task field the failure is about, for pointers.
    pub fn field(self) -> &'static str {
        match self {
            GateFailure::ShortDescription { .. } => "description",
            GateFailure::NoAcceptanceCriteria => "acceptance_criteria",
            GateFailure::NoTestSteps => "test_steps",
        }
    }

    pub fn hint(self) -> &'static str {
        match self {
            GateFailure::ShortDescription { .. } => {
                "say what to build and where, so an agent can do it without asking"
            }
            GateFailure::NoAcceptanceCriteria => {
                "list the conditions under which the task counts as done"
            }
            GateFailure::NoTestSteps => "list commands or checks that prove the task is done",
        }
    }
}

impl fmt::Display for GateFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GateFailure::ShortDescription { chars } => write!(
                f,
                "description is {chars} characters long; at least {MIN_DESCRIPTION_CHARS} are required"
            ),
            GateFailure::NoAcceptanceCriteria => f.write_str("acceptance_criteria is empty"),
            GateFailure::NoTestSteps => f.write_str("test_steps is empty"),
        }
    }
}

/// One task's gate outcome (only tasks with failures are listed in a check report).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GateResult {
    pub task_id: String,
    pub failures: Vec<GateFailure>,
}

impl GateResult {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Every rule `task` fails, in the original's order.
pub fn gate_failures(task: &TaskSpec) -> Vec<GateFailure> {
    let mut out = Vec::new();
    let chars = task.description.trim().chars().count();
    if chars < MIN_DESCRIPTION_CHARS {
        out.push(GateFailure::ShortDescription { chars });
    }
    if task.acceptance_criteria.is_empty() {
        out.push(GateFailure::NoAcceptanceCriteria);
    }
    if task.test_steps.is_empty() {
        out.push(GateFailure::NoTestSteps);
    }
    out
}

/// Whether the description rule fails (the TRIZ report grades on it).
pub(crate) fn description_fails(task: &TaskSpec) -> bool {
    task.description.trim().chars().count() < MIN_DESCRIPTION_CHARS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(desc: &str, ac: &[&str], steps: &[&str]) -> TaskSpec {
        TaskSpec {
            id: "T".into(),
            description: desc.into(),
            acceptance_criteria: ac.iter().map(|s| s.to_string()).collect(),
            test_steps: steps.iter().map(|s| s.to_string()).collect(),
            ..TaskSpec::default()
        }
    }

    #[test]
    fn passing_task() {
        assert!(gate_failures(&task("Add a --json flag to plan check", &["x"], &["y"])).is_empty());
    }

    #[test]
    fn every_failure_in_order() {
        let f = gate_failures(&task("   short   ", &[], &[]));
        assert_eq!(
            f,
            [
                GateFailure::ShortDescription { chars: 5 },
                GateFailure::NoAcceptanceCriteria,
                GateFailure::NoTestSteps
            ]
        );
        assert_eq!(
            f[0].to_string(),
            "description is 5 characters long; at least 20 are required"
        );
    }

    #[test]
    fn counts_characters_not_bytes() {
        // 20 Cyrillic letters are 40 bytes; exactly at the limit passes, one fewer fails.
        let ok = "а".repeat(20);
        assert!(gate_failures(&task(&ok, &["x"], &["y"])).is_empty());
        let short = "а".repeat(19);
        assert_eq!(
            gate_failures(&task(&short, &["x"], &["y"])),
            [GateFailure::ShortDescription { chars: 19 }]
        );
    }
}
