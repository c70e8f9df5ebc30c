//! `whilly run` and `whilly worker`: the engine, headless.

use super::args::{RunArgs, WorkerArgs};
use super::context::Context;
use super::exit;
use super::plan_choice;
use super::plan_cmd;
use super::signals;
use crate::domain::Usd;
use crate::engine::presence::WorkerPresence;
use crate::engine::progress::{HeadlessPrinter, complete_line};
use crate::engine::sessions::SessionRegistry;
use crate::engine::setup::{self, RunRequest, RunSetup};
use crate::engine::{Engine, RunEnd};
use crate::store::{ImportOptions, Lease, Outcome, Store};
use anyhow::Context as _;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

/// Imports the plan file if given, resumes if asked, builds agents and the executor.
/// `Err(code)` when the plan file was refused (the problems are already printed).
pub(crate) async fn prepare_run(
    ctx: &Context,
    args: &RunArgs,
) -> anyhow::Result<Result<RunSetup, i32>> {
    let store = patiently("opening the queue", || ctx.store()).await?;
    let plan_id = match resolve_plan(ctx, &store, args).await? {
        Ok(id) => id,
        Err(code) => return Ok(Err(code)),
    };
    prepare_run_in(ctx, args, store, plan_id, SessionRegistry::new(), false)
        .await
        .map(Ok)
}

/// The plan a run works on (see [`super::plan_choice`]): the file imported (`Err(code)` when
/// refused, problems printed), or the imported plan named (its budget updated), or the only plan
/// imported; with `--resume`, tasks held by dead local processes are released first.
pub(crate) async fn resolve_plan(
    ctx: &Context,
    store: &Arc<dyn Store>,
    args: &RunArgs,
) -> anyhow::Result<Result<String, i32>> {
    let plans = store.list_plans().await?;
    let (archived, known): (Vec<_>, Vec<_>) =
        plans.iter().partition(|p| p.plan.archived_at.is_some());
    let ids = |v: Vec<&crate::store::PlanSummary>| -> Vec<String> {
        v.into_iter().map(|p| p.plan.id.clone()).collect()
    };
    let (known, archived) = (ids(known), ids(archived));
    let arg = args.plan_arg.as_deref();
    let arg_is_file = arg.is_some_and(|p| p.exists());
    if let Some(name) = arg.map(|a| a.to_string_lossy().into_owned())
        && !arg_is_file
        && !known.iter().chain(&archived).any(|k| *k == name)
    {
        let cli = <super::args::Cli as clap::CommandFactory>::command();
        let commands: Vec<&str> = cli.get_subcommands().map(|c| c.get_name()).collect();
        if let Some(meant) = plan_choice::closest(&name, &commands) {
            return Err(exit::UsageError(format!(
                "{name:?} is not a command, a plan file or an imported plan's id; did you mean `whilly {meant}`?"
            ))
            .into());
        }
    }
    let choice = plan_choice::choose(arg, arg_is_file, args.plan.as_deref(), &known, &archived)
        .map_err(|msg| anyhow::anyhow!(msg))?;
    let plan_id = match (choice, arg) {
        (plan_choice::Choice::File, Some(file)) => {
            match plan_cmd::import_for_run(ctx, store, file, args.budget, args.plan.clone()).await?
            {
                Ok(id) => id,
                Err(code) => return Ok(Err(code)),
            }
        }
        (plan_choice::Choice::File, None) => anyhow::bail!("no plan file was given"),
        (plan_choice::Choice::Imported(id), _) => {
            if let Some(b) = args.budget {
                set_budget(store, &id, b, default_max_attempts(ctx)).await?;
            }
            id
        }
    };
    // `[run] budget_usd` is the budget of a plan that has none of its own (from its file or
    // `--budget`): a run never goes without the limit the configuration sets.
    if args.budget.is_none()
        && let Some(b) = ctx.config()?.run.budget_usd
        && store.get_plan(&plan_id).await?.budget.is_none()
    {
        set_budget(store, &plan_id, b, default_max_attempts(ctx)).await?;
        errln!("plan {plan_id}: budget ${b:.2} from [run] budget_usd");
    }
    // Before any console takes the terminal: resuming says what it released.
    if args.resume {
        resume(store, &plan_id).await?;
    }
    Ok(Ok(plan_id))
}

/// Everything else a run needs once its plan is known (see [`setup::prepare`]).
pub(crate) async fn prepare_run_in(
    ctx: &Context,
    args: &RunArgs,
    store: Arc<dyn Store>,
    plan_id: String,
    sessions: SessionRegistry,
    may_observe: bool,
) -> anyhow::Result<RunSetup> {
    let cfg = ctx.config()?;
    let req = run_request(
        ctx,
        &cfg,
        args.agent.clone(),
        args.slots(),
        args.timeout.as_deref(),
    )?;
    Ok(setup::prepare(req, store, plan_id, sessions, may_observe).await?)
}

/// The flags a run was given, over the repository and its configuration.
fn run_request<'a>(
    ctx: &Context,
    cfg: &'a crate::config::Config,
    agent: Option<String>,
    parallel: Option<usize>,
    timeout: Option<&str>,
) -> anyhow::Result<RunRequest<'a>> {
    let timeout = timeout
        .map(|t| {
            humantime::parse_duration(t)
                .map_err(|e| anyhow::anyhow!("--timeout {t:?}: {e} (write e.g. 90s, 30m, 2h)"))
        })
        .transpose()?;
    Ok(RunRequest {
        repo_root: ctx.repo_root.clone(),
        state_dir: ctx.state_dir(),
        config: cfg,
        agent,
        parallel,
        timeout,
    })
}

pub(crate) async fn run(ctx: &Context, args: RunArgs) -> anyhow::Result<i32> {
    let RunSetup {
        store,
        plan_id,
        engine_cfg,
        executor,
        ..
    } = match prepare_run(ctx, &args).await? {
        Ok(setup) => setup,
        Err(code) => {
            // The problems are on stderr already; the last line says the run never started.
            let line = crate::engine::progress::failed_line(
                RunEnd::InvalidInput,
                "the plan file was refused: see the problems on stderr; nothing was imported",
            );
            let _ = writeln!(std::io::stdout(), "{line}");
            return Ok(code);
        }
    };
    // A watcher runs no agent and lands nothing: the notes about both are not for it.
    if args.slots() != Some(0) {
        say_sandbox(ctx);
        say_unshared_landing(ctx, store.info().backend);
    }
    let shutdown = signals::shutdown_channel();
    let report_after = super::report_cmd::run_start(&store).await;
    let presence = patiently("registering the worker", || async {
        Ok(WorkerPresence::start(store.clone(), &engine_cfg).await?)
    })
    .await?;
    let engine = Engine::new(store.clone(), Arc::new(executor), engine_cfg, shutdown);

    let mut printer = HeadlessPrinter::new(store.clone(), plan_id.clone(), Duration::from_secs(3))
        .await?
        .with_handoffs(crate::agent::HandoffDir::in_project(&ctx.repo_root));
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
    say_unfinished_tasks(store.as_ref(), &plan_id).await;
    super::report_cmd::write_run_report(ctx, &store, &plan_id, report_after).await;
    Ok(summary.exit_code)
}

/// Each task that did not end DONE or SKIPPED, one line on stderr: why, and what to do. Best
/// effort: the exit code and the JSON lines have said how the run went.
async fn say_unfinished_tasks(store: &dyn crate::store::Store, plan_id: &str) {
    let Ok(tasks) = store.list_tasks(plan_id).await else {
        return;
    };
    let events = store
        .events(&crate::store::EventFilter {
            plan_id: Some(plan_id.to_string()),
            ..Default::default()
        })
        .await
        .unwrap_or_default();
    // The last event that moved each task to where it is, in one pass (a plan may hold
    // thousands of tasks and many times more events).
    let status: std::collections::HashMap<&str, crate::domain::Status> =
        tasks.iter().map(|t| (t.id.as_str(), t.status)).collect();
    let mut last: std::collections::HashMap<&str, &crate::store::Event> =
        std::collections::HashMap::new();
    for e in &events {
        if let Some(id) = e.task_id.as_deref()
            && e.to_status.is_some()
            && status.get(id).copied() == e.to_status
        {
            last.insert(id, e);
        }
    }
    let why = |t: &crate::store::TaskRecord| {
        last.get(t.id.as_str())
            .map(|e| crate::engine::trail::summary(e))
            .filter(|s| !s.is_empty())
    };
    for line in crate::engine::trail::unfinished_lines(&tasks, why) {
        errln!("whilly: {line}");
    }
}

/// `--headless`, or `[run] headless = true` in the configuration.
pub(crate) fn headless(ctx: &Context, args: &RunArgs) -> bool {
    args.headless || ctx.config().is_ok_and(|c| c.run.headless)
}

pub(crate) async fn worker(ctx: &Context, args: WorkerArgs) -> anyhow::Result<i32> {
    let cfg = ctx.config()?;
    let _http = match &args.http {
        Some(addr) => Some(super::serve_cmd::beside(ctx, addr).await?),
        None => None,
    };
    let store = patiently("opening the queue", || ctx.store()).await?;
    let req = run_request(
        ctx,
        &cfg,
        args.agent.clone(),
        args.slots.map(usize::from),
        None,
    )?;
    let (mut engine_cfg, executor) = setup::prepare_worker(req, store.clone())?;
    say_sandbox(ctx);
    say_unshared_landing(ctx, store.info().backend);
    let worker_id = engine_cfg.worker_id.clone();
    engine_cfg.plan_id = args.plan.clone();
    engine_cfg.tags = args.tags.clone();
    engine_cfg.exit_when_idle = args.until_idle;
    let presence = patiently("registering the worker", || async {
        Ok(WorkerPresence::start(store.clone(), &engine_cfg).await?)
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
    let (stop_lines, lines_stop) = tokio::sync::oneshot::channel();
    let lines = tokio::spawn(super::worker_lines::follow(
        store.clone(),
        worker_id.clone(),
        args.json,
        lines_stop,
    ));
    let summary = Engine::new(store.clone(), Arc::new(executor), engine_cfg, shutdown)
        .run()
        .await;
    // The last task's end is in the trail by now: the lines say it, then stop.
    let _ = stop_lines.send(());
    if tokio::time::timeout(Duration::from_secs(2), lines)
        .await
        .is_err()
    {
        tracing::warn!("worker lines: the trail did not answer at the end");
    }
    presence.stop().await;
    let summary = summary?;
    let (code, why) = worker_exit(summary.end);
    errln!(
        "whilly worker {worker_id}: {why} after {} attempt{}",
        summary.attempts,
        if summary.attempts == 1 { "" } else { "s" }
    );
    Ok(code)
}

/// A worker's exit code and what to say: 0 when nothing was left (failed tasks are their plans'
/// business, not the worker's), 2 when only budget-blocked work was left, 130 when stopped.
fn worker_exit(end: RunEnd) -> (i32, &'static str) {
    match end {
        RunEnd::Interrupted => (exit::INTERRUPTED, "stopped"),
        RunEnd::BudgetExhausted => (
            exit::BUDGET,
            "stopped: the work left waits for budget (raise it with `whilly plan import FILE --budget USD`)",
        ),
        RunEnd::TimedOut => (3, "stopped: run timeout"),
        RunEnd::AllDone | RunEnd::SomeFailed => (exit::OK, "nothing left to do"),
        // Not ends of the engine's loop (the command line reports those itself).
        RunEnd::Environment => (exit::ENVIRONMENT, "stopped: environment error"),
        RunEnd::InvalidInput => (exit::FAILED, "stopped: invalid input"),
    }
}

/// After a crash: tasks still leased by a dead process on this host go back to PENDING now,
/// instead of waiting for their leases to expire.
async fn resume(store: &Arc<dyn Store>, plan_id: &str) -> anyhow::Result<()> {
    let host = setup::host_name();
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

/// A sandbox asked for that this kernel cannot give is said once, as the run starts; the run
/// goes on (the checkout comparison still guards the operator's files).
fn say_sandbox(ctx: &Context) {
    let enforce = ctx
        .config()
        .is_ok_and(|c| c.sandbox.mode == crate::config::SandboxMode::Enforce);
    let support = crate::sandbox::Support::probe();
    if enforce && support == crate::sandbox::Support::Missing {
        errln!("note: {}", support.describe());
    }
    tracing::info!("sandbox: {}", support.describe());
}

/// On a queue other clones and machines share, a merge into this clone's branch is a landing
/// no other worker can see: said once at start, with the setting that shares it.
fn say_unshared_landing(ctx: &Context, backend: &str) {
    let Ok(cfg) = ctx.config() else { return };
    let merges = matches!(
        cfg.delivery.mode,
        None | Some(crate::config::DeliveryMode::Merge)
    );
    if backend == "postgres" && merges && !cfg.delivery.push {
        errln!(
            "note: the queue is shared, but merge delivery lands only in this clone's branch, which workers in other clones never see (a task could land in each); set [delivery] push = true to land on {}'s branch instead, or deliver as branch or pr",
            cfg.delivery.remote
        );
    }
}

fn default_max_attempts(ctx: &Context) -> u32 {
    ctx.config()
        .map(|c| c.queue.default_max_attempts)
        .unwrap_or(3)
}

async fn set_budget(
    store: &Arc<dyn Store>,
    plan_id: &str,
    budget: f64,
    default_max_attempts: u32,
) -> anyhow::Result<()> {
    if !budget.is_finite() || budget < 0.0 {
        anyhow::bail!("--budget {budget}: expected a non-negative number of US dollars");
    }
    let spec = store.export_plan(plan_id).await?;
    let opts = ImportOptions {
        budget: Some(Usd::from_f64(budget)),
        plan_id: Some(plan_id.to_string()),
        default_max_attempts,
        ..Default::default()
    };
    store.import_plan(&spec, &opts).await?;
    Ok(())
}

/// How long the engine commands wait, at start, for a queue that does not answer yet (a server
/// restarting or out of connections); an unreachable one still ends them with exit 4 after it.
const STARTUP_WAIT: Duration = Duration::from_secs(30);
/// How long they wait for a connection slot on a server that is up but full.
const FULL_WAIT: Duration = Duration::from_secs(600);

/// Runs `f` again while it fails with a transient store error, for up to [`STARTUP_WAIT`],
/// saying once on stderr that it waits.
async fn patiently<T, F, Fut>(what: &str, mut f: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>>,
{
    let started = std::time::Instant::now();
    let mut failures = 0u32;
    let mut seen_full = false;
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) => {
                let transient = e
                    .chain()
                    .find_map(|c| c.downcast_ref::<crate::store::StoreError>())
                    .is_some_and(|s| s.is_transient());
                // A full server is there: a slot frees up when another process lets one go, so
                // a fleet larger than its connection limit queues for longer instead of dying.
                seen_full |= e
                    .chain()
                    .find_map(|c| c.downcast_ref::<crate::store::StoreError>())
                    .is_some_and(|s| matches!(s, crate::store::StoreError::Full { .. }));
                let limit = if seen_full { FULL_WAIT } else { STARTUP_WAIT };
                if !transient || started.elapsed() >= limit {
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

/// Lines on stderr for the operator about work that is not what a DONE promises: done but not
/// landed (what to do about it), and done without the agent changing anything.
pub(crate) fn report_unfinished(summary: &crate::engine::RunSummary) {
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
