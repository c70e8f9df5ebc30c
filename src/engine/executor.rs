//! The seam between the engine's loop (claims, leases, settlement) and the work of one attempt
//! (worktree, agent, verification, delivery). The loop is tested with instant executors; the real
//! one runs agents in PTYs.

use super::control::AttemptControl;
use crate::domain::Usd;
use crate::store::{Claimed, Park, PlanRecord};
use async_trait::async_trait;

/// How an attempt ended, for the loop to settle in the store.
#[derive(Debug, Clone, PartialEq)]
pub enum AttemptOutcome {
    /// Marker found and every required check passed.
    Done {
        cost: Usd,
        evidence: serde_json::Value,
    },
    /// Failed. `retry`: the failure is transient (overload, rate limit, spawn EAGAIN, timeout) and
    /// the task may run again while attempts remain.
    Failed {
        cost: Usd,
        reason: String,
        retry: bool,
        evidence: serde_json::Value,
    },
    /// Waiting for a human (handoff answered blocked / human_loop).
    Parked {
        cost: Usd,
        park: Park,
        reason: String,
        evidence: serde_json::Value,
    },
    /// Stopped from outside (shutdown, budget, run timeout): give the task back.
    Released { cost: Usd, reason: String },
    /// The agent's backend reported a rate or usage limit: the task goes back without using up
    /// an attempt and the backend is paused until the reset `message` names (see
    /// [`super::agent_limits`]).
    RateLimited {
        cost: Usd,
        agent: String,
        /// The agent's own words (redacted), where the reset time is looked for.
        message: String,
        evidence: serde_json::Value,
    },
    /// The lease was lost: someone else owns the task now; settle nothing.
    Abandoned,
}

/// Runs one claimed task to an outcome.
#[async_trait]
pub trait Executor: Send + Sync {
    async fn execute(
        &self,
        claimed: Claimed,
        plan: PlanRecord,
        ctl: AttemptControl,
    ) -> AttemptOutcome;

    /// The task ended FAILED for good (no attempt left, or not retryable): what its attempts
    /// left behind may be cleaned up (`[worktrees] keep_failed = false`).
    async fn failed_for_good(&self, _plan_id: &str, _task_id: &str) {}
}
