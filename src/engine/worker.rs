//! The worker loop: carries out the scheduler's decisions (`schedule.rs`) against the store
//! and the attempts — fills slots with claims, heartbeats leases, runs the reaper, watches the
//! budget, settles each attempt's outcome — and tells it what happened.

use super::agent_limits::{Pauses, agent_limits, paused_agents};
use super::control::{StopLevel, StopReason, attempt_control};
use super::engine_config::EngineConfig;
use super::executor::{AttemptOutcome, Executor};
use super::outage::Outage;
use super::outcome::RunEnd;
pub use super::outcome::RunSummary;
use super::schedule::{Command, Idle, Scheduler, Timing, View};
use super::spend::Budgets;
use super::turn::{Running, Turn};
use crate::domain::Usd;
use crate::domain::rate_limit::PauseNote;
use crate::store::{ClaimRequest, Store, StoreError, StoreResult};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// With a store that wakes waiters for every change ([`Store::wakes_for_work`]), an idle engine
/// looks for work by itself only this often (a safety net); otherwise every `poll`.
const SAFETY_POLL: Duration = Duration::from_secs(30);

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

    /// Runs until the plan is done (or the worker idle, or stopped); what follows the queue (a
    /// project board, Jira) keeps in step meanwhile and gets a last sync before this returns.
    pub async fn run(self) -> StoreResult<RunSummary> {
        use super::follow::Follower;
        let mut followers: Vec<Follower> = Vec::new();
        for setup in &self.cfg.followers {
            match (setup.make)(self.store.clone()) {
                Ok(sync) => followers.push(Follower::spawn(sync, self.cfg.plan_id.clone())),
                Err(e) => tracing::warn!("{}: {e}", setup.name),
            }
        }
        let (stop_panes, panes_stopped) = watch::channel(false);
        let panes = self.cfg.panes.clone().map(|p| {
            super::panes::PanePublisher::new(self.store.clone(), p.sessions, p.takeover)
                .spawn(panes_stopped)
        });
        let result = self.run_queue().await;
        let _ = stop_panes.send(true);
        if let Some(p) = panes {
            // It removes what it published on the way out; a stuck store must not hold the end.
            let _ = tokio::time::timeout(Duration::from_secs(2), p).await;
        }
        for f in followers {
            f.finish().await;
        }
        result
    }

    /// The loop: the decisions are the [`Scheduler`]'s; this carries them out against the
    /// store and the attempts, and tells it what happened.
    async fn run_queue(mut self) -> StoreResult<RunSummary> {
        let started = Instant::now();
        let mut s = Scheduler::new(self.timing(started), started);
        let mut joins: JoinSet<(i64, AttemptOutcome)> = JoinSet::new();
        let mut task_ids: HashMap<tokio::task::Id, i64> = HashMap::new();
        let mut t = Turn {
            running: HashMap::new(),
            unsettled: Vec::new(),
            attempts: 0,
            warned_budget: HashSet::new(),
            exhausted: HashSet::new(),
            outage: Outage::new(self.cfg.store_outage, &self.store.info()),
            fatal: None,
            pauses: Pauses::default(),
        };
        let mut shutdown_closed = false;
        loop {
            let now = Instant::now();
            let level = *self.shutdown.borrow();
            for command in s.tick(now, level, &self.view(&t)) {
                self.carry_out(command, &mut s, &mut t).await?;
            }
            let claimed_any = self
                .claim(&mut s, &mut t, &mut joins, &mut task_ids)
                .await?;
            match s.idle(Instant::now(), &self.view(&t), claimed_any) {
                Idle::Exit => break,
                Idle::CheckFinished => {
                    let answer = self.finished(&s, &t).await;
                    let ended = match answer {
                        Ok(end) => {
                            t.outage.ok();
                            s.finished(Ok(end))
                        }
                        Err(e) => {
                            t.outage.absorb("checking whether the work is done", e)?;
                            s.finished(Err(()))
                        }
                    };
                    if ended == Idle::Exit {
                        break;
                    }
                }
                Idle::Report => self.report_idle(&mut s, &mut t, started).await,
                Idle::Busy => {
                    if let Some(tx) = &self.cfg.idle_reports {
                        tx.send_if_modified(|cur| cur.take().is_some());
                    }
                }
                Idle::Wait => {}
            }

            // Wait for something to happen: the timers, an attempt's end, or (with a slot to
            // fill) work.
            let now = Instant::now();
            let wake = s.wake(now, &self.view(&t));
            let sleep = wake.at.saturating_duration_since(now);
            let work_wait = wake
                .for_work
                .map(|at| at.saturating_duration_since(now))
                .unwrap_or_default();
            tokio::select! {
                Some(joined) = joins.join_next_with_id(), if !joins.is_empty() => {
                    match joined {
                        Ok((id, (pk, outcome))) => {
                            task_ids.remove(&id);
                            if let Some(r) = t.running.remove(&pk) {
                                t.unsettled.push((r, outcome));
                            }
                        }
                        Err(e) => {
                            // A panicking attempt must not lose its task: send it back for a retry.
                            tracing::error!("attempt task panicked: {e}");
                            if let Some(pk) = task_ids.remove(&e.id())
                                && let Some(r) = t.running.remove(&pk)
                            {
                                let outcome = AttemptOutcome::Failed {
                                    cost: r.handle.spent(),
                                    reason: "attempt_panicked".into(),
                                    retry: true,
                                    evidence: serde_json::json!({ "panic": e.to_string() }),
                                };
                                t.unsettled.push((r, outcome));
                            }
                        }
                    }
                    s.attempt_ended();
                }
                // Waiting for work only makes sense with a slot to fill: the store answers at
                // once while events are newer than the last fruitless claim, and with every
                // slot busy no claim is ever made, so that wait would spin.
                _ = self.store.wait_for_work(work_wait), if wake.for_work.is_some() => {
                    s.work_changed();
                }
                _ = tokio::time::sleep(sleep) => {}
                changed = self.shutdown.changed(), if !shutdown_closed => {
                    // A dropped sender never speaks again; stop listening instead of spinning.
                    shutdown_closed = changed.is_err();
                }
            }
        }

        // Nothing may be left leased by us: every attempt ends, every outcome is written (as
        // long as the store answers within the outage limit).
        while let Some(joined) = joins.join_next().await {
            if let Ok((pk, outcome)) = joined
                && let Some(r) = t.running.remove(&pk)
            {
                t.unsettled.push((r, outcome));
            }
        }
        while !t.unsettled.is_empty() && !t.outage.exceeded() {
            if t.outage.waiting() {
                tokio::time::sleep_until(t.outage.next_try().into()).await;
            }
            self.settle_pending(&mut s, &mut t).await?;
        }
        if let Some(e) = t.fatal.take() {
            return Err(e);
        }
        if t.outage.exceeded() {
            let e = t.outage.gave_up();
            tracing::error!("{e}");
            return Err(e);
        }
        let plan_state = if s.ends_as_the_plan_stands() {
            self.finished(&s, &t).await.ok().flatten()
        } else {
            None
        };
        let end = s.outcome(plan_state);
        loop {
            match self.summary(end, t.attempts, started).await {
                Ok(summary) => return Ok(summary),
                Err(e) => {
                    t.outage.absorb("summing up the run", e)?;
                    if t.outage.exceeded() {
                        return Err(t.outage.gave_up());
                    }
                    tokio::time::sleep_until(t.outage.next_try().into()).await;
                }
            }
        }
    }

    fn budgets(&self) -> Budgets<'_> {
        Budgets {
            store: self.store.as_ref(),
            worker_id: &self.cfg.worker_id,
            one_plan: self.cfg.plan_id.is_some(),
        }
    }

    /// The scheduler's settings from the engine's.
    fn timing(&self, started: Instant) -> Timing {
        Timing {
            slots: if self.cfg.observer {
                0
            } else {
                self.cfg.slots.max(1)
            },
            heartbeat: self.cfg.heartbeat,
            reaper_interval: self.cfg.reaper_interval,
            offline_after: self.cfg.offline_after,
            safety_poll: if self.store.wakes_for_work() {
                self.cfg.poll.max(SAFETY_POLL)
            } else {
                self.cfg.poll
            },
            poll: self.cfg.poll,
            grace: self.cfg.grace,
            run_deadline: self.cfg.run_timeout.map(|t| started + t),
            serving: self.cfg.idle_reports.is_some(),
            exit_when_idle: self.cfg.exit_when_idle,
            observer: self.cfg.observer,
        }
    }

    /// What the scheduler sees of the loop now.
    fn view(&self, t: &Turn) -> View {
        View {
            running: t.running.len(),
            unsettled: t.unsettled.len(),
            outage_waiting: t.outage.waiting(),
            in_outage: t.outage.in_outage(),
            outage_exceeded: t.outage.exceeded(),
            outage_next_try: Some(t.outage.next_try()),
            watched: self
                .cfg
                .idle_reports
                .as_ref()
                .is_some_and(|tx| tx.receiver_count() > 0),
        }
    }

    /// One of the scheduler's commands for the start of a turn. A command that needs the store
    /// waits while an earlier one of the turn found it failing.
    async fn carry_out(
        &self,
        command: Command,
        s: &mut Scheduler,
        t: &mut Turn,
    ) -> StoreResult<()> {
        match command {
            Command::StopAll(level, reason) => t.stop_all(level, reason),
            Command::GiveUp => {
                let e = t.outage.gave_up();
                tracing::error!("{e}");
                t.fatal = Some(e);
            }
            Command::Reap => {
                let returned = match self.store.reap().await {
                    Ok(report) => {
                        t.outage.ok();
                        let any = !report.requeued.is_empty()
                            || !report.failed.is_empty()
                            || !report.timed_out.is_empty();
                        if any {
                            tracing::info!(?report, "reaper returned tasks");
                        }
                        any
                    }
                    Err(e) => {
                        soft(&mut t.outage, "reaper", e);
                        false
                    }
                };
                if s.reaped(Instant::now(), returned, t.outage.waiting()) {
                    match self
                        .store
                        .mark_offline_workers(self.cfg.offline_after)
                        .await
                    {
                        Ok(gone) if !gone.is_empty() => {
                            tracing::warn!(workers = ?gone, "workers marked offline (no heartbeat)");
                        }
                        Ok(_) => {}
                        Err(e) => soft(&mut t.outage, "marking workers offline", e),
                    }
                }
            }
            Command::Heartbeat => {
                for r in t.running.values_mut() {
                    if r.abandoned {
                        continue;
                    }
                    // One call that hung for the pool's timeout is enough to know: the others
                    // wait for the backoff instead of hanging the loop in turn.
                    if t.outage.waiting() {
                        break;
                    }
                    match self.store.heartbeat(r.lease, self.cfg.lease).await {
                        Ok(()) => t.outage.ok(),
                        Err(StoreError::Stale { .. }) => {
                            tracing::warn!(task = %r.task_id, "lease lost; stopping the attempt");
                            r.abandoned = true;
                            r.handle.stop(StopLevel::Now, StopReason::LeaseLost);
                        }
                        Err(e) => soft(&mut t.outage, &format!("heartbeat of {}", r.task_id), e),
                    }
                }
            }
            // Spend while agents run: written to the store, checked against both budgets.
            Command::WatchBudget if !t.outage.waiting() => self.budgets().watch(s, t).await?,
            // Outcomes of finished attempts, in the order they ended.
            Command::Settle if !t.outage.waiting() => {
                self.settle_pending(s, t).await?;
                s.settled();
            }
            Command::WatchBudget | Command::Settle => {}
        }
        Ok(())
    }

    /// Fills free slots with claims while the scheduler says so; true when one was claimed.
    async fn claim(
        &self,
        s: &mut Scheduler,
        t: &mut Turn,
        joins: &mut JoinSet<(i64, AttemptOutcome)>,
        task_ids: &mut HashMap<tokio::task::Id, i64>,
    ) -> StoreResult<bool> {
        s.before_claims(Instant::now());
        let mut claimed_any = false;
        while s.may_claim(&self.view(t)) {
            let mut exclude = s.backing_off(Instant::now());
            exclude.extend(t.running.keys().copied());
            exclude.extend(t.unsettled.iter().map(|(r, _)| r.lease.task_pk));
            let mut req = ClaimRequest::new(self.cfg.worker_id.clone());
            req.plan_id = self.cfg.plan_id.clone();
            req.tags = self.cfg.tags.clone();
            req.lease = self.cfg.lease;
            req.default_estimate = self.cfg.default_estimate;
            req.exclude = exclude;
            if let Err(e) = t.pauses.refresh(self.store.as_ref()).await {
                soft(&mut t.outage, "reading agent pauses", e);
                break;
            }
            let wall = chrono::Utc::now();
            s.pause_ends(
                t.pauses
                    .next_end(wall)
                    .map(|end| Instant::now() + (end - wall).to_std().unwrap_or(Duration::ZERO)),
            );
            req.blocked_agents = paused_agents(&t.pauses, wall);
            req.default_agent = self.cfg.dispatch.default_agent.clone();
            req.agent_limits = agent_limits(&self.cfg.dispatch);
            let mut claimed = match self.store.claim(&req).await {
                Ok(Some(c)) => c,
                Ok(None) => {
                    t.outage.ok();
                    s.nothing_to_claim(Instant::now());
                    break;
                }
                Err(e) => {
                    t.outage.absorb("claim", e)?;
                    break;
                }
            };
            t.outage.ok();
            claimed_any = true;
            t.attempts += 1;
            let pk = claimed.lease.task_pk;
            let (handle, ctl) = attempt_control();
            let mut r = Running {
                lease: claimed.lease,
                plan_id: claimed.task.plan_id.clone(),
                task_id: claimed.task.id.clone(),
                agent: String::new(),
                handle,
                task_budget: claimed.task.spec.budget_usd,
                reported: Usd::ZERO,
                abandoned: false,
            };
            let plan = match self.store.get_plan(&claimed.task.plan_id).await {
                Ok(p) => p,
                Err(e) => {
                    // Claimed but cannot be run without its plan: give it back.
                    soft(&mut t.outage, "reading a claimed task's plan", e);
                    let back = AttemptOutcome::Released {
                        cost: Usd::ZERO,
                        reason: "store_error".into(),
                    };
                    t.unsettled.push((r, back));
                    break;
                }
            };
            // The claim chose its own agent, or (that one blocked) the first fallback its
            // plan allows: the executor runs the agent the task spec names.
            let own = crate::domain::dispatch::agent_of(
                &claimed.task.spec,
                &plan.spec,
                &self.cfg.dispatch.default_agent,
            );
            let agent = claimed.agent.clone();
            if agent != own {
                tracing::info!(task = %claimed.task.id, "{own} is paused or full: running on {agent}");
                claimed.task.spec.agent = Some(agent.clone());
            }
            r.agent = agent;
            t.running.insert(pk, r);
            let executor = self.executor.clone();
            let abort =
                joins.spawn(async move { (pk, executor.execute(claimed, plan, ctl).await) });
            task_ids.insert(abort.id(), pk);
        }
        Ok(claimed_any)
    }

    /// A serving engine with nothing to run sums up its plan for the console; receivers wake
    /// only when the outcome changed.
    async fn report_idle(&self, s: &mut Scheduler, t: &mut Turn, started: Instant) {
        let Some(tx) = self.cfg.idle_reports.clone() else {
            return;
        };
        match self.finished(s, t).await {
            Ok(Some(end)) => {
                t.outage.ok();
                match self.summary(end, t.attempts, started).await {
                    Ok(summary) => {
                        tx.send_if_modified(|cur| {
                            let key = |c: &RunSummary| {
                                (
                                    c.end,
                                    c.done,
                                    c.failed,
                                    c.skipped,
                                    c.stuck.clone(),
                                    c.unlanded.clone(),
                                )
                            };
                            let changed = cur.as_ref().map(key) != Some(key(&summary));
                            *cur = Some(summary);
                            changed
                        });
                        s.reported(Some(Instant::now()));
                    }
                    Err(e) => {
                        s.reported(None);
                        soft(&mut t.outage, "summing up the run", e);
                    }
                }
            }
            Ok(None) => {
                t.outage.ok();
                tx.send_if_modified(|cur| cur.take().is_some());
            }
            Err(e) => {
                s.reported(None);
                soft(&mut t.outage, "checking whether the work is done", e);
            }
        }
    }

    /// Writes the outcomes of ended attempts, oldest first, until the store stops answering.
    async fn settle_pending(&self, s: &mut Scheduler, t: &mut Turn) -> StoreResult<()> {
        while !t.unsettled.is_empty() {
            let result = {
                let (r, outcome) = &t.unsettled[0];
                self.settle(r, outcome.clone()).await
            };
            let task_id = t.unsettled[0].0.task_id.clone();
            match result {
                Ok((backoff, pause)) => {
                    t.outage.ok();
                    if let Some(p) = pause {
                        t.pauses.note(p);
                    }
                    let (r, _) = t.unsettled.remove(0);
                    if let Some(b) = backoff {
                        s.back_off(r.lease.task_pk, Instant::now() + b);
                    }
                    // Spend settled at the end of an attempt crosses thresholds too.
                    match self.store.get_plan(&r.plan_id).await {
                        Ok(plan) => {
                            let budgets = self.budgets();
                            if budgets.note(&plan, &mut t.warned_budget).await? {
                                budgets.exhausted(s, t, &plan.id);
                            }
                        }
                        Err(e) => soft(&mut t.outage, "reading the plan's budget", e),
                    }
                }
                Err(e) if e.is_transient() => {
                    t.outage.absorb(&format!("settling {task_id}"), e)?;
                    return Ok(());
                }
                Err(e) => {
                    // An answer, not a fault: nothing will make it succeed. The lease expires
                    // and the reaper returns the task.
                    tracing::error!(task = %task_id, "the queue refused the attempt's outcome: {e}");
                    t.unsettled.remove(0);
                }
            }
        }
        Ok(())
    }

    /// Writes an attempt's outcome (see [`super::settle::settle`]).
    async fn settle(
        &self,
        r: &Running,
        outcome: AttemptOutcome,
    ) -> StoreResult<(Option<Duration>, Option<PauseNote>)> {
        if r.abandoned {
            return Ok((None, None));
        }
        let ended = super::settle::Ended {
            lease: r.lease,
            plan_id: &r.plan_id,
            task_id: &r.task_id,
            reported: r.reported,
        };
        super::settle::settle(
            self.store.as_ref(),
            self.executor.as_ref(),
            ended,
            outcome,
            self.cfg.dispatch.cooldown,
            &self.cfg.retry_backoff,
        )
        .await
    }

    /// `Some(end)` when nothing is left that this engine could do: its plan's, or (a worker
    /// serving every plan) any plan's.
    async fn finished(&self, s: &Scheduler, t: &Turn) -> StoreResult<Option<RunEnd>> {
        // Retries waiting for their backoff, or tasks waiting for a paused agent: not done.
        if s.backs_off_any() || t.pauses.next_end(chrono::Utc::now()).is_some() {
            return Ok(None);
        }
        super::plan_state::nothing_left(
            self.store.as_ref(),
            self.cfg.plan_id.as_deref(),
            self.cfg.observer,
        )
        .await
    }

    async fn summary(
        &self,
        end: RunEnd,
        attempts: u64,
        started: Instant,
    ) -> StoreResult<RunSummary> {
        super::plan_state::summary(
            self.store.as_ref(),
            self.cfg.plan_id.as_deref(),
            end,
            attempts,
            started.elapsed(),
        )
        .await
    }
}

/// A store error where the engine can do without the answer: transient ones count towards the
/// outage, answers are logged.
fn soft(outage: &mut Outage, what: &str, e: StoreError) {
    if let Err(e) = outage.absorb(what, e) {
        tracing::warn!("{what}: {e}");
    }
}
