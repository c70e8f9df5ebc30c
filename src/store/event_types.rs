//! The names of audit-trail events. Both stores write exactly these; readers match on them.

pub const PLAN_CREATED: &str = "plan.created";
pub const PLAN_UPDATED: &str = "plan.updated";
pub const PLAN_PAUSED: &str = "plan.paused";
pub const PLAN_RESUMED: &str = "plan.resumed";
pub const PLAN_RESET: &str = "plan.reset";
/// The plan and its tasks were deleted; its events stay (the audit trail is append-only).
pub const PLAN_DELETED: &str = "plan.deleted";
/// Hidden from plan lists (`whilly plan archive`); `plan.unarchived` lists it again.
pub const PLAN_ARCHIVED: &str = "plan.archived";
pub const PLAN_UNARCHIVED: &str = "plan.unarchived";

pub const TASK_CREATED: &str = "task.created";
pub const TASK_UPDATED: &str = "task.updated";
pub const TASK_CLAIMED: &str = "task.claimed";
pub const TASK_STARTED: &str = "task.started";
pub const TASK_DONE: &str = "task.done";
pub const TASK_FAILED: &str = "task.failed";
/// A failed attempt that goes back to PENDING because attempts remain.
pub const TASK_RETRY: &str = "task.retry";
pub const TASK_RELEASED: &str = "task.released";
pub const TASK_HUMAN_LOOP: &str = "task.human_loop";
pub const TASK_BLOCKED: &str = "task.blocked";
pub const TASK_SKIPPED: &str = "task.skipped";
pub const TASK_APPROVED: &str = "task.approved";
pub const TASK_REJECTED: &str = "task.rejected";
pub const TASK_RESET: &str = "task.reset";
/// The reaper found the lease expired (worker gone).
pub const TASK_LEASE_EXPIRED: &str = "task.lease_expired";
/// The reaper found the task past its deadline (task too long).
pub const TASK_DEADLINE_PASSED: &str = "task.deadline_passed";
pub const TASK_COST: &str = "task.cost";

pub const BUDGET_WARNING: &str = "budget.warning";
pub const BUDGET_EXHAUSTED: &str = "budget.exhausted";

pub const WORKER_REGISTERED: &str = "worker.registered";
pub const WORKER_STOPPED: &str = "worker.stopped";
/// A worker's heartbeat is older than the offline threshold (it was killed, or cut off).
pub const WORKER_OFFLINE: &str = "worker.offline";

/// The operator decided about a task waiting for a human (approve / reject / send back).
pub const OPERATOR_DECISION: &str = "operator.decision";
