//! The worker loop's attempts and its view of the store between turns; the decisions' state
//! is the scheduler's (`schedule.rs`).

use super::agent_limits::Pauses;
use super::control::{AttemptHandle, StopLevel, StopReason};
use super::executor::AttemptOutcome;
use super::outage::Outage;
use crate::domain::Usd;
use crate::store::{Lease, StoreError};
use std::collections::{HashMap, HashSet};

/// An attempt the loop started and has not settled.
pub(super) struct Running {
    pub lease: Lease,
    pub plan_id: String,
    pub task_id: String,
    /// The agent the attempt runs on (for `max_parallel`).
    pub agent: String,
    pub handle: AttemptHandle,
    pub task_budget: Option<Usd>,
    /// Spend already written to the store with `add_cost`.
    pub reported: Usd,
    pub abandoned: bool,
}

/// The loop's attempts and its view of the store between turns (the decisions' state is the
/// [`Scheduler`]'s).
pub(super) struct Turn {
    pub running: HashMap<i64, Running>,
    /// Attempts that ended and whose outcome the store has not taken yet (it did not answer):
    /// kept, in order, until it does. Their leases stay ours meanwhile (or expire, and then the
    /// write is refused as stale and the reaper's word counts).
    pub unsettled: Vec<(Running, AttemptOutcome)>,
    pub attempts: u64,
    pub warned_budget: HashSet<String>,
    /// Plans a plan-less worker stopped taking tasks from because their budget is spent.
    pub exhausted: HashSet<String>,
    pub outage: Outage,
    /// The outage lasted too long: everything is being stopped, then this is returned.
    pub fatal: Option<StoreError>,
    /// Agents paused by rate limits (by this worker or any other on the queue).
    pub pauses: Pauses,
}

impl Turn {
    pub(super) fn stop_all(&self, level: StopLevel, reason: StopReason) {
        for r in self.running.values() {
            r.handle.stop(level, reason);
        }
    }
}
