//! `whilly run` and `whilly worker`: the engine, headless.

use super::agents_setup::{
    build_agents, merge_mode, price_table, verification_env, workspace_config,
};
use super::args::{RunArgs, WorkerArgs};
use super::context::Context;
use super::exit::{self, EnvironmentError};
use super::plan_cmd;
use super::signals;
use crate::agent::{Guards, HandoffDir};
use crate::config::Config;
use crate::domain::Usd;
use crate::engine::attempt::{AgentExecutor, ExecutorConfig, agent_name_for};
use crate::engine::progress::{HeadlessPrinter, complete_line};
use crate::engine::sessions::SessionRegistry;
use crate::engine::{Engine, EngineConfig, RunEnd};
use crate::pty::TermSize;
use crate::store::{ImportOptions, Lease, Outcome, PlanRecord, Store, TaskRecord, WorkerRecord};
use crate::workspace::Workspaces;
use anyhow::Context as _;
use std::collections::BTreeSet;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

/// Everything a run needs, ready to start: the console embeds the same engine.
pub struct RunSetup {
    pub store: Arc<dyn Store>,
    pub plan_id: String,
    pub engine_cfg: EngineConfig,
    pub executor: AgentExecutor,
    pub sessions: SessionRegistry,
    /// What the console needs beyond the engine: the repository, its config, its worktrees.
    pub repo_root: std::path::PathBuf,
    pub config: Config,
    pub workspaces: Arc<Workspaces>,
    /// Why this process cannot run the plan's tasks (a missing agent), when it only watches.
    pub observer: Option<String>,
    /// The plan and its tasks as loaded while preparing: the console's first frame shows them
    /// without waiting for its own first load.
    pub initial: Option<(PlanRecord, Vec<TaskRecord>)>,
}

/// Imports the plan file if given, resumes if asked, builds agents and the executor.
/// `Err(code)` when the plan file was refused (the problems are already printed).
pub async fn prepare_run(ctx: &Context, args: &RunArgs) -> anyhow::Result<Result<RunSetup, i32>> {
    let store = patiently("opening the queue", || ctx.store()).await?;
    let plan_id = match resolve_plan(ctx, &store, args).await? {
        Ok(id) => id,
        Err(code) => return Ok(Err(code)),
    };
    prepare_run_in(ctx, args, store, plan_id, SessionRegistry::new(), false)
        .await
        .map(Ok)
}

/// The plan a run works on: the file imported (`Err(code)` when refused, problems printed), or
/// `--plan` (its budget updated), or the only plan imported; with `--resume`, tasks held by dead
/// local processes are released first.
pub async fn resolve_plan(
    ctx: &Context,
    store: &Arc<dyn Store>,
    args: &RunArgs,
) -> anyhow::Result<Result<String, i32>> {
    let plan_id = match (&args.plan_file, &args.plan) {
        (Some(file), _) => {
            match plan_cmd::import_for_run(ctx, store, file, args.budget, args.plan.clone()).await?
            {
                Ok(id) => id,
                Err(code) => return Ok(Err(code)),
            }
        }
        (None, Some(id)) => {
            store.get_plan(id).await?;
            if let Some(b) = args.budget {
                set_budget(store, id, b).await?;
            }
            id.clone()
        }
        (None, None) => {
            let plans = store.list_plans().await?;
            match plans.as_slice() {
                [only] => only.plan.id.clone(),
                [] => anyhow::bail!(
                    "nothing to run: give a plan file (`whilly run tasks.json`) or import one first"
                ),
                _ => anyhow::bail!(
                    "several plans are imported ({}); say which with --plan ID",
                    plans
                        .iter()
                        .map(|p| p.plan.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        }
    };
    // Before any console takes the terminal: resuming says what it released.
    if args.resume {
        resume(store, &plan_id).await?;
    }
    Ok(Ok(plan_id))
}

/// Everything else a run needs once its plan is known; `sessions` is where its agents' terminals
/// will be (the console may have taken the terminal already and watch them). `may_observe`: an
/// agent the plan's tasks need that cannot be built makes an observer (the console watches
/// other workers run the plan) instead of an error.
pub async fn prepare_run_in(
    ctx: &Context,
    args: &RunArgs,
    store: Arc<dyn Store>,
    plan_id: String,
    sessions: SessionRegistry,
    may_observe: bool,
) -> anyhow::Result<RunSetup> {
    let cfg = ctx.config()?;
    let worker_id = worker_id();
    let plan = store.get_plan(&plan_id).await?;
    let tasks = store.list_tasks(&plan_id).await?;
    let default_agent = args.agent.clone().unwrap_or_else(|| cfg.run.agent.clone());
    // Only the agents the plan's open tasks name are required: a missing default agent matters
    // only when some task falls back to it. It is still offered when it can be built (tasks
    // merged in later may use it).
    let mut names: BTreeSet<String> = tasks
        .iter()
        .filter(|t| !t.status.is_terminal())
        .map(|t| agent_name_for(&t.spec, &plan.spec, &default_agent))
        .collect();
    if !names.contains(&default_agent)
        && super::agents_setup::agent_settings(&cfg, &default_agent)
            .is_ok_and(|s| crate::agent::build_backend(&s).is_ok())
    {
        names.insert(default_agent.clone());
    }
    let mut observer = None;
    if may_observe {
        let missing: Vec<String> = names
            .iter()
            .filter_map(|n| {
                let why = match super::agents_setup::agent_settings(&cfg, n) {
                    Ok(settings) => crate::agent::build_backend(&settings).err()?.to_string(),
                    Err(e) => e.to_string(),
                };
                Some(format!("agent {n:?}: {why}"))
            })
            .collect();
        if !missing.is_empty() {
            names.retain(|n| {
                super::agents_setup::agent_settings(&cfg, n)
                    .is_ok_and(|s| crate::agent::build_backend(&s).is_ok())
            });
            observer = Some(missing.join("; "));
        }
    }
    let executor = build_executor(
        ctx,
        &cfg,
        store.clone(),
        &default_agent,
        &names,
        sessions.clone(),
    )?;

    let mut engine_cfg = engine_config(&cfg, worker_id.clone());
    engine_cfg.plan_id = Some(plan_id.clone());
    engine_cfg.observer = observer.is_some();
    engine_cfg.slots = args.parallel.unwrap_or(cfg.run.parallel as usize).max(1);
    engine_cfg.run_timeout = match &args.timeout {
        Some(t) => Some(
            humantime::parse_duration(t)
                .map_err(|e| anyhow::anyhow!("--timeout {t:?}: {e} (write e.g. 90s, 30m, 2h)"))?,
        ),
        None => cfg.run.timeout,
    };
    let workspaces = Workspaces::new(&ctx.repo_root, workspace_config(&cfg))
        .map_err(|e| EnvironmentError(format!("{}: {e}", ctx.repo_root.display())))?;
    Ok(RunSetup {
        store,
        plan_id,
        engine_cfg,
        executor,
        sessions,
        repo_root: ctx.repo_root.clone(),
        config: cfg,
        observer,
        workspaces: Arc::new(workspaces),
        initial: Some((plan, tasks)),
    })
}

pub async fn run(ctx: &Context, args: RunArgs) -> anyhow::Result<i32> {
    let RunSetup {
        store,
        plan_id,
        engine_cfg,
        executor,
        ..
    } = match prepare_run(ctx, &args).await? {
        Ok(setup) => setup,
        Err(code) => return Ok(code),
    };
    let shutdown = signals::shutdown_channel();
    let presence = patiently("registering the worker", || {
        WorkerPresence::start(store.clone(), &engine_cfg)
    })
    .await?;
    let engine = Engine::new(store.clone(), Arc::new(executor), engine_cfg, shutdown);

    let mut printer =
        HeadlessPrinter::new(store.clone(), plan_id.clone(), Duration::from_secs(3)).await?;
    let mut handle = tokio::spawn(engine.run());
    let summary: anyhow::Result<_> = loop {
        tokio::select! {
            joined = &mut handle => break joined
                .context("the engine stopped unexpectedly")
                .and_then(|r| r.map_err(anyhow::Error::from)),
            _ = tokio::time::sleep(Duration::from_millis(500)) => {
                // Progress lines are a view: a store that does not answer for a moment (the
                // engine rides that out) or a closed stdout must not end the run.
                if let Err(e) = printer.pump(&mut std::io::stdout().lock(), false).await {
                    tracing::warn!("progress lines: {e}");
                }
            }
        }
    };
    // Off the workers list however the run ended.
    presence.stop().await;
    let summary = summary?;
    let mut out = std::io::stdout().lock();
    if let Err(e) = printer.pump(&mut out, true).await {
        tracing::warn!("progress lines: {e}");
    }
    // The exit code says how the run went, whether or not anyone still reads stdout.
    let _ = writeln!(out, "{}", complete_line(&summary));
    let _ = out.flush();
    drop(out);
    report_unfinished(&summary);
    Ok(summary.exit_code)
}

/// The console on a terminal (`tui::terminal::available`) unless `--headless`; headless otherwise.
pub async fn run_interactive(ctx: &Context, args: RunArgs) -> anyhow::Result<i32> {
    if !args.headless && crate::tui::terminal::available() {
        return super::tui_cmd::run(ctx, args).await;
    }
    run(ctx, args).await
}

pub async fn worker(ctx: &Context, args: WorkerArgs) -> anyhow::Result<i32> {
    let cfg = ctx.config()?;
    let store = patiently("opening the queue", || ctx.store()).await?;
    let worker_id = worker_id();
    let default_agent = args.agent.clone().unwrap_or_else(|| cfg.run.agent.clone());
    let mut names: BTreeSet<String> = cfg.agents.keys().cloned().collect();
    names.insert("handoff".into());
    // A worker serves any plan: only the agents whose binaries exist here are offered.
    names.retain(|n| {
        n == &default_agent
            || super::agents_setup::agent_settings(&cfg, n)
                .is_ok_and(|s| crate::agent::build_backend(&s).is_ok())
    });
    let executor = build_executor(
        ctx,
        &cfg,
        store.clone(),
        &default_agent,
        &names,
        SessionRegistry::new(),
    )?;
    let mut engine_cfg = engine_config(&cfg, worker_id.clone());
    engine_cfg.plan_id = args.plan.clone();
    engine_cfg.slots = args.slots.unwrap_or(cfg.run.parallel as usize).max(1);
    engine_cfg.tags = args.tags.clone();
    engine_cfg.exit_when_idle = args.until_idle;
    let presence = patiently("registering the worker", || {
        WorkerPresence::start(store.clone(), &engine_cfg)
    })
    .await?;
    errln!(
        "whilly worker {worker_id}: {} slots on the {} queue at {}{}",
        engine_cfg.slots,
        store.info().backend,
        store.info().location,
        args.plan
            .as_deref()
            .map(|p| format!(", plan {p}"))
            .unwrap_or_default()
    );
    let shutdown = signals::shutdown_channel();
    let summary = Engine::new(store.clone(), Arc::new(executor), engine_cfg, shutdown)
        .run()
        .await;
    presence.stop().await;
    let summary = summary?;
    let (code, why) = worker_exit(summary.end);
    errln!(
        "whilly worker {worker_id}: {why} after {} attempts",
        summary.attempts
    );
    Ok(code)
}

/// A worker's exit code and what to say: 0 when nothing was left (failed tasks are their plans'
/// business, not the worker's), 2 when only budget-blocked work was left, 130 when stopped.
fn worker_exit(end: RunEnd) -> (i32, &'static str) {
    match end {
        RunEnd::Interrupted => (exit::INTERRUPTED, "stopped"),
        RunEnd::BudgetExhausted => (
            exit::ENVIRONMENT,
            "stopped: the work left waits for budget (raise it with `whilly plan import FILE --budget USD`)",
        ),
        RunEnd::TimedOut => (3, "stopped: run timeout"),
        RunEnd::AllDone | RunEnd::SomeFailed => (exit::OK, "nothing left to do"),
    }
}

fn build_executor(
    ctx: &Context,
    cfg: &Config,
    store: Arc<dyn Store>,
    default_agent: &str,
    names: &BTreeSet<String>,
    sessions: SessionRegistry,
) -> anyhow::Result<AgentExecutor> {
    let agents = build_agents(cfg, names)?;
    let workspaces = Workspaces::new(&ctx.repo_root, workspace_config(cfg))
        .map_err(|e| EnvironmentError(format!("{}: {e}", ctx.repo_root.display())))?;
    let base_commit = workspaces
        .base_commit()
        .map_err(|e| EnvironmentError(e.to_string()))?;
    let guards = Guards::new(&cfg.guards.injection_patterns)
        .map_err(|e| anyhow::anyhow!("[guards] injection_patterns: {e}"))?;
    let run_id = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ").to_string();
    let exec_cfg = ExecutorConfig {
        repo_root: ctx.repo_root.clone(),
        run_dir: ctx.state_dir().join("runs").join(run_id),
        default_agent: default_agent.to_string(),
        agents,
        prices: price_table(cfg),
        guards,
        verification_timeout: Duration::from_secs(cfg.verification.timeout_secs),
        checks: check_policy(cfg),
        verification_env: verification_env(cfg),
        pty_size: TermSize::new(40, 160),
        scrollback: cfg.tui.scrollback_lines as usize,
        grace: Duration::from_secs(cfg.run.grace_period_secs),
        handoff: HandoffDir::in_project(&ctx.repo_root),
        handoff_timeout: Duration::from_secs(cfg.handoff.timeout_secs),
        handoff_poll: Duration::from_millis(500),
        merge: merge_mode(cfg),
        base_commit,
        default_task_timeout: None,
        lease: Duration::from_secs(cfg.queue.lease_secs.max(1)),
    };
    Ok(AgentExecutor::new(
        exec_cfg,
        store,
        Arc::new(workspaces),
        sessions,
    ))
}

fn engine_config(cfg: &Config, worker_id: String) -> EngineConfig {
    let mut e = EngineConfig::new(worker_id);
    e.lease = Duration::from_secs(cfg.queue.lease_secs.max(1));
    e.heartbeat = Duration::from_secs(cfg.queue.heartbeat_secs.max(1));
    e.reaper_interval = Duration::from_secs(cfg.queue.reaper_interval_secs.max(1));
    e.poll = Duration::from_millis(cfg.queue.poll_interval_ms.max(10));
    e.grace = Duration::from_secs(cfg.run.grace_period_secs);
    e.default_estimate = Usd::from_f64(cfg.queue.default_task_estimate_usd);
    e.retry_backoff = cfg.retry.backoff_secs.clone();
    e.store_outage = Duration::from_secs(cfg.queue.outage_secs.max(1));
    e.offline_after = Duration::from_secs(cfg.queue.worker_offline_secs);
    e
}

/// `host/pid/random`: unique per process, and tells `--resume` which dead process held a task.
pub fn worker_id() -> String {
    let host = hostname::get()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "host".into());
    let nonce: u32 = rand::random();
    format!("{host}/{}/{:06x}", std::process::id(), nonce & 0xff_ffff)
}

/// After a crash: tasks still leased by a dead process on this host go back to PENDING now,
/// instead of waiting for their leases to expire.
async fn resume(store: &Arc<dyn Store>, plan_id: &str) -> anyhow::Result<()> {
    let host = hostname::get()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default();
    for t in store.list_tasks(plan_id).await? {
        if !t.status.is_leased() {
            continue;
        }
        let Some(owner) = &t.worker_id else { continue };
        let mut parts = owner.split('/');
        let (Some(h), Some(pid)) = (
            parts.next(),
            parts.next().and_then(|p| p.parse::<i32>().ok()),
        ) else {
            continue;
        };
        if h != host || process_alive(pid) {
            continue;
        }
        let lease = Lease {
            task_pk: t.pk,
            epoch: t.epoch,
        };
        match store.release(lease, &Outcome::reason("worker_dead")).await {
            Ok(_) => errln!(
                "resume: {} was held by dead process {pid}; back to PENDING",
                t.id
            ),
            Err(e) => tracing::warn!("resume: {}: {e}", t.id),
        }
    }
    Ok(())
}

fn process_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence and permission.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

async fn set_budget(store: &Arc<dyn Store>, plan_id: &str, budget: f64) -> anyhow::Result<()> {
    if !budget.is_finite() || budget < 0.0 {
        anyhow::bail!("--budget {budget}: expected a non-negative number of US dollars");
    }
    let spec = store.export_plan(plan_id).await?;
    let opts = ImportOptions {
        budget: Some(Usd::from_f64(budget)),
        plan_id: Some(plan_id.to_string()),
        default_max_attempts: 3,
        ..Default::default()
    };
    store.import_plan(&spec, &opts).await?;
    Ok(())
}

/// How long the engine commands wait, at start, for a queue that does not answer yet (a server
/// restarting or out of connections); an unreachable one still ends them with exit 2 after it.
const STARTUP_WAIT: Duration = Duration::from_secs(30);

/// Runs `f` again while it fails with a transient store error, for up to [`STARTUP_WAIT`],
/// saying once on stderr that it waits.
async fn patiently<T, F, Fut>(what: &str, mut f: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>>,
{
    let started = std::time::Instant::now();
    let mut failures = 0u32;
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) => {
                let transient = e
                    .chain()
                    .find_map(|c| c.downcast_ref::<crate::store::StoreError>())
                    .is_some_and(|s| s.is_transient());
                if !transient || started.elapsed() >= STARTUP_WAIT {
                    return Err(e);
                }
                failures += 1;
                tracing::warn!("{what}: {}", exit::describe(&e));
                if failures == 1 {
                    errln!(
                        "whilly: {what}: the queue does not answer yet ({}); retrying for up to {} s",
                        exit::describe(&e),
                        STARTUP_WAIT.as_secs()
                    );
                }
                let wait = crate::engine::outage::backoff(failures, rand::random::<f64>());
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// This process on the queue's worker list while it works: registered, heartbeating, removed
/// when it stops (the workers view of every console sharing the queue shows it).
pub struct WorkerPresence {
    store: Arc<dyn Store>,
    id: String,
    beat: tokio::task::JoinHandle<()>,
}

impl WorkerPresence {
    pub async fn start(
        store: Arc<dyn Store>,
        cfg: &EngineConfig,
    ) -> anyhow::Result<WorkerPresence> {
        let record = WorkerRecord {
            id: cfg.worker_id.clone(),
            host: hostname::get()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_default(),
            slots: cfg.slots as i64,
            tags: cfg.tags.clone(),
            started_at: chrono::Utc::now(),
            heartbeat_at: chrono::Utc::now(),
            offline: false,
        };
        store.register_worker(&record).await?;
        let (beat_store, beat_id, every) = (store.clone(), cfg.worker_id.clone(), cfg.heartbeat);
        let beat = tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if let Err(e) = beat_store.worker_heartbeat(&beat_id).await {
                    tracing::warn!("worker heartbeat: {e}");
                }
            }
        });
        Ok(WorkerPresence {
            store,
            id: cfg.worker_id.clone(),
            beat,
        })
    }

    pub async fn stop(self) {
        self.beat.abort();
        // A queue that does not answer must not hold the exit up: the row then goes offline.
        let removed =
            tokio::time::timeout(Duration::from_secs(2), self.store.remove_worker(&self.id));
        match removed.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("removing worker {}: {e}", self.id),
            Err(_) => tracing::warn!("removing worker {}: the queue did not answer", self.id),
        }
    }
}

/// `[verification]`'s say over test steps and the repository's own checks.
pub fn check_policy(cfg: &Config) -> crate::engine::checks::CheckPolicy {
    crate::engine::checks::CheckPolicy {
        test_steps: cfg.verification.test_steps,
        profile: cfg.verification.profile == crate::config::ProfileMode::Auto,
    }
}

/// Lines on stderr for the operator about work that is not what a DONE promises: done but not
/// landed (what to do about it), and done without the agent changing anything.
pub fn report_unfinished(summary: &crate::engine::RunSummary) {
    for u in &summary.unlanded {
        errln!(
            "whilly: {} did not land ({}; files: {}; branch {}): {}",
            u.task_id,
            u.kind.replace('_', " "),
            u.files.join(", "),
            u.branch,
            u.detail
        );
    }
    if !summary.unchanged.is_empty() {
        errln!(
            "whilly: the agent changed nothing for {} (DONE because their checks passed as the code was)",
            summary.unchanged.join(", ")
        );
    }
}
