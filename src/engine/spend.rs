//! Spend against the budgets: running spend written to the queue, the task's and the plan's
//! budget checked, the 80 % warning and the exhaustion said once per plan, and a spent plan's
//! attempts stopped (a run of that plan ends; a worker serving many goes on with the rest).

use super::budget::{BudgetState, budget_state, task_over_budget};
use super::control::{StopLevel, StopReason};
use super::schedule::Scheduler;
use super::turn::Turn;
use crate::domain::Usd;
use crate::store::{NewEvent, PlanRecord, Store, StoreError, StoreResult, event_types};
use std::collections::HashSet;

pub(super) struct Budgets<'a> {
    pub store: &'a dyn Store,
    pub worker_id: &'a str,
    /// A run of one plan (not a worker serving every plan).
    pub one_plan: bool,
}

impl Budgets<'_> {
    /// A plan's budget is spent: a run of that plan stops; a worker serving many plans stops
    /// only that plan's attempts (the claim no longer offers its tasks) and goes on with the rest.
    pub(super) fn exhausted(&self, s: &mut Scheduler, t: &mut Turn, plan_id: &str) {
        if self.one_plan {
            if s.budget_spent() {
                t.stop_all(StopLevel::Now, StopReason::BudgetExhausted);
            }
            return;
        }
        if t.exhausted.insert(plan_id.to_string()) {
            tracing::warn!(
                plan = plan_id,
                "plan {plan_id}: budget exhausted; its running attempts are stopped and no more \
                 of its tasks are taken; serving the other plans"
            );
        }
        for r in t.running.values().filter(|r| r.plan_id == plan_id) {
            r.handle.stop(StopLevel::Now, StopReason::BudgetExhausted);
        }
    }

    /// Writes running spend to the store and checks both budgets (the task's, the plan's).
    pub(super) async fn watch(&self, s: &mut Scheduler, t: &mut Turn) -> StoreResult<()> {
        let mut exhausted: Vec<String> = Vec::new();
        for r in t.running.values_mut() {
            if r.abandoned {
                continue;
            }
            let spent = r.handle.spent();
            if task_over_budget(r.task_budget, spent) {
                r.handle.stop(StopLevel::Now, StopReason::TaskBudget);
            }
            if spent > r.reported {
                let delta = spent - r.reported;
                match self.store.add_cost(r.lease, delta).await {
                    Ok(plan) => {
                        t.outage.ok();
                        r.reported = spent;
                        if self.note(&plan, &mut t.warned_budget).await? {
                            exhausted.push(plan.id.clone());
                        }
                    }
                    Err(StoreError::Stale { .. }) => {
                        r.abandoned = true;
                        r.handle.stop(StopLevel::Now, StopReason::LeaseLost);
                    }
                    Err(e) => {
                        // The spend stays unreported and is written with the next success.
                        t.outage
                            .absorb(&format!("recording the spend of {}", r.task_id), e)?;
                        break;
                    }
                }
            }
        }
        for plan_id in exhausted {
            self.exhausted(s, t, &plan_id);
        }
        Ok(())
    }

    /// Emits the 80 % warning once per plan; true when the plan is exhausted.
    pub(super) async fn note(
        &self,
        plan: &PlanRecord,
        warned: &mut HashSet<String>,
    ) -> StoreResult<bool> {
        match budget_state(plan.budget, plan.spent) {
            BudgetState::Ok => Ok(false),
            BudgetState::Warning => {
                if warned.insert(plan.id.clone()) {
                    self.budget_event(plan, event_types::BUDGET_WARNING).await;
                }
                Ok(false)
            }
            BudgetState::Exhausted => {
                if warned.insert(format!("{}\u{0}exhausted", plan.id)) {
                    self.budget_event(plan, event_types::BUDGET_EXHAUSTED).await;
                }
                Ok(true)
            }
        }
    }

    /// Budget events are notices: a store that cannot take one now costs the notice, never
    /// the run.
    async fn budget_event(&self, plan: &PlanRecord, kind: &str) {
        let appended = self
            .store
            .append_event(NewEvent {
                event_type: kind.to_string(),
                plan_id: Some(plan.id.clone()),
                worker_id: Some(self.worker_id.to_string()),
                payload: serde_json::json!({
                    "spent_usd": plan.spent.as_f64(),
                    "budget_usd": plan.budget.map(Usd::as_f64),
                }),
                ..Default::default()
            })
            .await;
        if let Err(e) = appended {
            tracing::warn!(plan = %plan.id, "recording {kind}: {e}");
        }
    }
}
