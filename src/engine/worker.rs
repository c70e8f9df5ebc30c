//! The worker loop: fills slots with claims, heartbeats leases, runs the reaper, watches the
//! budget and the clock, and settles each attempt's outcome in the store.

use super::budget::{BudgetState, budget_state, task_over_budget};
use super::control::{AttemptHandle, StopLevel, StopReason, attempt_control};
use super::dispatch::{Pauses, agent_limits, paused_agents};
use super::executor::{AttemptOutcome, Executor};
use super::outage::Outage;
use super::outcome::RunEnd;
use crate::domain::rate_limit::{PauseNote, limit_kind, pause_for};
use crate::domain::retry::backoff_after;
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
    /// Backoff before a retried task may be claimed again, by failed attempt (seconds; see
    /// [`crate::domain::retry::backoff`], empty means the default schedule).
    pub retry_backoff: Vec<u64>,
    /// `run` ends when its plan has nothing left to do; a `worker` keeps waiting for work
    /// (unless `--until-idle`).
    pub exit_when_idle: bool,
    /// How long the store may fail with transient errors before the engine stops its agents and
    /// gives up; agents keep running meanwhile.
    pub store_outage: Duration,
    /// Workers whose heartbeat is older than this are marked offline by the reaper pass
    /// (zero: never).
    pub offline_after: Duration,
    /// The console's engine: it serves its plan until stopped instead of ending when nothing
    /// is left, and says here what the run would have ended with each time it runs out of
    /// work (`None` once it has work again). Work that arrives later (merged in, reset, sent
    /// back) runs without a restart.
    pub idle_reports: Option<Arc<watch::Sender<Option<RunSummary>>>>,
    /// Claims nothing: a console that cannot run the plan's tasks (an agent is missing) and
    /// watches other workers run them.
    pub observer: bool,
    /// The project board kept in step while the engine runs (`[github.project]`).
    pub board: Option<BoardSetup>,
    /// Jira issues transitioned in lock-step with their tasks (`[jira]`).
    pub jira: Option<JiraSetup>,
    /// Remote panes: the sessions whose terminals are published while a console watches.
    pub panes: Option<PanesSetup>,
    /// Agents paused by rate limits, `max_parallel` per agent, fallbacks.
    pub dispatch: super::dispatch::DispatchConfig,
}

/// What the engine's pane publisher needs (`[remote]`).
#[derive(Clone)]
pub struct PanesSetup {
    pub sessions: super::sessions::SessionRegistry,
    /// Viewers' keys reach the agents (`[remote] takeover`).
    pub takeover: bool,
}

impl std::fmt::Debug for PanesSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PanesSetup")
            .field("takeover", &self.takeover)
            .finish_non_exhaustive()
    }
}

/// What the engine's Jira sync needs.
#[derive(Clone)]
pub struct JiraSetup {
    pub client: crate::forge::jira::Jira,
    pub config: crate::config::JiraConfig,
}

impl std::fmt::Debug for JiraSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JiraSetup").finish_non_exhaustive()
    }
}

/// What the engine's board sync needs: the client and the board's settings.
#[derive(Clone)]
pub struct BoardSetup {
    pub client: crate::forge::github::GitHub,
    pub project: crate::config::ProjectConfig,
}

impl std::fmt::Debug for BoardSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoardSetup")
            .field("project", &self.project)
            .finish_non_exhaustive()
    }
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
            store_outage: super::outage::DEFAULT_OUTAGE_LIMIT,
            offline_after: Duration::from_secs(120),
            idle_reports: None,
            observer: false,
            board: None,
            jira: None,
            panes: None,
            dispatch: super::dispatch::DispatchConfig {
                cooldown: Duration::from_secs(60),
                ..Default::default()
            },
        }
    }
}

/// How often a serving engine sums up its idle plan at most (the summary reads the plan's
/// tasks and events, so it is done again only once something may have changed).
const IDLE_REPORT_EVERY: Duration = Duration::from_secs(2);
/// With a store that wakes waiters for every change ([`Store::wakes_for_work`]), an idle engine
/// looks for work by itself only this often (a safety net); otherwise every `poll`.
const SAFETY_POLL: Duration = Duration::from_secs(30);

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
    /// Tasks whose work was done and checked but did not land (see [`super::landing`]).
    pub unlanded: Vec<super::landing::Unlanded>,
    /// DONE tasks whose agent changed nothing (their checks passed on the base as it was).
    pub unchanged: Vec<String>,
}

struct Running {
    lease: Lease,
    plan_id: String,
    task_id: String,
    /// The agent the attempt runs on (for `max_parallel`).
    agent: String,
    handle: AttemptHandle,
    task_budget: Option<Usd>,
    /// Spend already written to the store with `add_cost`.
    reported: Usd,
    abandoned: bool,
}

/// The loop's state between turns.
struct Turn {
    running: HashMap<i64, Running>,
    /// Attempts that ended and whose outcome the store has not taken yet (it did not answer):
    /// kept, in order, until it does. Their leases stay ours meanwhile (or expire, and then the
    /// write is refused as stale and the reaper's word counts).
    unsettled: Vec<(Running, AttemptOutcome)>,
    not_before: HashMap<i64, Instant>,
    end: Option<RunEnd>,
    stop_claiming: bool,
    attempts: u64,
    warned_budget: HashSet<String>,
    /// Plans a plan-less worker stopped taking tasks from because their budget is spent.
    exhausted: HashSet<String>,
    idle_check: bool,
    outage: Outage,
    /// The outage lasted too long: everything is being stopped, then this is returned.
    fatal: Option<StoreError>,
    /// Agents paused by rate limits (by this worker or any other on the queue).
    pauses: Pauses,
}

impl Turn {
    fn stop_all(&self, level: StopLevel, reason: StopReason) {
        for r in self.running.values() {
            r.handle.stop(level, reason);
        }
    }
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

    /// Runs until the plan is done (or the worker idle, or stopped); the project board, when
    /// one is configured, follows meanwhile and gets a last sync before this returns.
    pub async fn run(self) -> StoreResult<RunSummary> {
        use super::follow::Follower;
        let mut followers: Vec<Follower> = Vec::new();
        if let Some(b) = self.cfg.board.clone() {
            match super::board_sync::BoardSync::new(b.client, b.project, self.store.clone()) {
                Ok(sync) => followers.push(Follower::spawn(sync, self.cfg.plan_id.clone())),
                Err(e) => tracing::warn!("project board: {e}"),
            }
        }
        if let Some(j) = self.cfg.jira.clone() {
            let sync = super::jira_sync::JiraSync::new(j.client, j.config, self.store.clone());
            followers.push(Follower::spawn(sync, self.cfg.plan_id.clone()));
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

    async fn run_queue(mut self) -> StoreResult<RunSummary> {
        let started = Instant::now();
        let slots = if self.cfg.observer {
            0
        } else {
            self.cfg.slots.max(1)
        };
        let run_deadline = self.cfg.run_timeout.map(|t| started + t);
        let mut joins: JoinSet<(i64, AttemptOutcome)> = JoinSet::new();
        let mut task_ids: HashMap<tokio::task::Id, i64> = HashMap::new();
        let mut t = Turn {
            running: HashMap::new(),
            unsettled: Vec::new(),
            not_before: HashMap::new(),
            end: None,
            stop_claiming: false,
            attempts: 0,
            warned_budget: HashSet::new(),
            exhausted: HashSet::new(),
            idle_check: true,
            outage: Outage::new(self.cfg.store_outage, &self.store.info()),
            fatal: None,
            pauses: Pauses::default(),
        };
        let mut graceful_since: Option<Instant> = None;
        let mut next_heartbeat = Instant::now() + self.cfg.heartbeat;
        let mut next_reap = Instant::now();
        let mut next_offline_check = Instant::now();
        // Workers are marked offline after minutes: looking a few times per threshold is enough.
        let offline_every = self.cfg.reaper_interval.max(self.cfg.offline_after / 4);
        let safety_poll = if self.store.wakes_for_work() {
            self.cfg.poll.max(SAFETY_POLL)
        } else {
            self.cfg.poll
        };
        // A claim is tried only when work may have come (a wakeup, a slot freed, a backoff
        // over, the reaper returned tasks) or the safety poll is due: an idle engine costs the
        // database nothing between those.
        let mut claim_due = true;
        let mut next_safety_claim = Instant::now() + safety_poll;
        // Likewise for the idle checks (they read the plan's tasks).
        let mut news = true;
        let mut shutdown_closed = false;
        let mut last_report: Option<Instant> = None;
        // When the next rate-limit pause ends: the claim is tried again then.
        let mut pause_wake: Option<Instant> = None;

        loop {
            let now = Instant::now();

            // The operator's stop requests.
            let level = *self.shutdown.borrow();
            if level >= StopLevel::Drain && !t.stop_claiming {
                t.stop_claiming = true;
                // A serving engine stopped while idle did not interrupt anything: its end is
                // what the plan's state says (worked out below).
                if !(self.cfg.idle_reports.is_some() && t.running.is_empty()) {
                    t.end.get_or_insert(RunEnd::Interrupted);
                }
            }
            // Graceful implies Drain, handled just above.
            if level >= StopLevel::Graceful && graceful_since.is_none() {
                graceful_since = Some(now);
                t.stop_all(StopLevel::Graceful, StopReason::Shutdown);
            }
            if level >= StopLevel::Now
                || graceful_since.is_some_and(|g| now.duration_since(g) >= self.cfg.grace)
            {
                t.stop_all(StopLevel::Now, StopReason::Shutdown);
            }

            // The run's own clock.
            if let Some(deadline) = run_deadline
                && now >= deadline
                && t.end != Some(RunEnd::TimedOut)
                && !matches!(t.end, Some(RunEnd::Interrupted | RunEnd::BudgetExhausted))
            {
                t.end = Some(RunEnd::TimedOut);
                t.stop_claiming = true;
                t.stop_all(StopLevel::Now, StopReason::RunTimeout);
            }

            // A store that has not answered for too long: stop everything and give up.
            if t.fatal.is_none() && t.outage.exceeded() {
                let e = t.outage.gave_up();
                tracing::error!("{e}");
                t.fatal = Some(e);
                t.stop_claiming = true;
                t.stop_all(StopLevel::Now, StopReason::StoreOutage);
            }

            if now >= next_reap && !t.outage.waiting() {
                next_reap = now + self.cfg.reaper_interval;
                match self.store.reap().await {
                    Ok(report) => {
                        t.outage.ok();
                        if !report.requeued.is_empty()
                            || !report.failed.is_empty()
                            || !report.timed_out.is_empty()
                        {
                            tracing::info!(?report, "reaper returned tasks");
                            t.idle_check = true;
                            claim_due = true;
                            news = true;
                        }
                    }
                    Err(e) => soft(&mut t.outage, "reaper", e),
                }
                if self.cfg.offline_after > Duration::ZERO
                    && now >= next_offline_check
                    && !t.outage.waiting()
                {
                    next_offline_check = now + offline_every;
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

            if now >= next_heartbeat {
                next_heartbeat = now + self.cfg.heartbeat;
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
            if !t.outage.waiting() {
                self.watch_budget(&mut t).await?;
            }

            // Outcomes of finished attempts, in the order they ended.
            if !t.unsettled.is_empty() && !t.outage.waiting() {
                self.settle_pending(&mut t).await?;
                claim_due = true;
                news = true;
            }

            // Fill free slots.
            let backoffs = t.not_before.len();
            t.not_before.retain(|_, nb| *nb > Instant::now());
            let pause_over = pause_wake.is_some_and(|at| now >= at);
            if pause_over {
                pause_wake = None;
            }
            if t.not_before.len() < backoffs || now >= next_safety_claim || pause_over {
                claim_due = true;
                news = true;
            }
            let mut claimed_any = false;
            while claim_due
                && !t.stop_claiming
                && t.running.len() + t.unsettled.len() < slots
                && !t.outage.waiting()
            {
                t.not_before.retain(|_, nb| *nb > Instant::now());
                let mut exclude: Vec<i64> = t.not_before.keys().copied().collect();
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
                pause_wake = t
                    .pauses
                    .next_end(wall)
                    .map(|end| Instant::now() + (end - wall).to_std().unwrap_or(Duration::ZERO));
                req.blocked_agents = paused_agents(&t.pauses, wall);
                req.default_agent = self.cfg.dispatch.default_agent.clone();
                req.agent_limits = agent_limits(&self.cfg.dispatch);
                let mut claimed = match self.store.claim(&req).await {
                    Ok(Some(c)) => c,
                    Ok(None) => {
                        t.outage.ok();
                        claim_due = false;
                        next_safety_claim = Instant::now() + safety_poll;
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

            // Finished? Giving up waits only for the agents to stop: their outcomes cannot be
            // written, and their leases expire.
            if t.fatal.is_some() && t.running.is_empty() {
                break;
            }
            if t.running.is_empty() && t.unsettled.is_empty() {
                if t.stop_claiming {
                    break;
                }
                // A serving engine nobody watches any more (the console went to the
                // background) ends when idle like a run.
                let watched = self
                    .cfg
                    .idle_reports
                    .as_ref()
                    .is_some_and(|tx| tx.receiver_count() > 0);
                let exit_when_idle =
                    self.cfg.exit_when_idle || (self.cfg.idle_reports.is_some() && !watched);
                if exit_when_idle && (t.idle_check || (!claimed_any && news)) && !t.outage.waiting()
                {
                    t.idle_check = false;
                    news = false;
                    match self.finished(&t).await {
                        Ok(Some(done)) => {
                            t.outage.ok();
                            t.end = Some(done);
                            break;
                        }
                        Ok(None) => t.outage.ok(),
                        Err(e) => {
                            t.idle_check = true;
                            t.outage.absorb("checking whether the work is done", e)?;
                        }
                    }
                } else if let Some(tx) = self.cfg.idle_reports.clone()
                    && watched
                    && !self.cfg.observer
                    && !t.outage.waiting()
                    && news
                    && last_report.is_none_or(|at| at.elapsed() >= IDLE_REPORT_EVERY)
                {
                    news = false;
                    match self.finished(&t).await {
                        Ok(Some(end)) => {
                            t.outage.ok();
                            match self.summary(end, t.attempts, started).await {
                                Ok(s) => {
                                    // Receivers wake only when the outcome changed.
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
                                        let changed = cur.as_ref().map(key) != Some(key(&s));
                                        *cur = Some(s);
                                        changed
                                    });
                                    last_report = Some(Instant::now());
                                }
                                Err(e) => {
                                    news = true;
                                    soft(&mut t.outage, "summing up the run", e);
                                }
                            }
                        }
                        Ok(None) => {
                            t.outage.ok();
                            tx.send_if_modified(|cur| cur.take().is_some());
                        }
                        Err(e) => {
                            news = true;
                            soft(&mut t.outage, "checking whether the work is done", e);
                        }
                    }
                }
            } else if let Some(tx) = &self.cfg.idle_reports {
                tx.send_if_modified(|cur| cur.take().is_some());
                last_report = None;
            }

            // Wait for something to happen: the timers below, or (with a slot to fill) work.
            let mut wake = next_heartbeat.min(next_reap);
            let fill = claim_due && !t.stop_claiming && t.running.len() + t.unsettled.len() < slots;
            let idle_checks = self.cfg.exit_when_idle || self.cfg.idle_reports.is_some();
            if fill || (news && idle_checks && t.running.is_empty() && t.unsettled.is_empty()) {
                // Something is left to do that a busy store or the report interval put off:
                // look again soon.
                wake = wake.min(now + self.cfg.poll);
            }
            if let Some(nb) = t.not_before.values().min() {
                wake = wake.min(*nb);
            }
            if let Some(p) = pause_wake {
                wake = wake.min(p);
            }
            if let Some(d) = run_deadline {
                wake = wake.min(d);
            }
            if let Some(g) = graceful_since {
                wake = wake.min(g + self.cfg.grace);
            }
            if t.outage.in_outage() {
                wake = wake.min(t.outage.next_try());
            }
            if !t.running.is_empty() {
                // Spend is checked at least every second while agents run.
                wake = wake.min(Instant::now() + Duration::from_secs(1));
            }
            let sleep = wake.saturating_duration_since(Instant::now());
            let can_claim = !t.stop_claiming
                && !claim_due
                && t.running.len() + t.unsettled.len() < slots
                && !t.outage.in_outage();
            let work_wait = next_safety_claim.saturating_duration_since(Instant::now());
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
                    t.idle_check = true;
                    claim_due = true;
                    news = true;
                }
                // Waiting for work only makes sense with a slot to fill: the store answers at
                // once while events are newer than the last fruitless claim, and with every
                // slot busy no claim is ever made, so that wait would spin.
                _ = self.store.wait_for_work(work_wait), if can_claim => {
                    claim_due = true;
                    news = true;
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
            self.settle_pending(&mut t).await?;
        }
        if let Some(e) = t.fatal.take() {
            return Err(e);
        }
        if t.outage.exceeded() {
            let e = t.outage.gave_up();
            tracing::error!("{e}");
            return Err(e);
        }
        let end = match t.end {
            Some(end) => end,
            // A serving engine stopped while idle: the plan's state says how the run went.
            None if self.cfg.idle_reports.is_some() => self
                .finished(&t)
                .await
                .ok()
                .flatten()
                .unwrap_or(RunEnd::Interrupted),
            None => RunEnd::AllDone,
        };
        loop {
            match self.summary(end, t.attempts, started).await {
                Ok(s) => return Ok(s),
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

    /// Writes the outcomes of ended attempts, oldest first, until the store stops answering.
    async fn settle_pending(&self, t: &mut Turn) -> StoreResult<()> {
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
                        t.not_before.insert(r.lease.task_pk, Instant::now() + b);
                    }
                    // Spend settled at the end of an attempt crosses thresholds too.
                    match self.store.get_plan(&r.plan_id).await {
                        Ok(plan) => {
                            if self.note_budget(&plan, &mut t.warned_budget).await? {
                                self.plan_exhausted(t, &plan.id);
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

    /// A plan's budget is spent: a run of that plan stops; a worker serving many plans stops
    /// only that plan's attempts (the claim no longer offers its tasks) and goes on with the rest.
    fn plan_exhausted(&self, t: &mut Turn, plan_id: &str) {
        if self.cfg.plan_id.is_some() {
            if t.end != Some(RunEnd::BudgetExhausted) {
                t.end = Some(RunEnd::BudgetExhausted);
                t.stop_claiming = true;
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
    async fn watch_budget(&self, t: &mut Turn) -> StoreResult<()> {
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
                        if self.note_budget(&plan, &mut t.warned_budget).await? {
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
            self.plan_exhausted(t, &plan_id);
        }
        Ok(())
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
                worker_id: Some(self.cfg.worker_id.clone()),
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

    /// Writes an attempt's outcome; returns a backoff when the task was sent back for a retry,
    /// and the agent's pause when it hit a rate limit.
    async fn settle(
        &self,
        r: &Running,
        outcome: AttemptOutcome,
    ) -> StoreResult<(Option<Duration>, Option<PauseNote>)> {
        if r.abandoned {
            return Ok((None, None));
        }
        if let AttemptOutcome::RateLimited {
            cost,
            agent,
            message,
            evidence,
        } = outcome
        {
            let pause = pause_for(
                &message,
                chrono::Local::now().fixed_offset(),
                self.cfg.dispatch.cooldown,
            );
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
            return match self.store.release(r.lease, &o).await {
                Ok(_) => {
                    tracing::warn!(task = %r.task_id, "{}", note.label(&chrono::Local));
                    crate::store::record_event(
                        self.store.as_ref(),
                        event_types::AGENT_PAUSED,
                        &r.plan_id,
                        Some(&r.task_id),
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
        let result = match outcome {
            AttemptOutcome::Abandoned | AttemptOutcome::RateLimited { .. } => {
                return Ok((None, None));
            }
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
                match self.store.fail(r.lease, mode, &o).await {
                    Ok(t) if t.status == Status::Failed => {
                        self.executor.failed_for_good(&r.plan_id, &r.task_id).await;
                        Ok(None)
                    }
                    Ok(t) => Ok((t.status == Status::Pending)
                        .then(|| backoff_after(t.attempts, &self.cfg.retry_backoff))),
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
            Ok(backoff) => Ok((backoff, None)),
            // Reclaimed while we finished: the new owner's word counts, ours is dropped.
            Err(StoreError::Stale { .. }) => Ok((None, None)),
            Err(e) => Err(e),
        }
    }

    /// `Some(end)` when nothing is left that this engine could do: its plan's, or (a worker
    /// serving every plan) any plan's.
    async fn finished(&self, t: &Turn) -> StoreResult<Option<RunEnd>> {
        // Retries waiting for their backoff, or tasks waiting for a paused agent: not done.
        if !t.not_before.is_empty() || t.pauses.next_end(chrono::Utc::now()).is_some() {
            return Ok(None);
        }
        if let Some(plan_id) = &self.cfg.plan_id {
            return self.plan_state(plan_id, false).await;
        }
        let mut budget_blocked = false;
        for p in self.store.list_plans().await? {
            let c = &p.counts;
            let open = c.get(Status::Pending) + c.get(Status::Claimed) + c.get(Status::InProgress);
            if open == 0 {
                continue;
            }
            match self.plan_state(&p.plan.id, true).await? {
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
    /// worker serving every plan does not wait for a paused one.
    async fn plan_state(&self, plan_id: &str, among_many: bool) -> StoreResult<Option<RunEnd>> {
        // One aggregate, not every task of the plan: an idle engine asks this after every
        // change, and a plan may have 100,000 tasks.
        let c = self.store.counts(plan_id).await?;
        if c.get(Status::Claimed) + c.get(Status::InProgress) > 0 {
            return Ok(None); // another worker is still on it
        }
        if c.ready > 0 {
            let plan = self.store.get_plan(plan_id).await?;
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
            unlanded: Vec::new(),
            unchanged: Vec::new(),
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
            if tasks
                .iter()
                .any(|t| t.status == Status::Done || super::landing::waits_to_merge(t))
            {
                let events = self
                    .store
                    .events(&crate::store::EventFilter {
                        plan_id: Some(plan_id.clone()),
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
}

/// Whether the newest DONE of the task says its agent changed nothing.
fn done_unchanged(t: &crate::store::TaskRecord, events: &[crate::store::Event]) -> bool {
    events
        .iter()
        .rev()
        .filter(|e| e.task_id.as_deref() == Some(t.id.as_str()))
        .find(|e| e.event_type == crate::store::event_types::TASK_DONE)
        .is_some_and(|e| e.payload["no_changes"].as_bool() == Some(true))
}

/// A store error where the engine can do without the answer: transient ones count towards the
/// outage, answers are logged.
fn soft(outage: &mut Outage, what: &str, e: StoreError) {
    if let Err(e) = outage.absorb(what, e) {
        tracing::warn!("{what}: {e}");
    }
}
