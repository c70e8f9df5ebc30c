//! The queue's side of fenced delivery (`workspace::DeliveryFence`): asked under the merge lock
//! whether the attempt still holds its lease, and whether an earlier landing was recorded.
//!
//! Delivery runs in a blocking thread (git2 is synchronous), so these calls block on the
//! runtime's handle; they are two small queries.

use super::outage::retry_transient;
use crate::store::{EventFilter, Lease, Store, StoreError, event_types};

/// A dropped connection costs a retry, not the attempt's delivery.
const FENCE_TRIES: u32 = 6;
use crate::workspace::DeliveryFence;
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Handle;

pub(crate) struct StoreFence {
    store: Arc<dyn Store>,
    lease: Lease,
    /// What a heartbeat extends the lease by (the engine's lease length).
    extend: Duration,
    plan_id: String,
    task_id: String,
    /// See `DeliveryFence::queue_mark`.
    mark: String,
    rt: Handle,
}

impl StoreFence {
    /// Must be made on the runtime (it keeps its handle) and used off it.
    pub(crate) fn new(
        store: Arc<dyn Store>,
        lease: Lease,
        extend: Duration,
        plan: &crate::store::PlanRecord,
        task_id: &str,
    ) -> StoreFence {
        let plan_id = plan.id.as_str();
        StoreFence {
            mark: queue_mark(store.as_ref(), plan),
            store,
            lease,
            extend,
            plan_id: plan_id.to_string(),
            task_id: task_id.to_string(),
            rt: Handle::current(),
        }
    }
}

impl DeliveryFence for StoreFence {
    fn epoch(&self) -> i64 {
        self.lease.epoch
    }

    fn queue_mark(&self) -> String {
        self.mark.clone()
    }

    fn still_ours(&self) -> Result<bool, String> {
        // A heartbeat is the fenced write that proves the lease: it changes nothing but the
        // expiry, and only while (task, epoch) is still the task's lease.
        let beat = || self.store.heartbeat(self.lease, self.extend);
        match self.rt.block_on(retry_transient(FENCE_TRIES, beat)) {
            Ok(()) => Ok(true),
            Err(StoreError::Stale { .. }) => Ok(false),
            Err(e) => Err(e.to_string()),
        }
    }

    fn recorded(&self, epoch: i64) -> Result<bool, String> {
        recorded(&self.rt, &self.store, &self.plan_id, &self.task_id, epoch)
    }
}

/// Names the queue's plan a landing belongs to: where the queue lives and when the plan was
/// created there.
fn queue_mark(store: &dyn Store, plan: &crate::store::PlanRecord) -> String {
    format!(
        "{}:{}:{}",
        store.info().backend,
        store.info().location,
        plan.created_at.timestamp_micros()
    )
}

/// Whether the landing by the attempt at `epoch` was recorded: the attempt's own DONE, or the
/// operator's approval of a parked landing (its payload names the epoch, see [`ParkedFence`]).
fn recorded(
    rt: &Handle,
    store: &Arc<dyn Store>,
    plan_id: &str,
    task_id: &str,
    epoch: i64,
) -> Result<bool, String> {
    let filter = EventFilter {
        plan_id: Some(plan_id.to_string()),
        task_id: Some(task_id.to_string()),
        ..Default::default()
    };
    let events = rt
        .block_on(retry_transient(FENCE_TRIES, || store.events(&filter)))
        .map_err(|e| e.to_string())?;
    Ok(events.iter().any(|e| {
        (e.event_type == event_types::TASK_DONE && e.epoch == Some(epoch))
            || (e.event_type == event_types::TASK_APPROVED
                && e.payload.get(LANDED_EPOCH).and_then(|v| v.as_i64()) == Some(epoch))
    }))
}

pub(crate) use super::delivery::LANDED_EPOCH;

/// The fence for landing a task parked as ready to merge: no lease is held, so "still ours"
/// means the task still waits to be merged, as the attempt at `epoch` left it (nobody sent it
/// back, approved or ran it meanwhile).
pub(crate) struct ParkedFence {
    store: Arc<dyn Store>,
    plan_id: String,
    task_id: String,
    epoch: i64,
    mark: String,
    /// The reason the task waits with while it is this fence's ([`super::delivery::READY_TO_MERGE`]
    /// unless made with [`ParkedFence::waiting_as`]).
    reason: &'static str,
    rt: Handle,
}

impl ParkedFence {
    /// The fence for a task parked with `reason` (`not_published`: pushed by `forge --compose`).
    pub(crate) fn waiting_as(
        store: Arc<dyn Store>,
        plan: &crate::store::PlanRecord,
        task: &crate::store::TaskRecord,
        reason: &'static str,
    ) -> ParkedFence {
        ParkedFence {
            reason,
            ..ParkedFence::new(store, plan, task)
        }
    }

    /// Must be made on the runtime (it keeps its handle) and used off it.
    pub(crate) fn new(
        store: Arc<dyn Store>,
        plan: &crate::store::PlanRecord,
        task: &crate::store::TaskRecord,
    ) -> ParkedFence {
        ParkedFence {
            mark: queue_mark(store.as_ref(), plan),
            store,
            plan_id: plan.id.clone(),
            task_id: task.id.clone(),
            epoch: task.epoch,
            reason: super::delivery::READY_TO_MERGE,
            rt: Handle::current(),
        }
    }
}

impl DeliveryFence for ParkedFence {
    fn epoch(&self) -> i64 {
        self.epoch
    }

    fn queue_mark(&self) -> String {
        self.mark.clone()
    }

    fn still_ours(&self) -> Result<bool, String> {
        let get = || self.store.get_task(&self.plan_id, &self.task_id);
        let t = self
            .rt
            .block_on(retry_transient(FENCE_TRIES, get))
            .map_err(|e| e.to_string())?;
        Ok(t.status == crate::domain::Status::HumanLoop
            && t.reason.as_deref() == Some(self.reason)
            && t.epoch == self.epoch)
    }

    fn recorded(&self, epoch: i64) -> Result<bool, String> {
        recorded(&self.rt, &self.store, &self.plan_id, &self.task_id, epoch)
    }
}
