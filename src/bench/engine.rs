//! `whilly bench engine`: what the engine costs per task on top of the work it cannot avoid.
//!
//! The engine runs N trivial tasks end to end in a scratch repository (claim → worktree → agent
//! in a PTY → exit → commit → merge back → DONE) with an agent that only prints the completion
//! marker. The baseline, measured in the same run on the same repository with the same
//! parallelism, is the bare minimum any such tool pays per task: `git worktree add` + spawning a
//! process (`true`) + `git worktree remove` through the git CLI. Their ratio is the overhead.

use crate::agent::{self, AgentSettings, BackendKind, Guards, HandoffDir, PriceTable};
use crate::bench::git;
use crate::domain::{PlanSpec, Priority, TaskSpec};
use crate::engine::attempt::{AgentExecutor, ExecutorConfig};
use crate::engine::sessions::SessionRegistry;
use crate::engine::{Engine, EngineConfig, RunEnd, StopLevel};
use crate::pty::TermSize;
use crate::store::open::{DatabaseTarget, open, state_dir};
use crate::store::{Event, EventFilter, ImportOptions, event_types};
use crate::workspace::{MergeMode, WorkspaceConfig, Workspaces};
use anyhow::{Context as _, bail};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Targets on a 2-core machine: engine per-task cost at most twice the bare cost, and at least
/// this many tasks per second end to end.
pub(crate) const TARGET_RATIO: f64 = 2.0;
pub(crate) const TARGET_TASKS_PER_SEC: f64 = 20.0;

/// The agent: prints the marker and exits (no shell, no file changes).
const INSTANT_AGENT: &str = "echo <promise>COMPLETE</promise>";

/// The repository the tasks run in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RepoSource {
    /// A scratch repository of this many small files in one commit.
    Generated(usize),
    /// A local clone of a real repository (its working tree checked out once, not timed).
    Clone(std::path::PathBuf),
}

impl fmt::Display for RepoSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RepoSource::Generated(n) => write!(f, "a generated repository of {n} files"),
            RepoSource::Clone(p) => write!(f, "a clone of {}", p.display()),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct EngineBenchReport {
    pub tasks: usize,
    pub slots: usize,
    /// Where the tasks ran, in words.
    pub repository: String,
    /// Files in the repository's tree.
    pub files: usize,
    /// Importing the plan into the queue (not part of the per-task figures).
    pub import: Duration,
    /// The check each task runs (`true` unless `--check` says otherwise).
    pub check: String,
    /// The engine with `[worktrees] pool = 0`: a fresh worktree per task, removed after.
    pub fresh: EngineRun,
    /// The engine with a pool of `slots` worktrees (the default configuration's way).
    pub pooled: EngineRun,
    /// `git worktree add` + spawn `true` + `git worktree remove`, N times, `slots` at a time.
    pub bare: Duration,
}

/// One run of the engine over the plan.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct EngineRun {
    /// First claim to last DONE.
    pub took: Duration,
    /// Tasks finished DONE (must equal the plan's).
    pub done: u64,
    /// Where a task's time goes, from the audit trail's timestamps.
    pub phases: Phases,
    /// Wall time per task once the first `slots` tasks are done (the pool filled, caches
    /// warm): the steady state a long plan sees. `None` with no more tasks than slots.
    pub steady: Option<Duration>,
}

/// Wall time per task after the first `slots` tasks ended, from the `task.done` timestamps.
pub(crate) fn steady_per_task(events: &[Event], slots: usize) -> Option<Duration> {
    let mut done: Vec<i64> = events
        .iter()
        .filter(|e| e.event_type == event_types::TASK_DONE)
        .map(|e| e.ts.timestamp_micros())
        .collect();
    done.sort_unstable();
    let n = done.len();
    if n <= slots || slots == 0 {
        return None;
    }
    let span = u64::try_from(done[n - 1] - done[slots - 1]).ok()?;
    Some(Duration::from_micros(span) / u32::try_from(n - slots).ok()?)
}

/// Mean time of each step of a task, in milliseconds (from event timestamps).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub(crate) struct Phases {
    /// Claim → the attempt is IN_PROGRESS (store start, guards, prompt).
    pub claim_to_start_ms: f64,
    /// IN_PROGRESS → DONE: worktree, PTY spawn, agent exit, result, commit, merge, cleanup.
    pub start_to_done_ms: f64,
}

/// Mean claim→start and start→done over every task that has all three events.
pub(crate) fn phase_means(events: &[Event]) -> Phases {
    let mut at: HashMap<&str, [Option<i64>; 3]> = HashMap::new();
    for e in events {
        let Some(task) = e.task_id.as_deref() else {
            continue;
        };
        let slot = match e.event_type.as_str() {
            event_types::TASK_CLAIMED => 0,
            event_types::TASK_STARTED => 1,
            event_types::TASK_DONE => 2,
            _ => continue,
        };
        at.entry(task).or_default()[slot] = Some(e.ts.timestamp_micros());
    }
    let (mut n, mut a, mut b) = (0u32, 0i64, 0i64);
    for times in at.values() {
        if let [Some(c), Some(s), Some(d)] = *times {
            n += 1;
            a += s - c;
            b += d - s;
        }
    }
    if n == 0 {
        return Phases::default();
    }
    let mean_ms = |total: i64| total as f64 / f64::from(n) / 1000.0;
    Phases {
        claim_to_start_ms: mean_ms(a),
        start_to_done_ms: mean_ms(b),
    }
}

impl EngineBenchReport {
    pub(crate) fn bare_tasks_per_sec(&self) -> f64 {
        per_sec(self.tasks, self.bare)
    }

    pub(crate) fn bare_per_task(&self) -> Duration {
        per_task(self.bare, self.tasks)
    }

    /// Wall time per task of a run (`slots` run at once: throughput, not latency).
    pub(crate) fn per_task(&self, run: &EngineRun) -> Duration {
        per_task(run.took, self.tasks)
    }

    pub(crate) fn tasks_per_sec(&self, run: &EngineRun) -> f64 {
        per_sec(self.tasks, run.took)
    }

    /// A run's cost over the bare cost (1.0: the same as git's own add and remove).
    pub(crate) fn ratio(&self, run: &EngineRun) -> f64 {
        let bare = self.bare.as_secs_f64();
        if bare > 0.0 {
            run.took.as_secs_f64() / bare
        } else {
            f64::INFINITY
        }
    }

    /// The targets, on the pooled run (the default configuration).
    pub(crate) fn meets_targets(&self) -> bool {
        self.ratio(&self.pooled) <= TARGET_RATIO
            && self.tasks_per_sec(&self.pooled) >= TARGET_TASKS_PER_SEC
    }
}

fn per_sec(n: usize, d: Duration) -> f64 {
    let s = d.as_secs_f64();
    if s > 0.0 { n as f64 / s } else { 0.0 }
}

fn per_task(d: Duration, n: usize) -> Duration {
    d / u32::try_from(n.max(1)).unwrap_or(u32::MAX)
}

impl fmt::Display for EngineBenchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        writeln!(
            f,
            "engine bench: {} tasks, {} slots, an agent that prints the marker and exits, check `{}`, in {} ({} files)",
            self.tasks, self.slots, self.check, self.repository, self.files
        )?;
        writeln!(
            f,
            "  {:<62}{:>8.2} s  {:>6.1} tasks/s  {:>7.1} ms/task",
            "bare git CLI (worktree add → spawn true → worktree remove):",
            self.bare.as_secs_f64(),
            self.bare_tasks_per_sec(),
            ms(self.bare_per_task())
        )?;
        for (name, run) in [
            ("whilly, fresh worktrees (pool = 0):", &self.fresh),
            ("whilly, pooled worktrees (pool = slots):", &self.pooled),
        ] {
            let steady = run
                .steady
                .map(|d| format!(", {:.1} ms/task after the first {}", ms(d), self.slots))
                .unwrap_or_default();
            writeln!(
                f,
                "  {name:<62}{:>8.2} s  {:>6.1} tasks/s  {:>7.1} ms/task  {:.2}× bare{steady}",
                run.took.as_secs_f64(),
                self.tasks_per_sec(run),
                ms(self.per_task(run)),
                self.ratio(run)
            )?;
        }
        writeln!(
            f,
            "  pooled / fresh: {:.2}×   (targets, pooled: ≤ {TARGET_RATIO}× bare and ≥ {TARGET_TASKS_PER_SEC} tasks/s: {})",
            self.pooled.took.as_secs_f64() / self.fresh.took.as_secs_f64().max(1e-9),
            if self.meets_targets() {
                "met"
            } else {
                "NOT met"
            }
        )?;
        for (name, run) in [("fresh", &self.fresh), ("pooled", &self.pooled)] {
            writeln!(
                f,
                "  one task, mean, {name}: claim → IN_PROGRESS {:.1} ms, IN_PROGRESS → DONE {:.1} ms",
                run.phases.claim_to_start_ms, run.phases.start_to_done_ms
            )?;
        }
        write!(
            f,
            "  (plan import, not counted: {:.1} ms; DONE: fresh {}, pooled {}, of {} tasks)",
            ms(self.import),
            self.fresh.done,
            self.pooled.done,
            self.tasks
        )
    }
}

/// What `whilly bench engine` measures.
#[derive(Debug, Clone)]
pub(crate) struct EngineBenchOpts {
    pub tasks: usize,
    pub slots: usize,
    pub source: RepoSource,
    /// The check each task runs; `None`: `true`.
    pub check: Option<String>,
}

/// Runs both measurements in a repository under the temp dir (generated, or a clone of
/// `source`'s) and removes it after.
pub(crate) async fn run(opts: &EngineBenchOpts) -> anyhow::Result<EngineBenchReport> {
    let (tasks, source) = (opts.tasks, &opts.source);
    if tasks == 0 {
        bail!("--tasks must be at least 1");
    }
    let slots = opts.slots.max(1);
    let check = opts.check.clone().unwrap_or_else(|| "true".into());
    let scratch = tempfile::Builder::new()
        .prefix("whilly-bench-engine-")
        .tempdir()
        .context("cannot create a scratch directory in the temp dir")?;
    let repo = scratch.path().join("repo");
    let worktrees = scratch.path().join("worktrees");
    let files = match source {
        RepoSource::Generated(n) => {
            std::fs::create_dir_all(&repo)
                .with_context(|| format!("cannot create {}", repo.display()))?;
            init_repo(&repo, (*n).max(1))?;
            (*n).max(1)
        }
        RepoSource::Clone(from) => clone_repo(from, &repo)?,
    };

    let bare = {
        let (repo, worktrees) = (repo.clone(), worktrees.join("bare"));
        tokio::task::spawn_blocking(move || bare_rounds(&repo, &worktrees, tasks, slots))
            .await
            .context("the bare benchmark thread stopped")??
    };
    let store = open(
        &DatabaseTarget::Sqlite(state_dir(&repo).join("whilly.db")),
        &repo,
    )
    .await?;
    let round = |plan: &'static str, pool: usize| Round {
        repo: &repo,
        worktrees: worktrees.join(plan),
        store: store.clone(),
        plan,
        tasks,
        slots,
        pool,
        check: &check,
    };
    let (import, fresh) = round("bench-fresh", 0).run().await?;
    let (_, pooled) = round("bench-pooled", slots).run().await?;
    Ok(EngineBenchReport {
        tasks,
        slots,
        repository: source.to_string(),
        files,
        import,
        check,
        fresh,
        pooled,
        bare,
    })
}

/// A repository with one commit holding `files` small files, 1,000 to a directory (a large
/// monorepo's shape, when `files` is large).
fn init_repo(repo: &Path, files: usize) -> anyhow::Result<()> {
    git(repo, &["init", "-q"])?;
    git(repo, &["config", "user.name", "whilly bench"])?;
    git(repo, &["config", "user.email", "bench@whilly.invalid"])?;
    for i in 0..files {
        let path = repo.join(format!("src/d{:03}/file{i}.txt", i / 1000));
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, format!("file {i}\n").repeat(50))?;
    }
    std::fs::write(repo.join(".gitignore"), ".whilly/\n")?;
    git(repo, &["add", "-A"])?;
    git(repo, &["commit", "-q", "-m", "bench base"])?;
    Ok(())
}

/// A local clone of `from` at `to` (objects hard-linked, the tree checked out once): the
/// repository measured on, never `from` itself. Returns the files in its tree.
fn clone_repo(from: &Path, to: &Path) -> anyhow::Result<usize> {
    let from_s = from.to_string_lossy().into_owned();
    let to_s = to.to_string_lossy().into_owned();
    let parent = to.parent().unwrap_or(Path::new("/"));
    git(parent, &["clone", "-q", &from_s, &to_s])
        .with_context(|| format!("cannot clone {} (is it a git repository?)", from.display()))?;
    git(to, &["config", "user.name", "whilly bench"])?;
    git(to, &["config", "user.email", "bench@whilly.invalid"])?;
    // The queue's directory stays out of the commits without changing the tree.
    let exclude = to.join(".git/info/exclude");
    let mut text = std::fs::read_to_string(&exclude).unwrap_or_default();
    text.push_str("\n.whilly/\n");
    std::fs::write(&exclude, text)?;
    let listed = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(to)
        .output()
        .context("cannot run git ls-files")?;
    Ok(listed.stdout.iter().filter(|b| **b == 0).count())
}

/// The baseline: N rounds of add → spawn → remove through the git CLI, `slots` threads at once.
fn bare_rounds(repo: &Path, base: &Path, n: usize, slots: usize) -> anyhow::Result<Duration> {
    std::fs::create_dir_all(base)?;
    let next = AtomicUsize::new(0);
    // `git worktree add/remove` are not safe to run at once on one repository (they race on
    // `.git/worktrees`), so the git calls take turns; the spawns overlap.
    let git_turn = std::sync::Mutex::new(());
    let git_locked = |args: &[&str]| -> anyhow::Result<()> {
        let _turn = git_turn
            .lock()
            .map_err(|_| anyhow::anyhow!("a bare worker panicked"))?;
        git(repo, args)
    };
    let started = Instant::now();
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..slots.min(n))
            .map(|_| {
                s.spawn(|| -> anyhow::Result<()> {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            return Ok(());
                        }
                        let dir = base.join(format!("T-{i:06}"));
                        let dir_s = dir.to_string_lossy().into_owned();
                        let branch = format!("bare/T-{i:06}");
                        git_locked(&["worktree", "add", "-q", "-b", &branch, &dir_s, "HEAD"])?;
                        let status = Command::new("true")
                            .current_dir(&dir)
                            .status()
                            .context("cannot spawn `true`")?;
                        if !status.success() {
                            bail!("`true` failed: {status}");
                        }
                        git_locked(&["worktree", "remove", "--force", &dir_s])?;
                    }
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| {
            w.join()
                .map_err(|_| anyhow::anyhow!("a bare worker panicked"))?
        })
    })?;
    let took = started.elapsed();
    // Not timed: the engine deletes its merged branches, so the repo is left as it was.
    let branches: Vec<String> = (0..n).map(|i| format!("bare/T-{i:06}")).collect();
    for chunk in branches.chunks(200) {
        let mut args = vec!["branch", "-q", "-D"];
        args.extend(chunk.iter().map(String::as_str));
        git(repo, &args)?;
    }
    Ok(took)
}

/// One run of the real engine over its own plan of `tasks` tasks.
struct Round<'a> {
    repo: &'a Path,
    worktrees: std::path::PathBuf,
    store: Arc<dyn crate::store::Store>,
    plan: &'static str,
    tasks: usize,
    slots: usize,
    pool: usize,
    check: &'a str,
}

impl Round<'_> {
    /// The engine, built the way `whilly run` builds it; returns (import time, the run).
    async fn run(self) -> anyhow::Result<(Duration, EngineRun)> {
        let (repo, store, plan_id, n, slots) = (
            self.repo,
            self.store.clone(),
            self.plan,
            self.tasks,
            self.slots,
        );
        let started = Instant::now();
        store
            .import_plan(
                &bench_plan(plan_id, n, self.check),
                &ImportOptions {
                    default_max_attempts: 1,
                    ..Default::default()
                },
            )
            .await?;
        let import = started.elapsed();

        let workspaces = Workspaces::new(
            repo,
            WorkspaceConfig {
                base_dir: Some(self.worktrees.clone()),
                include: Vec::new(),
                setup_command: None,
                merge: MergeMode::Ff,
                pool: self.pool,
                ..WorkspaceConfig::default()
            },
        )?;
        let base_commit = workspaces.base_commit()?;
        let mut settings = AgentSettings::new(BackendKind::Command);
        settings.name = "bench".into();
        settings.command = Some(INSTANT_AGENT.into());
        let mut agents = BTreeMap::new();
        agents.insert("bench".to_string(), agent::build_runner(&settings)?);
        let exec_cfg = ExecutorConfig {
            run_dir: state_dir(repo).join("runs").join("bench"),
            default_agent: "bench".into(),
            agents,
            prices: PriceTable::new(),
            guards: Guards::new(&[])?,
            verification_timeout: Duration::from_secs(3600),
            // The task's one `true` check only: a real repository's own checks (its test suite)
            // are the work, not what whilly costs per task.
            checks: crate::engine::checks::CheckPolicy {
                test_steps: true,
                profile: false,
            },
            // What a real run's checks see by default (`[verification] env_allowlist`), so a build
            // given with `--check` finds its toolchain and caches.
            verification_env: crate::engine::configure::verification_env(
                &crate::config::Config::default(),
            ),
            keep_failed: true,
            sandbox: None,
            landing: crate::domain::landing_lint::LandingLimits {
                secret_lint: true,
                max_file_bytes: 10 * 1_048_576,
            },
            pty_size: TermSize::new(40, 160),
            scrollback: 1000,
            attempt_log_max: 0,
            grace: Duration::from_secs(1),
            handoff: HandoffDir::in_project(repo),
            handoff_timeout: Duration::from_secs(60),
            handoff_poll: Duration::from_millis(500),
            merge: MergeMode::Ff,
            base_commit,
            // A safety net, not a limit to measure against: on a 100,000-file repository one
            // task's worktree alone takes minutes on a slow disk.
            default_task_timeout: Some(Duration::from_secs(1800)),
            lease: EngineConfig::new("").lease,
            remote: Default::default(),
            publisher: None,
        };
        let executor = AgentExecutor::new(
            exec_cfg,
            store.clone(),
            Arc::new(workspaces),
            SessionRegistry::new(),
        );
        let mut cfg = EngineConfig::new(format!("bench/{}/0", std::process::id()));
        cfg.plan_id = Some(plan_id.to_string());
        cfg.slots = slots;
        cfg.retry_backoff = vec![1];
        cfg.grace = Duration::from_secs(1);
        // The sender must outlive the run: a closed channel would wake the loop on every turn.
        let (_stop, stop_rx) = tokio::sync::watch::channel(StopLevel::Run);
        let engine = Engine::new(store.clone(), Arc::new(executor), cfg, stop_rx);
        let started = Instant::now();
        let summary = engine.run().await?;
        let took = started.elapsed();
        if summary.end != RunEnd::AllDone {
            let failed = store
                .list_tasks(plan_id)
                .await?
                .into_iter()
                .find(|t| t.status != crate::domain::Status::Done);
            bail!(
                "the engine did not finish the benchmark plan ({:?}, {} of {n} done); first unfinished task: {}",
                summary.end,
                summary.done,
                failed
                    .map(|t| format!("{} {} {}", t.id, t.status, t.reason.unwrap_or_default()))
                    .unwrap_or_default()
            );
        }
        let events = store
            .events(&EventFilter {
                plan_id: Some(plan_id.to_string()),
                ..Default::default()
            })
            .await?;
        Ok((
            import,
            EngineRun {
                took,
                done: summary.done,
                phases: phase_means(&events),
                steady: steady_per_task(&events, slots),
            },
        ))
    }
}

fn bench_plan(id: &str, n: usize, check: &str) -> PlanSpec {
    PlanSpec {
        id: id.to_string(),
        project: id.to_string(),
        tasks: (0..n)
            .map(|i| TaskSpec {
                id: format!("T-{i:06}"),
                priority: Priority::Medium,
                description: format!("engine benchmark task {i}: print the marker and exit"),
                acceptance_criteria: vec!["the agent prints the marker".into()],
                // A check that always passes: the agents change nothing, and a task whose
                // agent changed nothing with no check to show the work is there is FAILED.
                test_steps: vec![check.to_string()],
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn report(engine_ms: u64, bare_ms: u64) -> EngineBenchReport {
        let run = |ms: u64| EngineRun {
            took: Duration::from_millis(ms),
            done: 100,
            phases: Phases::default(),
            steady: None,
        };
        EngineBenchReport {
            tasks: 100,
            slots: 3,
            repository: RepoSource::Generated(20).to_string(),
            files: 20,
            import: Duration::from_millis(5),
            check: "true".into(),
            fresh: run(engine_ms * 2),
            pooled: run(engine_ms),
            bare: Duration::from_millis(bare_ms),
        }
    }

    fn opts(tasks: usize, slots: usize) -> EngineBenchOpts {
        EngineBenchOpts {
            tasks,
            slots,
            source: RepoSource::Generated(20),
            check: None,
        }
    }

    #[test]
    fn figures_and_targets() {
        let r = report(4000, 2500);
        assert!((r.ratio(&r.pooled) - 1.6).abs() < 1e-9);
        assert!((r.tasks_per_sec(&r.pooled) - 25.0).abs() < 1e-9);
        assert_eq!(r.per_task(&r.pooled), Duration::from_millis(40));
        assert!(r.meets_targets());
        assert!(!report(6000, 2500).meets_targets(), "too slow and over 2×");
        assert!(!report(5100, 5000).meets_targets(), "under 20 tasks/s");
        let text = r.to_string();
        assert!(text.contains("1.60×") && text.contains("met"), "{text}");
    }

    fn event(id: i64, kind: &str, task: &str, ms: i64) -> Event {
        Event {
            id,
            ts: chrono::DateTime::from_timestamp_millis(ms).unwrap(),
            event_type: kind.into(),
            plan_id: Some("p".into()),
            task_id: Some(task.into()),
            worker_id: None,
            epoch: None,
            from_status: None,
            to_status: None,
            payload: serde_json::Value::Null,
        }
    }

    #[test]
    fn phases_average_complete_tasks_only() {
        let ev = [
            event(1, event_types::TASK_CLAIMED, "A", 1000),
            event(2, event_types::TASK_STARTED, "A", 1010),
            event(3, event_types::TASK_DONE, "A", 1050),
            event(4, event_types::TASK_CLAIMED, "B", 2000),
            event(5, event_types::TASK_STARTED, "B", 2030),
            event(6, event_types::TASK_DONE, "B", 2090),
            event(7, event_types::TASK_CLAIMED, "C", 3000),
        ];
        let p = phase_means(&ev);
        // Done at 1050 and 2090: after the first, one task in 1040 ms.
        assert_eq!(steady_per_task(&ev, 1), Some(Duration::from_millis(1040)));
        assert_eq!(steady_per_task(&ev, 2), None);
        assert!((p.claim_to_start_ms - 20.0).abs() < 1e-9, "{p:?}");
        assert!((p.start_to_done_ms - 50.0).abs() < 1e-9, "{p:?}");
        assert_eq!(phase_means(&[]), Phases::default());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn runs_a_small_plan_end_to_end() {
        let r = run(&opts(4, 2)).await.unwrap();
        assert_eq!((r.fresh.done, r.pooled.done), (4, 4));
        assert!(r.fresh.took > Duration::ZERO && r.bare > Duration::ZERO);
        assert!(run(&opts(0, 1)).await.is_err());
    }

    /// The full benchmark, for measuring by hand:
    /// `cargo test --release --lib bench::engine::tests::full -- --ignored --nocapture`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore]
    async fn full() {
        let tasks = std::env::var("WHILLY_BENCH_TASKS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(100);
        let slots = std::env::var("WHILLY_BENCH_SLOTS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(3);
        println!("{}", run(&opts(tasks, slots)).await.unwrap());
    }
}
