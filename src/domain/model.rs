//! The normalised plan and task model every part of Whilly shares.
//!
//! Plan files (v3 and v4) are parsed into these types by `plan`; the store keeps them; the engine
//! builds prompts from them. Unknown keys of the files survive in `extra` so nothing a user wrote
//! is dropped on the way through import and export.

use super::money::Usd;
use super::status::Status;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;
use std::str::FromStr;

/// Task priority, highest first. Ready tasks are claimed in (priority rank, id) order.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    Critical,
    High,
    #[default]
    Medium,
    Low,
}

impl Priority {
    /// 0 for critical … 3 for low; the queue orders by this ascending.
    pub fn rank(self) -> i64 {
        match self {
            Priority::Critical => 0,
            Priority::High => 1,
            Priority::Medium => 2,
            Priority::Low => 3,
        }
    }

    pub fn from_rank(rank: i64) -> Priority {
        match rank {
            i64::MIN..=0 => Priority::Critical,
            1 => Priority::High,
            2 => Priority::Medium,
            _ => Priority::Low,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Critical => "critical",
            Priority::High => "high",
            Priority::Medium => "medium",
            Priority::Low => "low",
        }
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown priority {0:?} (expected critical, high, medium or low)")]
pub struct UnknownPriority(pub String);

impl FromStr for Priority {
    type Err = UnknownPriority;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "critical" | "p0" => Ok(Priority::Critical),
            "high" | "p1" => Ok(Priority::High),
            "medium" | "normal" | "p2" => Ok(Priority::Medium),
            "low" | "p3" => Ok(Priority::Low),
            _ => Err(UnknownPriority(s.to_string())),
        }
    }
}

/// Which shape a plan file had when it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PlanFormat {
    V3,
    #[default]
    V4,
}

/// A check the orchestrator runs in the worktree before a task may be DONE.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerificationCommand {
    pub name: String,
    pub command: String,
    #[serde(default = "default_true")]
    pub required: bool,
    #[serde(default)]
    pub repair_max_attempts: u32,
    /// Seconds; 600 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
}

fn default_true() -> bool {
    true
}

/// A repository a task may target (v4 `repo_targets[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepoTarget {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clone_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_branch: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One task as written in a plan (plus our additions), independent of any queue state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct TaskSpec {
    pub id: String,
    /// The status the file declared; the queue's live status is kept on the task row.
    pub status: Option<Status>,
    pub priority: Priority,
    pub description: String,
    pub phase: Option<String>,
    pub category: Option<String>,
    pub dependencies: Vec<String>,
    pub key_files: Vec<String>,
    pub acceptance_criteria: Vec<String>,
    pub test_steps: Vec<String>,
    pub prd_requirement: Option<String>,
    pub repo_target_id: Option<String>,
    /// Our additions.
    pub budget_usd: Option<Usd>,
    pub timeout_secs: Option<u64>,
    pub agent: Option<String>,
    pub max_attempts: Option<u32>,
    /// Worker tags the task requires (a worker must have all of them).
    pub tags: Vec<String>,
    /// Unknown keys, kept verbatim.
    pub extra: Map<String, Value>,
}

impl TaskSpec {
    /// The task for a person: its description, then its acceptance criteria, test steps and key
    /// files as lists (what the console's inbox and `whilly handoff show` print, never the
    /// agent's prompt envelope).
    pub fn brief(&self) -> String {
        let mut out = self.description.trim().to_string();
        for (title, items) in [
            ("Acceptance criteria", &self.acceptance_criteria),
            ("Test steps", &self.test_steps),
            ("Key files", &self.key_files),
        ] {
            if !items.is_empty() {
                out.push_str(&format!("\n\n{title}:"));
                for i in items {
                    out.push_str(&format!("\n- {i}"));
                }
            }
        }
        out
    }
}

/// A whole plan: its settings and its tasks, in file order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct PlanSpec {
    pub id: String,
    pub project: String,
    pub format: PlanFormat,
    pub budget_usd: Option<Usd>,
    pub agent: Option<String>,
    pub verification_commands: Vec<VerificationCommand>,
    pub repo_targets: Vec<RepoTarget>,
    /// Unknown or informational top-level keys (prd_file, created_at, agent_instructions,
    /// origin, source, …), kept verbatim.
    pub extra: Map<String, Value>,
    pub tasks: Vec<TaskSpec>,
}

impl PlanSpec {
    pub fn task(&self, id: &str) -> Option<&TaskSpec> {
        self.tasks.iter().find(|t| t.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_order_and_parse() {
        assert!(Priority::Critical < Priority::Low);
        assert_eq!("HIGH".parse::<Priority>(), Ok(Priority::High));
        assert!("urgent".parse::<Priority>().is_err());
        for p in [
            Priority::Critical,
            Priority::High,
            Priority::Medium,
            Priority::Low,
        ] {
            assert_eq!(Priority::from_rank(p.rank()), p);
        }
    }
}
