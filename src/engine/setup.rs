//! Everything a run needs, built from configuration: the executor with its agents, the engine's
//! settings, the worktrees. `whilly run`, `whilly worker` and the console all start here, so a
//! run is set up one way whoever starts it.

use super::attempt::{AgentExecutor, ExecutorConfig};
use super::configure::{self, build_agents, merge_mode, price_table, verification_env};
use super::engine_config::{EngineConfig, PanesSetup};
use super::engine_config::{FollowerSetup, MakeFollower};
use super::follow::PlanSync;
use super::sessions::SessionRegistry;
use crate::agent::{Guards, HandoffDir};
use crate::config::Config;
use crate::domain::Usd;
use crate::domain::dispatch::{agent_of, fallback_agents};
use crate::pty::TermSize;
use crate::store::{PlanRecord, Store, TaskRecord};
use crate::workspace::Workspaces;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub(crate) use super::setup_error::SetupError;

/// What the caller says about the run beyond the configuration (the flags of `run` / `tui`).
pub(crate) struct RunRequest<'a> {
    pub repo_root: PathBuf,
    /// `.whilly/` of the repository: run directories go under it.
    pub state_dir: PathBuf,
    pub config: &'a Config,
    /// `--agent`: the default agent instead of `[run] agent`.
    pub agent: Option<String>,
    /// `--parallel`: slots instead of `[run] parallel`.
    pub parallel: Option<usize>,
    /// `--timeout`: the whole run's limit instead of `[run] timeout`.
    pub timeout: Option<Duration>,
}

/// Why a console or run claims no task and only watches the others work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observer {
    /// The operator asked (`--watch`, `-j 0`).
    Watching,
    /// Agents the plan's tasks need cannot be built here (what is missing, for each).
    MissingAgents(String),
}

/// Everything a run needs, ready to start: the console embeds the same engine.
pub(crate) struct RunSetup {
    pub store: Arc<dyn Store>,
    pub plan_id: String,
    pub engine_cfg: EngineConfig,
    pub executor: AgentExecutor,
    pub sessions: SessionRegistry,
    /// What the console needs beyond the engine: the repository, its config, its worktrees.
    pub repo_root: PathBuf,
    pub config: Config,
    pub workspaces: Arc<Workspaces>,
    /// Why this process runs none of the plan's tasks, when it only watches.
    pub observer: Option<Observer>,
    /// The plan and its tasks as loaded while preparing: the console's first frame shows them
    /// without waiting for its own first load.
    pub initial: Option<(PlanRecord, Vec<TaskRecord>)>,
}

/// Everything a run of `plan_id` needs; `sessions` is where its agents' terminals will be (the
/// console may have taken the terminal already and watch them). `may_observe`: an agent the
/// plan's tasks need that cannot be built makes an observer (the console watches other workers
/// run the plan) instead of an error.
pub(crate) async fn prepare(
    req: RunRequest<'_>,
    store: Arc<dyn Store>,
    plan_id: String,
    sessions: SessionRegistry,
    may_observe: bool,
) -> Result<RunSetup, SetupError> {
    let cfg = req.config;
    let plan = store.get_plan(&plan_id).await?;
    let tasks = store.list_tasks(&plan_id).await?;
    // `--watch` / `-j 0`: zero slots means zero, so nothing here runs a check or an agent.
    let watching = req.parallel == Some(0);
    // A check that cannot run cannot pass: said before any agent is paid, not after.
    let missing = super::checks::plan_missing_programs(
        tasks
            .iter()
            .filter(|t| !t.status.is_terminal())
            .map(|t| &t.spec),
        &plan.spec,
        &req.repo_root,
        configure::check_policy(cfg),
    );
    if !missing.is_empty() && !watching {
        return Err(SetupError::Environment(format!(
            "plan {plan_id}: checks that cannot run on this machine (nothing was started):\n  {}",
            super::checks::describe_missing(&missing).join("\n  ")
        )));
    }
    let default_agent = req.agent.clone().unwrap_or_else(|| cfg.run.agent.clone());
    // Only the agents the plan's open tasks name are required: a missing default agent matters
    // only when some task falls back to it. It is still offered when it can be built (tasks
    // merged in later may use it).
    let mut names: BTreeSet<String> = tasks
        .iter()
        .filter(|t| !t.status.is_terminal())
        .map(|t| agent_of(&t.spec, &plan.spec, &default_agent))
        .collect();
    if !names.contains(&default_agent) && configure::unavailable(cfg, &default_agent).is_none() {
        names.insert(default_agent.clone());
    }
    // The plan's fallback agents are offered likewise: a rate limit sends its tasks there.
    for f in fallback_agents(&plan.spec) {
        if configure::unavailable(cfg, &f).is_none() {
            names.insert(f);
        }
    }
    let mut observer = watching.then_some(Observer::Watching);
    if may_observe || watching {
        let missing: Vec<String> = names
            .iter()
            .filter_map(|n| configure::unavailable(cfg, n).map(|why| format!("agent {n:?}: {why}")))
            .collect();
        if !missing.is_empty() {
            names.retain(|n| configure::unavailable(cfg, n).is_none());
            observer.get_or_insert(Observer::MissingAgents(missing.join("; ")));
        }
    }
    let workspaces = Arc::new(open_workspaces(&req.repo_root, cfg)?);
    // A token is looked for only when something here may need GitHub: a task from an issue, or
    // pull requests configured for every task.
    let open_tasks = || tasks.iter().filter(|t| !t.status.is_terminal());
    let has_jira = open_tasks().any(|t| crate::forge::jira::intake::source_of(&t.spec).is_some());
    let wants_github = wants_github(cfg)
        || has_jira
        || open_tasks().any(|t| crate::forge::intake::source_of(&t.spec).is_some());
    let access = github_access(cfg, wants_github)?;
    let executor = build_executor(
        &req,
        store.clone(),
        &default_agent,
        &names,
        workspaces.clone(),
        sessions.clone(),
        access.clone(),
    )?;
    let mut engine_cfg = engine_config(cfg, worker_id());
    engine_cfg.dispatch.default_agent = default_agent.clone();
    engine_cfg.followers = board_setup(cfg, access.as_ref())
        .into_iter()
        .chain(if has_jira { jira_setup(cfg) } else { None })
        .collect();
    engine_cfg.plan_id = Some(plan_id.clone());
    engine_cfg.observer = observer.is_some();
    engine_cfg.panes = panes_setup(cfg, &sessions);
    engine_cfg.slots = req.parallel.unwrap_or(cfg.run.parallel as usize).max(1);
    engine_cfg.run_timeout = req.timeout.or(cfg.run.timeout);
    Ok(RunSetup {
        store,
        plan_id,
        engine_cfg,
        executor,
        sessions,
        repo_root: req.repo_root.clone(),
        config: cfg.clone(),
        observer,
        workspaces,
        initial: Some((plan, tasks)),
    })
}

/// What a worker (`whilly worker`) runs with: any plan on the queue, so every configured agent
/// whose binary exists here is offered (the default one is required).
pub(crate) fn prepare_worker(
    req: RunRequest<'_>,
    store: Arc<dyn Store>,
) -> Result<(EngineConfig, AgentExecutor), SetupError> {
    let cfg = req.config;
    let default_agent = req.agent.clone().unwrap_or_else(|| cfg.run.agent.clone());
    let mut names: BTreeSet<String> = cfg.agents.keys().cloned().collect();
    names.insert("handoff".into());
    names.retain(|n| n == &default_agent || configure::unavailable(cfg, n).is_none());
    let workspaces = Arc::new(open_workspaces(&req.repo_root, cfg)?);
    // A worker serves any plan, and plans from issues may arrive later.
    let access = github_access(cfg, true)?;
    let sessions = SessionRegistry::new();
    let executor = build_executor(
        &req,
        store,
        &default_agent,
        &names,
        workspaces,
        sessions.clone(),
        access.clone(),
    )?;
    let mut engine_cfg = engine_config(cfg, worker_id());
    engine_cfg.dispatch.default_agent = default_agent.clone();
    engine_cfg.panes = panes_setup(cfg, &sessions);
    engine_cfg.followers = board_setup(cfg, access.as_ref())
        .into_iter()
        .chain(jira_setup(cfg))
        .collect();
    engine_cfg.slots = req.parallel.unwrap_or(cfg.run.parallel as usize).max(1);
    Ok((engine_cfg, executor))
}

/// Remote panes: this process's agents' terminals published while a console watches them.
fn panes_setup(cfg: &Config, sessions: &SessionRegistry) -> Option<PanesSetup> {
    cfg.remote.publish.then(|| PanesSetup {
        sessions: sessions.clone(),
        takeover: cfg.remote.takeover,
    })
}

/// The repository's worktrees, once its checkout can take landings: HEAD on a branch, and no
/// rebase, merge, cherry-pick, revert, am or bisect holding that branch. Said before any agent
/// runs, not found when the first task tries to land.
fn open_workspaces(repo_root: &std::path::Path, cfg: &Config) -> Result<Workspaces, SetupError> {
    let ws = Workspaces::new(repo_root, configure::workspace_config(cfg))
        .map_err(|e| SetupError::Environment(format!("{}: {e}", repo_root.display())))?;
    let branch = ws
        .current_branch()
        .map_err(|e| SetupError::Environment(e.to_string()))?;
    // An operation in this checkout (a rebase detaches HEAD) or one holding its branch.
    let here = |p: &std::path::Path| p.canonicalize().ok() == repo_root.canonicalize().ok();
    if let Some(busy) = ws
        .busy_branches()
        .into_iter()
        .find(|b| Some(&b.branch) == branch.as_ref() || here(&b.worktree))
    {
        let op = busy.operation;
        let how = if op == "bisect" {
            "`git bisect reset`".to_string()
        } else {
            format!("`git {op} --continue` or `git {op} --abort`")
        };
        return Err(SetupError::Environment(format!(
            "{}: a {op} of {} is in progress, and whilly never moves a branch under one; finish or abort it ({how}) and run again",
            busy.worktree.display(),
            busy.branch,
        )));
    }
    if cfg.delivery.push && ws.remote_url(&cfg.delivery.remote).is_err() {
        return Err(SetupError::Config(format!(
            "[delivery] push = true lands on the remote {:?}, which {} does not have: add it (`git remote add {} URL`) or set [delivery] remote",
            cfg.delivery.remote,
            repo_root.display(),
            cfg.delivery.remote
        )));
    }
    if branch.is_none() {
        return Err(SetupError::Environment(format!(
            "{}: HEAD is detached, so finished work has no branch to land on; check out the branch tasks should land on (`git switch main`) and run again",
            repo_root.display()
        )));
    }
    Ok(ws)
}

fn build_executor(
    req: &RunRequest<'_>,
    store: Arc<dyn Store>,
    default_agent: &str,
    names: &BTreeSet<String>,
    workspaces: Arc<Workspaces>,
    sessions: SessionRegistry,
    access: Option<configure::GitHubAccess>,
) -> Result<AgentExecutor, SetupError> {
    let cfg = req.config;
    let token = access.as_ref().map(|a| a.token.clone());
    let publisher = access.map(|a| configure::github_publisher(cfg, a, store.clone()));
    let agents = build_agents(cfg, names)?;
    let base_commit = workspaces
        .base_commit()
        .map_err(|e| SetupError::Environment(e.to_string()))?;
    let guards = Guards::new(&cfg.guards.injection_patterns)
        .map_err(|e| SetupError::Config(format!("[guards] injection_patterns: {e}")))?
        .with_secret_lint(cfg.guards.secret_lint);
    let run_id = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ").to_string();
    let exec_cfg = ExecutorConfig {
        run_dir: req.state_dir.join("runs").join(run_id),
        default_agent: default_agent.to_string(),
        agents,
        prices: price_table(cfg),
        guards,
        verification_timeout: Duration::from_secs(cfg.verification.timeout_secs),
        checks: configure::check_policy(cfg),
        verification_env: verification_env(cfg),
        keep_failed: cfg.worktrees.keep_failed,
        sandbox: (cfg.sandbox.mode == crate::config::SandboxMode::Enforce).then(|| {
            let mut always = vec![workspaces.common_dir().to_path_buf()];
            always.extend(cfg.sandbox.allow_write.iter().cloned());
            super::attempt::SandboxSettings {
                always,
                protected: vec![req.repo_root.clone(), workspaces.repo_root().to_path_buf()],
            }
        }),
        landing: crate::domain::landing_lint::LandingLimits {
            secret_lint: cfg.guards.secret_lint,
            max_file_bytes: cfg.delivery.max_file_mb.saturating_mul(1_048_576),
        },
        pty_size: TermSize::new(40, 160),
        scrollback: cfg.tui.scrollback_lines as usize,
        attempt_log_max: cfg.logging.attempt_log_max_mb.saturating_mul(1_048_576),
        grace: Duration::from_secs(cfg.run.grace_period_secs),
        handoff: HandoffDir::in_project(&req.repo_root),
        handoff_timeout: Duration::from_secs(cfg.handoff.timeout_secs),
        handoff_poll: Duration::from_millis(500),
        merge: merge_mode(cfg),
        base_commit,
        default_task_timeout: None,
        lease: Duration::from_secs(cfg.queue.lease_secs.max(1)),
        remote: configure::remote_delivery(cfg, token),
        publisher,
    };
    Ok(AgentExecutor::new(exec_cfg, store, workspaces, sessions))
}

/// Whether the configuration alone asks for GitHub: a repository named, every task as a PR,
/// or a project board.
fn wants_github(cfg: &Config) -> bool {
    cfg.github.repo.is_some()
        || matches!(cfg.delivery.mode, Some(crate::config::DeliveryMode::Pr))
        || cfg.github.project.owner.is_some()
}

/// The GitHub client and token, looked for only when something may need them.
fn github_access(
    cfg: &Config,
    wanted: bool,
) -> Result<Option<configure::GitHubAccess>, SetupError> {
    if wanted {
        configure::github_client(cfg)
    } else {
        Ok(None)
    }
}

/// The Jira sync's setup when `[jira]` names a site (a missing token is a warning: the work
/// runs, its issues do not move).
fn jira_setup(cfg: &Config) -> Option<FollowerSetup> {
    match configure::jira_client(cfg) {
        Ok(Some(client)) => {
            let config = cfg.jira.clone();
            let make: MakeFollower = Arc::new(move |store| {
                let sync = super::jira_sync::JiraSync::new(client.clone(), config.clone(), store);
                Ok(Box::new(sync) as Box<dyn PlanSync>)
            });
            Some(FollowerSetup { name: "Jira", make })
        }
        Ok(None) => None,
        Err(e) => {
            tracing::warn!("Jira issues are not kept in step: {e}");
            None
        }
    }
}

/// The board sync's setup when `[github.project]` names a board and there is a token.
fn board_setup(cfg: &Config, access: Option<&configure::GitHubAccess>) -> Option<FollowerSetup> {
    let p = &cfg.github.project;
    if p.owner.is_none() || p.number.is_none() {
        return None;
    }
    match access {
        Some(a) => {
            let (client, project) = (a.client.clone(), p.clone());
            let make: MakeFollower = Arc::new(move |store| {
                super::board_sync::BoardSync::new(client.clone(), project.clone(), store)
                    .map(|sync| Box::new(sync) as Box<dyn PlanSync>)
                    .map_err(|e| e.to_string())
            });
            Some(FollowerSetup {
                name: "project board",
                make,
            })
        }
        None => {
            tracing::warn!(
                "[github.project] names a board but no GitHub token was found: the board is not kept in step"
            );
            None
        }
    }
}

/// The engine's settings from `[queue]`, `[run]` and `[retry]`.
pub(crate) fn engine_config(cfg: &Config, worker_id: String) -> EngineConfig {
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
    e.dispatch = crate::engine::agent_limits::DispatchConfig {
        default_agent: cfg.run.agent.clone(),
        max_parallel: cfg
            .agents
            .iter()
            .filter_map(|(name, a)| Some((name.clone(), a.max_parallel? as usize)))
            .collect(),
        cooldown: Duration::from_secs(cfg.retry.rate_limit_cooldown_secs),
    };
    e
}

/// `host/pid/random`: unique per process, and tells `--resume` which dead process held a task.
pub(crate) fn worker_id() -> String {
    let nonce: u32 = rand::random();
    format!(
        "{}/{}/{:06x}",
        host_name(),
        std::process::id(),
        nonce & 0xff_ffff
    )
}

/// This machine's name as worker ids and the workers list show it.
pub(crate) fn host_name() -> String {
    hostname::get()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "host".into())
}
