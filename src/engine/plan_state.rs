//! Where a run's plan stands (or, for a worker serving every plan, the queue): whether the
//! engine has anything left to do, and the summary a run ends with. Reads of the store only.

use super::outcome::{RunEnd, RunSummary};
use crate::domain::Status;
use crate::store::{Event, EventFilter, Store, StoreResult, TaskRecord, event_types};
use std::time::Duration;

/// `Some(end)` when nothing is left to do: in `plan_id`, or (a worker serving every plan, `None`)
/// in any plan. `watching`: this engine claims nothing (`--watch`), so ready work is the other
/// workers' to do and the plan is not over while any is left.
pub(super) async fn nothing_left(
    store: &dyn Store,
    plan_id: Option<&str>,
    watching: bool,
) -> StoreResult<Option<RunEnd>> {
    if let Some(plan_id) = plan_id {
        return plan_state(store, plan_id, false, watching).await;
    }
    let mut budget_blocked = false;
    for p in store.list_plans().await? {
        let c = &p.counts;
        let open = c.get(Status::Pending) + c.get(Status::Claimed) + c.get(Status::InProgress);
        if open == 0 {
            continue;
        }
        match plan_state(store, &p.plan.id, true, watching).await? {
            None => return Ok(None),
            Some(RunEnd::BudgetExhausted) => budget_blocked = true,
            Some(_) => {}
        }
    }
    // Work is left only where the budget is spent: that is the one thing that stopped us.
    Ok(Some(if budget_blocked {
        RunEnd::BudgetExhausted
    } else {
        RunEnd::AllDone
    }))
}

/// `Some(end)` when `plan_id` has nothing left that this engine could do. `among_many`: a
/// worker serving every plan does not wait for a paused one. `watching`: ready work is the
/// other workers' to do, so it is not over.
async fn plan_state(
    store: &dyn Store,
    plan_id: &str,
    among_many: bool,
    watching: bool,
) -> StoreResult<Option<RunEnd>> {
    // One aggregate, not every task of the plan: an idle engine asks this after every
    // change, and a plan may have 100,000 tasks.
    let c = store.counts(plan_id).await?;
    if c.get(Status::Claimed) + c.get(Status::InProgress) > 0 {
        return Ok(None); // another worker is still on it
    }
    if c.ready > 0 && watching {
        return Ok(None);
    }
    if c.ready > 0 {
        let plan = store.get_plan(plan_id).await?;
        if plan.paused {
            // waits for `plan resume`
            return Ok((among_many).then_some(RunEnd::AllDone));
        }
        // Ready work that this worker could not claim: the budget refused it, or its tags do
        // not match (then another worker must take it, and this run cannot finish it).
        return Ok(Some(if plan.budget.is_some() {
            RunEnd::BudgetExhausted
        } else {
            RunEnd::SomeFailed
        }));
    }
    // Nothing ready: PENDING tasks left wait for dependencies that will never be DONE.
    let failed = c.get(Status::Failed)
        + c.get(Status::Blocked)
        + c.get(Status::HumanLoop)
        + c.get(Status::Pending)
        > 0;
    Ok(Some(if failed {
        RunEnd::SomeFailed
    } else {
        RunEnd::AllDone
    }))
}

/// The summary a run ends with; the counts and lists are `plan_id`'s (none for a worker
/// serving every plan).
pub(super) async fn summary(
    store: &dyn Store,
    plan_id: Option<&str>,
    end: RunEnd,
    attempts: u64,
    elapsed: Duration,
) -> StoreResult<RunSummary> {
    let mut s = RunSummary {
        end,
        exit_code: end.exit_code(),
        attempts,
        done: 0,
        failed: 0,
        skipped: 0,
        total: 0,
        cost_usd: 0.0,
        elapsed_sec: elapsed.as_secs_f64(),
        stuck: Vec::new(),
        unlanded: Vec::new(),
        unchanged: Vec::new(),
    };
    if let Some(plan_id) = plan_id {
        let tasks = store.list_tasks(plan_id).await?;
        let plan = store.get_plan(plan_id).await?;
        s.total = tasks.len() as u64;
        s.done = tasks.iter().filter(|t| t.status == Status::Done).count() as u64;
        s.failed = tasks.iter().filter(|t| t.status == Status::Failed).count() as u64;
        s.skipped = tasks.iter().filter(|t| t.status == Status::Skipped).count() as u64;
        s.cost_usd = plan.spent.as_f64();
        s.stuck = super::stuck::stuck_tasks(&tasks);
        if tasks
            .iter()
            .any(|t| t.status == Status::Done || super::landing::waits_to_merge(t))
        {
            let events = store
                .events(&EventFilter {
                    plan_id: Some(plan_id.to_string()),
                    ..Default::default()
                })
                .await?;
            s.unlanded = tasks
                .iter()
                .filter_map(|t| super::landing::unlanded_of(t, &events))
                .collect();
            s.unchanged = tasks
                .iter()
                .filter(|t| t.status == Status::Done && done_unchanged(t, &events))
                .map(|t| t.id.clone())
                .collect();
        }
    }
    Ok(s)
}

/// Whether the newest DONE of the task says its agent changed nothing.
fn done_unchanged(t: &TaskRecord, events: &[Event]) -> bool {
    events
        .iter()
        .rev()
        .filter(|e| e.task_id.as_deref() == Some(t.id.as_str()))
        .find(|e| e.event_type == event_types::TASK_DONE)
        .is_some_and(|e| e.payload["no_changes"].as_bool() == Some(true))
}
