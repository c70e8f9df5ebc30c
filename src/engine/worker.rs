//! The worker loop: fills slots with claims, heartbeats leases, runs the reaper, watches the
//! budget and the clock, and settles each attempt's outcome in the store.

use super::budget::{BudgetState, budget_state, task_over_budget};
use super::control::{AttemptHandle, StopLevel, StopReason, attempt_control};
use super::executor::{AttemptOutcome, Executor};
use super::outcome::RunEnd;
use crate::domain::graph::normalize_key_file;
use crate::domain::{Status, Usd};
use crate::store::{
    ClaimRequest, FailMode, Lease, NewEvent, Outcome, PlanRecord, Store, StoreError, StoreResult,
    event_types,
};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinSet;

#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub worker_id: String,
    /// Only this plan's tasks (a `run`), or any plan (a `worker`).
    pub plan_id: Option<String>,
    pub slots: usize,
    pub tags: Vec<String>,
    pub lease: Duration,
    pub heartbeat: Duration,
    pub reaper_interval: Duration,
    pub poll: Duration,
    pub grace: Duration,
    pub run_timeout: Option<Duration>,
    pub default_estimate: Usd,
    /// Backoff before a retried task may be claimed again, by failed attempt (seconds).
    pub retry_backoff: Vec<u64>,
    /// `run` ends when its plan has nothing left to do; a `worker` keeps waiting for work.
    pub exit_when_idle: bool,
}

impl EngineConfig {
    pub fn new(worker_id: impl Into<String>) -> Self {
        EngineConfig {
            worker_id: worker_id.into(),
            plan_id: None,
            slots: 3,
            tags: Vec::new(),
            lease: Duration::from_secs(30),
            heartbeat: Duration::from_secs(10),
            reaper_interval: Duration::from_secs(5),
            poll: Duration::from_secs(1),
            grace: Duration::from_secs(30),
            run_timeout: None,
            default_estimate: Usd::ZERO,
            retry_backoff: vec![5, 10, 20, 40, 60],
            exit_when_idle: true,
        }
    }
}

/// What a run did.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RunSummary {
    pub end: RunEnd,
    pub exit_code: i32,
    pub attempts: u64,
    pub done: u64,
    pub failed: u64,
    pub skipped: u64,
    pub total: u64,
    pub cost_usd: f64,
    pub elapsed_sec: f64,
    /// Tasks that can never run in this plan (dependencies failed, or waiting for a human).
    pub stuck: Vec<String>,
}

struct Running {
    lease: Lease,
    plan_id: String,
    task_id: String,
    handle: AttemptHandle,
    key_files: Vec<String>,
    task_budget: Option<Usd>,
    /// Spend already written to the store with `add_cost`.
    reported: Usd,
    abandoned: bool,
}

pub struct Engine {
    store: Arc<dyn Store>,
    executor: Arc<dyn Executor>,
    cfg: EngineConfig,
    shutdown: watch::Receiver<StopLevel>,
}

impl Engine {
    /// `shutdown` carries the operator's stop requests: `Drain` only stops claiming; `Graceful`
    /// (Ctrl-C / SIGTERM) stops claiming and lets agents finish within the grace period; `Now`
    /// kills them.
    pub fn new(
        store: Arc<dyn Store>,
        executor: Arc<dyn Executor>,
        cfg: EngineConfig,
        shutdown: watch::Receiver<StopLevel>,
    ) -> Engine {
        Engine {
            store,
            executor,
            cfg,
            shutdown,
        }
    }

    pub async fn run(mut self) -> StoreResult<RunSummary> {
        let started = Instant::now();
        let slots = self.cfg.slots.max(1);
        let run_deadline = self.cfg.run_timeout.map(|t| started + t);
        let mut running: HashMap<i64, Running> = HashMap::new();
        let mut joins: JoinSet<(i64, AttemptOutcome)> = JoinSet::new();
        let mut task_ids: HashMap<tokio::task::Id, i64> = HashMap::new();
        let mut not_before: HashMap<i64, Instant> = HashMap::new();
        let mut key_files = self.load_key_files().await?;
        let mut end: Option<RunEnd> = None;
        let mut stop_claiming = false;
        let mut graceful_since: Option<Instant> = None;
        let mut attempts = 0u64;
        let mut warned_budget: HashSet<String> = HashSet::new();
        let mut next_heartbeat = Instant::now() + self.cfg.heartbeat;
        let mut next_reap = Instant::now();
        let mut idle_check = true;
        let mut shutdown_closed = false;

        loop {
            let now = Instant::now();

            // The operator's stop requests.
            let level = *self.shutdown.borrow();
            if level >= StopLevel::Drain && !stop_claiming {
                stop_claiming = true;
                end.get_or_insert(RunEnd::Interrupted);
            }
            // Graceful implies Drain, handled just above.
            if level >= StopLevel::Graceful && graceful_since.is_none() {
                graceful_since = Some(now);
                for r in running.values() {
                    r.handle.stop(StopLevel::Graceful, StopReason::Shutdown);
                }
            }
            if level >= StopLevel::Now
                || graceful_since.is_some_and(|t| now.duration_since(t) >= self.cfg.grace)
            {
                for r in running.values() {
                    r.handle.stop(StopLevel::Now, StopReason::Shutdown);
                }
            }

            // The run's own clock.
            if let Some(deadline) = run_deadline
                && now >= deadline
                && end != Some(RunEnd::TimedOut)
                && !matches!(end, Some(RunEnd::Interrupted | RunEnd::BudgetExhausted))
            {
                end = Some(RunEnd::TimedOut);
                stop_claiming = true;
                for r in running.values() {
                    r.handle.stop(StopLevel::Now, StopReason::RunTimeout);
                }
            }

            if now >= next_reap {
                next_reap = now + self.cfg.reaper_interval;
                match self.store.reap().await {
                    Ok(report) => {
                        if !report.requeued.is_empty()
                            || !report.failed.is_empty()
                            || !report.timed_out.is_empty()
                        {
                            tracing::info!(?report, "reaper returned tasks");
                            idle_check = true;
                        }
                    }
                    Err(e) => tracing::warn!("reaper: {e}"),
                }
            }

            if now >= next_heartbeat {
                next_heartbeat = now + self.cfg.heartbeat;
                for r in running.values_mut() {
                    if r.abandoned {
                        continue;
                    }
                    match self.store.heartbeat(r.lease, self.cfg.lease).await {
                        Ok(()) => {}
                        Err(StoreError::Stale { .. }) => {
                            tracing::warn!(task = %r.task_id, "lease lost; stopping the attempt");
                            r.abandoned = true;
                            r.handle.stop(StopLevel::Now, StopReason::LeaseLost);
                        }
                        Err(e) => tracing::warn!(task = %r.task_id, "heartbeat failed: {e}"),
                    }
                }
            }

            // Spend while agents run: written to the store, checked against both budgets.
            if self.watch_budget(&mut running, &mut warned_budget).await?
                && end != Some(RunEnd::BudgetExhausted)
            {
                end = Some(RunEnd::BudgetExhausted);
                stop_claiming = true;
                for r in running.values() {
                    r.handle.stop(StopLevel::Now, StopReason::BudgetExhausted);
                }
            }

            // Fill free slots.
            let mut claimed_any = false;
            while !stop_claiming && running.len() < slots {
                not_before.retain(|_, t| *t > Instant::now());
                let held: HashSet<String> = running
                    .values()
                    .flat_map(|r| r.key_files.iter().cloned())
                    .collect();
                let mut exclude: Vec<i64> = not_before.keys().copied().collect();
                if !held.is_empty() {
                    exclude.extend(
                        key_files
                            .iter()
                            .filter(|(_, files)| files.iter().any(|f| held.contains(f)))
                            .map(|(pk, _)| *pk),
                    );
                }
                exclude.extend(running.keys().copied());
                let mut req = ClaimRequest::new(self.cfg.worker_id.clone());
                req.plan_id = self.cfg.plan_id.clone();
                req.tags = self.cfg.tags.clone();
                req.lease = self.cfg.lease;
                req.default_estimate = self.cfg.default_estimate;
                req.exclude = exclude;
                let Some(claimed) = self.store.claim(&req).await? else {
                    break;
                };
                claimed_any = true;
                attempts += 1;
                let plan = self.store.get_plan(&claimed.task.plan_id).await?;
                let pk = claimed.lease.task_pk;
                key_files.entry(pk).or_insert_with(|| {
                    claimed
                        .task
                        .spec
                        .key_files
                        .iter()
                        .map(|f| normalize_key_file(f))
                        .collect()
                });
                let (handle, ctl) = attempt_control();
                running.insert(
                    pk,
                    Running {
                        lease: claimed.lease,
                        plan_id: claimed.task.plan_id.clone(),
                        task_id: claimed.task.id.clone(),
                        handle,
                        key_files: key_files.get(&pk).cloned().unwrap_or_default(),
                        task_budget: claimed.task.spec.budget_usd,
                        reported: Usd::ZERO,
                        abandoned: false,
                    },
                );
                let executor = self.executor.clone();
                let abort =
                    joins.spawn(async move { (pk, executor.execute(claimed, plan, ctl).await) });
                task_ids.insert(abort.id(), pk);
            }

            // Finished?
            if running.is_empty() {
                if stop_claiming {
                    break;
                }
                if self.cfg.exit_when_idle && (idle_check || !claimed_any) {
                    idle_check = false;
                    if let Some(done) = self.plan_finished(&not_before).await? {
                        end = Some(done);
                        break;
                    }
                }
            }

            // Wait for something to happen.
            let mut wake = (now + self.cfg.poll).min(next_heartbeat).min(next_reap);
            if let Some(t) = not_before.values().min() {
                wake = wake.min(*t);
            }
            if let Some(d) = run_deadline {
                wake = wake.min(d);
            }
            if let Some(t) = graceful_since {
                wake = wake.min(t + self.cfg.grace);
            }
            if !running.is_empty() {
                // Spend is checked at least every second while agents run.
                wake = wake.min(Instant::now() + Duration::from_secs(1));
            }
            let sleep = wake.saturating_duration_since(Instant::now());
            let can_claim = !stop_claiming && running.len() < slots;
            tokio::select! {
                Some(joined) = joins.join_next_with_id(), if !joins.is_empty() => {
                    match joined {
                        Ok((id, (pk, outcome))) => {
                            task_ids.remove(&id);
                            if let Some(r) = running.remove(&pk) {
                                if let Some(backoff) = self.settle(&r, outcome).await? {
                                    not_before.insert(pk, Instant::now() + backoff);
                                }
                                // Spend settled at the end of an attempt crosses thresholds too.
                                let plan = self.store.get_plan(&r.plan_id).await?;
                                if self.note_budget(&plan, &mut warned_budget).await?
                                    && end != Some(RunEnd::BudgetExhausted)
                                {
                                    end = Some(RunEnd::BudgetExhausted);
                                    stop_claiming = true;
                                    for r in running.values() {
                                        r.handle.stop(StopLevel::Now, StopReason::BudgetExhausted);
                                    }
                                }
                            }
                        }
                        Err(e) => {
                            // A panicking attempt must not lose its task: send it back for a retry.
                            tracing::error!("attempt task panicked: {e}");
                            if let Some(pk) = task_ids.remove(&e.id())
                                && let Some(r) = running.remove(&pk)
                            {
                                let outcome = AttemptOutcome::Failed {
                                    cost: r.handle.spent(),
                                    reason: "attempt_panicked".into(),
                                    retry: true,
                                    evidence: serde_json::json!({ "panic": e.to_string() }),
                                };
                                self.settle(&r, outcome).await?;
                            }
                        }
                    }
                    idle_check = true;
                }
                // Waiting for work only makes sense with a slot to fill: the store answers at
                // once while events are newer than the last fruitless claim, and with every
                // slot busy no claim is ever made, so that wait would spin.
                _ = self.store.wait_for_work(sleep), if can_claim => {}
                _ = tokio::time::sleep(sleep), if !can_claim => {}
                changed = self.shutdown.changed(), if !shutdown_closed => {
                    // A dropped sender never speaks again; stop listening instead of spinning.
                    shutdown_closed = changed.is_err();
                }
            }
        }

        // Nothing may be left leased by us.
        while let Some(joined) = joins.join_next().await {
            if let Ok((pk, outcome)) = joined
                && let Some(r) = running.remove(&pk)
            {
                self.settle(&r, outcome).await?;
            }
        }
        self.summary(end.unwrap_or(RunEnd::AllDone), attempts, started)
            .await
    }

    async fn load_key_files(&self) -> StoreResult<HashMap<i64, Vec<String>>> {
        let Some(plan_id) = &self.cfg.plan_id else {
            return Ok(HashMap::new());
        };
        let tasks = self.store.list_tasks(plan_id).await?;
        Ok(tasks
            .into_iter()
            .filter(|t| !t.status.is_terminal())
            .map(|t| {
                (
                    t.pk,
                    t.spec
                        .key_files
                        .iter()
                        .map(|f| normalize_key_file(f))
                        .collect(),
                )
            })
            .collect())
    }

    /// Writes running spend to the store; returns true when a plan budget is exhausted.
    async fn watch_budget(
        &self,
        running: &mut HashMap<i64, Running>,
        warned: &mut HashSet<String>,
    ) -> StoreResult<bool> {
        let mut exhausted = false;
        for r in running.values_mut() {
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
                        r.reported = spent;
                        exhausted |= self.note_budget(&plan, warned).await?;
                    }
                    Err(StoreError::Stale { .. }) => {
                        r.abandoned = true;
                        r.handle.stop(StopLevel::Now, StopReason::LeaseLost);
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(exhausted)
    }

    /// Emits the 80 % warning once per plan; true when the plan is exhausted.
    async fn note_budget(
        &self,
        plan: &PlanRecord,
        warned: &mut HashSet<String>,
    ) -> StoreResult<bool> {
        match budget_state(plan.budget, plan.spent) {
            BudgetState::Ok => Ok(false),
            BudgetState::Warning => {
                if warned.insert(plan.id.clone()) {
                    self.budget_event(plan, event_types::BUDGET_WARNING).await?;
                }
                Ok(false)
            }
            BudgetState::Exhausted => {
                if warned.insert(format!("{}\u{0}exhausted", plan.id)) {
                    self.budget_event(plan, event_types::BUDGET_EXHAUSTED)
                        .await?;
                }
                Ok(true)
            }
        }
    }

    async fn budget_event(&self, plan: &PlanRecord, kind: &str) -> StoreResult<()> {
        self.store
            .append_event(NewEvent {
                event_type: kind.to_string(),
                plan_id: Some(plan.id.clone()),
                worker_id: Some(self.cfg.worker_id.clone()),
                payload: serde_json::json!({
                    "spent_usd": plan.spent.as_f64(),
                    "budget_usd": plan.budget.map(Usd::as_f64),
                }),
                ..Default::default()
            })
            .await?;
        Ok(())
    }

    /// Writes an attempt's outcome; returns a backoff when the task was sent back for a retry.
    async fn settle(&self, r: &Running, outcome: AttemptOutcome) -> StoreResult<Option<Duration>> {
        if r.abandoned {
            return Ok(None);
        }
        let rest = |cost: Usd| cost - r.reported;
        let result = match outcome {
            AttemptOutcome::Abandoned => return Ok(None),
            AttemptOutcome::Done { cost, evidence } => {
                let o = Outcome {
                    cost: rest(cost),
                    reason: None,
                    payload: evidence,
                };
                self.store.complete(r.lease, &o).await.map(|_| None)
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
                self.store.fail(r.lease, mode, &o).await.map(|t| {
                    (t.status == Status::Pending).then(|| {
                        let i = (t.attempts.max(1) as usize - 1)
                            .min(self.cfg.retry_backoff.len().saturating_sub(1));
                        Duration::from_secs(self.cfg.retry_backoff.get(i).copied().unwrap_or(5))
                    })
                })
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
                self.store.park(r.lease, park, &o).await.map(|_| None)
            }
            AttemptOutcome::Released { cost, reason } => {
                let o = Outcome {
                    cost: rest(cost),
                    reason: Some(reason),
                    payload: serde_json::Value::Null,
                };
                self.store.release(r.lease, &o).await.map(|_| None)
            }
        };
        match result {
            Ok(backoff) => Ok(backoff),
            // Reclaimed while we finished: the new owner's word counts, ours is dropped.
            Err(StoreError::Stale { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `Some(end)` when the plan has nothing left that this run could do.
    async fn plan_finished(
        &self,
        not_before: &HashMap<i64, Instant>,
    ) -> StoreResult<Option<RunEnd>> {
        let Some(plan_id) = &self.cfg.plan_id else {
            return Ok(None);
        };
        if !not_before.is_empty() {
            return Ok(None);
        }
        let tasks = self.store.list_tasks(plan_id).await?;
        let plan = self.store.get_plan(plan_id).await?;
        let leased = tasks.iter().any(|t| t.status.is_leased());
        if leased {
            return Ok(None); // another worker is still on it
        }
        let ready = tasks
            .iter()
            .any(|t| t.status == Status::Pending && t.pending_deps == 0);
        if ready {
            if plan.paused {
                return Ok(None); // waits for `plan resume`
            }
            // Ready work that this worker could not claim: the budget refused it, or its tags do
            // not match (then another worker must take it, and this run cannot finish it).
            return Ok(Some(if plan.budget.is_some() {
                RunEnd::BudgetExhausted
            } else {
                RunEnd::SomeFailed
            }));
        }
        let failed = tasks.iter().any(|t| {
            matches!(
                t.status,
                Status::Failed | Status::Blocked | Status::HumanLoop
            ) || (t.status == Status::Pending && t.pending_deps > 0)
        });
        Ok(Some(if failed {
            RunEnd::SomeFailed
        } else {
            RunEnd::AllDone
        }))
    }

    async fn summary(
        &self,
        end: RunEnd,
        attempts: u64,
        started: Instant,
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
            elapsed_sec: started.elapsed().as_secs_f64(),
            stuck: Vec::new(),
        };
        if let Some(plan_id) = &self.cfg.plan_id {
            let tasks = self.store.list_tasks(plan_id).await?;
            let plan = self.store.get_plan(plan_id).await?;
            s.total = tasks.len() as u64;
            s.done = tasks.iter().filter(|t| t.status == Status::Done).count() as u64;
            s.failed = tasks.iter().filter(|t| t.status == Status::Failed).count() as u64;
            s.skipped = tasks.iter().filter(|t| t.status == Status::Skipped).count() as u64;
            s.cost_usd = plan.spent.as_f64();
            s.stuck = tasks
                .iter()
                .filter(|t| {
                    matches!(t.status, Status::Blocked | Status::HumanLoop)
                        || (t.status == Status::Pending && t.pending_deps > 0)
                })
                .map(|t| t.id.clone())
                .collect();
        }
        Ok(s)
    }
}
