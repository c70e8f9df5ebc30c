//! Rows as Postgres returns them, and their conversion into the store's records.

use crate::domain::{PlanSpec, Priority, Status, TaskSpec, Usd};
use crate::store::{Event, PlanRecord, StoreError, StoreResult, TaskRecord, WorkerRecord};
use chrono::{DateTime, Utc};

pub(crate) use crate::store::sql_common::{event_cols, parse_status, plan_cols, task_cols};

#[derive(Debug, Clone, sqlx::FromRow)]
pub(super) struct TaskRow {
    pub pk: i64,
    pub plan_id: String,
    pub task_id: String,
    pub status: String,
    pub priority_rank: i64,
    pub pending_deps: i64,
    pub epoch: i64,
    pub attempts: i64,
    pub max_attempts: i64,
    pub worker_id: Option<String>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub deadline_at: Option<DateTime<Utc>>,
    pub cost_micros: i64,
    pub reserved_micros: i64,
    pub reason: Option<String>,
    pub spec: serde_json::Value,
    pub updated_at: DateTime<Utc>,
}

impl TaskRow {
    pub(super) fn status(&self) -> StoreResult<Status> {
        parse_status(&self.status, &self.task_id)
    }

    pub(super) fn into_record(self) -> StoreResult<TaskRecord> {
        let status = self.status()?;
        let spec: TaskSpec = serde_json::from_value(self.spec).map_err(|e| {
            StoreError::Corrupt(format!(
                "task {}/{}: stored spec does not parse: {e}",
                self.plan_id, self.task_id
            ))
        })?;
        Ok(TaskRecord {
            pk: self.pk,
            plan_id: self.plan_id,
            id: self.task_id,
            status,
            priority: Priority::from_rank(self.priority_rank),
            pending_deps: self.pending_deps,
            epoch: self.epoch,
            attempts: self.attempts,
            max_attempts: self.max_attempts,
            worker_id: self.worker_id,
            lease_expires_at: self.lease_expires_at,
            deadline_at: self.deadline_at,
            cost: Usd(self.cost_micros),
            reserved: Usd(self.reserved_micros),
            reason: self.reason,
            spec,
            updated_at: self.updated_at,
        })
    }
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub(super) struct PlanRow {
    pub id: String,
    pub project: String,
    pub paused: bool,
    pub budget_micros: Option<i64>,
    pub spent_micros: i64,
    pub reserved_micros: i64,
    pub spec: serde_json::Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub archived_at: Option<DateTime<Utc>>,
}

impl PlanRow {
    pub(super) fn into_record(self) -> StoreResult<PlanRecord> {
        let spec: PlanSpec = serde_json::from_value(self.spec).map_err(|e| {
            StoreError::Corrupt(format!("plan {}: stored spec does not parse: {e}", self.id))
        })?;
        Ok(PlanRecord {
            id: self.id,
            project: self.project,
            paused: self.paused,
            budget: self.budget_micros.map(Usd),
            spent: Usd(self.spent_micros),
            reserved: Usd(self.reserved_micros),
            spec,
            created_at: self.created_at,
            updated_at: self.updated_at,
            archived_at: self.archived_at,
        })
    }
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub(super) struct EventRow {
    pub id: i64,
    pub ts: DateTime<Utc>,
    pub event_type: String,
    pub plan_id: Option<String>,
    pub task_id: Option<String>,
    pub worker_id: Option<String>,
    pub epoch: Option<i64>,
    pub from_status: Option<String>,
    pub to_status: Option<String>,
    pub payload: serde_json::Value,
}

impl EventRow {
    pub(super) fn into_event(self) -> StoreResult<Event> {
        let what = format!("event {}", self.id);
        let from_status = self
            .from_status
            .as_deref()
            .map(|s| parse_status(s, &what))
            .transpose()?;
        let to_status = self
            .to_status
            .as_deref()
            .map(|s| parse_status(s, &what))
            .transpose()?;
        Ok(Event {
            id: self.id,
            ts: self.ts,
            event_type: self.event_type,
            plan_id: self.plan_id,
            task_id: self.task_id,
            worker_id: self.worker_id,
            epoch: self.epoch,
            from_status,
            to_status,
            payload: self.payload,
        })
    }
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct WorkerRow {
    pub id: String,
    pub host: String,
    pub slots: i64,
    pub tags: Vec<String>,
    pub started_at: DateTime<Utc>,
    pub heartbeat_at: DateTime<Utc>,
    pub offline: bool,
}

impl From<WorkerRow> for WorkerRecord {
    fn from(r: WorkerRow) -> Self {
        WorkerRecord {
            id: r.id,
            host: r.host,
            slots: r.slots,
            tags: r.tags,
            started_at: r.started_at,
            heartbeat_at: r.heartbeat_at,
            offline: r.offline,
        }
    }
}
