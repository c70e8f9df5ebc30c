//! Writing an ended attempt's outcome to the queue: DONE, a retry with its backoff, a final
//! failure, a park, a release, or a rate limit that pauses the agent for every worker.

use super::executor::{AttemptOutcome, Executor};
use crate::domain::rate_limit::{PauseNote, limit_kind, pause_for};
use crate::domain::retry::backoff_after;
use crate::domain::{Status, Usd};
use crate::store::{FailMode, Lease, Outcome, Store, StoreError, StoreResult, event_types};
use std::time::Duration;

/// The attempt whose outcome is written.
pub(super) struct Ended<'a> {
    pub lease: Lease,
    pub plan_id: &'a str,
    pub task_id: &'a str,
    /// Spend already written while it ran.
    pub reported: Usd,
}

/// Writes an attempt's outcome; returns a backoff when the task was sent back for a retry,
/// and the agent's pause when it hit a rate limit.
pub(super) async fn settle(
    store: &dyn Store,
    executor: &dyn Executor,
    r: Ended<'_>,
    outcome: AttemptOutcome,
    cooldown: Duration,
    retry_backoff: &[u64],
) -> StoreResult<(Option<Duration>, Option<PauseNote>)> {
    if let AttemptOutcome::RateLimited {
        cost,
        agent,
        message,
        evidence,
    } = outcome
    {
        let pause = pause_for(&message, chrono::Local::now().fixed_offset(), cooldown);
        let note = PauseNote {
            agent,
            until: pause.until,
            reason: limit_kind(&message).to_string(),
        };
        let mut payload = evidence;
        if let Some(m) = payload.as_object_mut() {
            m.insert("pause".into(), note.payload(pause.parsed));
        }
        let o = Outcome {
            cost: cost - r.reported,
            reason: Some("rate_limited".into()),
            payload,
        };
        return match store.release(r.lease, &o).await {
            Ok(_) => {
                tracing::warn!(task = %r.task_id, "{}", note.label(&chrono::Local));
                crate::store::record_event(
                    store,
                    event_types::AGENT_PAUSED,
                    r.plan_id,
                    Some(r.task_id),
                    note.payload(pause.parsed),
                )
                .await;
                Ok((None, Some(note)))
            }
            // Reclaimed meanwhile; the limit is real all the same.
            Err(StoreError::Stale { .. }) => Ok((None, Some(note))),
            Err(e) => Err(e),
        };
    }
    let rest = |cost: Usd| cost - r.reported;
    let result =
        match outcome {
            AttemptOutcome::Abandoned | AttemptOutcome::RateLimited { .. } => {
                return Ok((None, None));
            }
            AttemptOutcome::Done { cost, evidence } => {
                let o = Outcome {
                    cost: rest(cost),
                    reason: None,
                    payload: evidence,
                };
                store.complete(r.lease, &o).await.map(|_| None)
            }
            AttemptOutcome::Failed {
                cost,
                reason,
                retry,
                evidence,
            } => {
                let o = Outcome {
                    cost: rest(cost),
                    reason: Some(reason),
                    payload: evidence,
                };
                let mode = if retry {
                    FailMode::Retry
                } else {
                    FailMode::Final
                };
                match store.fail(r.lease, mode, &o).await {
                    Ok(t) if t.status == Status::Failed => {
                        executor.failed_for_good(r.plan_id, r.task_id).await;
                        Ok(None)
                    }
                    Ok(t) => Ok((t.status == Status::Pending)
                        .then(|| backoff_after(t.attempts, retry_backoff))),
                    Err(e) => Err(e),
                }
            }
            AttemptOutcome::Parked {
                cost,
                park,
                reason,
                evidence,
            } => {
                let o = Outcome {
                    cost: rest(cost),
                    reason: Some(reason),
                    payload: evidence,
                };
                store.park(r.lease, park, &o).await.map(|_| None)
            }
            AttemptOutcome::Released { cost, reason } => {
                let o = Outcome {
                    cost: rest(cost),
                    reason: Some(reason),
                    payload: serde_json::Value::Null,
                };
                store.release(r.lease, &o).await.map(|_| None)
            }
        };
    match result {
        Ok(backoff) => Ok((backoff, None)),
        // Reclaimed while we finished: the new owner's word counts, ours is dropped.
        Err(StoreError::Stale { .. }) => Ok((None, None)),
        Err(e) => Err(e),
    }
}
