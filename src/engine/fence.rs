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

pub struct StoreFence {
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
    pub fn new(
        store: Arc<dyn Store>,
        lease: Lease,
        extend: Duration,
        plan: &crate::store::PlanRecord,
        task_id: &str,
    ) -> StoreFence {
        let plan_id = plan.id.as_str();
        let mark = format!(
            "{}:{}:{}",
            store.info().backend,
            store.info().location,
            plan.created_at.timestamp_micros()
        );
        StoreFence {
            mark,
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
        let filter = EventFilter {
            plan_id: Some(self.plan_id.clone()),
            task_id: Some(self.task_id.clone()),
            ..Default::default()
        };
        let events = self
            .rt
            .block_on(retry_transient(FENCE_TRIES, || self.store.events(&filter)))
            .map_err(|e| e.to_string())?;
        Ok(events
            .iter()
            .any(|e| e.event_type == event_types::TASK_DONE && e.epoch == Some(epoch)))
    }
}
