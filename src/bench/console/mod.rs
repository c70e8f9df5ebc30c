//! `whilly bench console`: the real console (`whilly tui`, this very binary) measured from the
//! outside, in a terminal of its own, against tmux in the same run.
//!
//! - drain: N agents each `cat` the same coloured stream into their panes; the console's span
//!   (first task started → last task DONE, from the audit trail; an attempt ends only once its
//!   PTY output is drained) against N tmux panes `cat`ing the same file, detached and with a
//!   client attached to a terminal like the console's.
//! - idle: N agents print more lines than the scrollback holds, then wait; the console's CPU
//!   over a quiet window and its RSS, against tmux holding the same panes.
//! - first frame: the console started on a paused N-thousand-task plan, timed at its terminal
//!   until the first frame and until the frame that shows the plan, against a one-task plan.
//!
//! CPU and memory come from `/proc` of the whilly processes (the launcher and the console it
//! runs; not the agents); frames are recognised by the
//! synchronized-update brackets the console puts around each (see [`host`]).

pub(crate) mod host;
pub(crate) mod procfs;
pub(crate) mod report;
pub(crate) mod scale;
pub(crate) mod scratch;
pub mod tmux;

use crate::store::{EventFilter, event_types};
use anyhow::{Context as _, bail};
use host::{HostSpec, TermHost};
pub use report::{
    ConsoleBenchReport, DrainFigures, FirstFrame, FirstFrameFigures, IdleFigures, TmuxRun, Usage,
};
use scratch::{BenchRepo, DRAIN_AGENT, IDLE_AGENT};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tmux::TmuxPanes;

/// Scrollback of each pane, in the console (`tui.scrollback_lines`) and in tmux
/// (`history-limit`).
pub const SCROLLBACK: usize = 5000;
/// How long an idle agent (or tmux pane) waits before it gives up by itself.
const HOLD_SECS: u64 = 600;
/// Quiet time after the idle panes are ready and before the window opens.
const SETTLE: Duration = Duration::from_secs(2);

#[derive(Debug, Clone)]
pub struct ConsoleBenchOptions {
    /// The whilly binary to measure (`std::env::current_exe()` from the CLI).
    pub whilly: PathBuf,
    pub panes: usize,
    /// MiB of coloured output per pane in the drain case.
    pub mb: u64,
    /// Length of the idle window.
    pub idle_secs: u64,
    /// MiB each idle agent prints first (1 MiB ≈ 9,500 lines: more than the scrollback).
    pub idle_mb: u64,
    pub first_frame_tasks: usize,
    pub first_frame_runs: usize,
    pub rows: u16,
    pub cols: u16,
    /// Measure tmux too (skipped with a note when it is not installed).
    pub tmux: bool,
    pub cases: BenchCases,
    /// The big plan of the scale cases (the other one has `first_frame_tasks`).
    pub big_tasks: usize,
    /// The Postgres server the idle database load is measured on (a scratch database is
    /// created there and dropped after).
    pub database_url: Option<String>,
    /// Length of each idle database window.
    pub db_secs: u64,
}

/// Which measurements run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BenchCases {
    pub drain: bool,
    pub idle: bool,
    pub first_frame: bool,
    /// The console idle on paused plans of `first_frame_tasks` and `big_tasks` tasks.
    pub big_idle: bool,
    /// The drain with its agents in a plan of `first_frame_tasks` tasks.
    pub live_big: bool,
    pub db_load: bool,
}

impl BenchCases {
    pub const ALL: BenchCases = BenchCases {
        drain: true,
        idle: true,
        first_frame: true,
        big_idle: true,
        live_big: true,
        db_load: true,
    };
    pub const NAMES: &'static str = "drain, idle, first-frame, big-idle, live-big, db-load";

    /// A comma-separated list of case names (see [`BenchCases::NAMES`]).
    pub fn parse(list: &str) -> Result<BenchCases, String> {
        let mut c = BenchCases {
            drain: false,
            idle: false,
            first_frame: false,
            big_idle: false,
            live_big: false,
            db_load: false,
        };
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let slot = match name {
                "drain" => &mut c.drain,
                "idle" => &mut c.idle,
                "first-frame" => &mut c.first_frame,
                "big-idle" => &mut c.big_idle,
                "live-big" => &mut c.live_big,
                "db-load" => &mut c.db_load,
                other => {
                    return Err(format!(
                        "unknown console bench case {other:?}; the cases are {}",
                        BenchCases::NAMES
                    ));
                }
            };
            *slot = true;
        }
        Ok(c)
    }
}

impl ConsoleBenchOptions {
    /// The case: 8 panes × 30 MB, a 10,000-task plan, a 200×60 terminal.
    pub fn new(whilly: PathBuf) -> ConsoleBenchOptions {
        ConsoleBenchOptions {
            whilly,
            panes: 8,
            mb: 30,
            idle_secs: 10,
            idle_mb: 1,
            first_frame_tasks: 10_000,
            first_frame_runs: 3,
            rows: 60,
            cols: 200,
            tmux: true,
            cases: BenchCases::ALL,
            big_tasks: 100_000,
            database_url: None,
            db_secs: 30,
        }
    }
}

/// Runs the three measurements in a scratch project under the temp dir, removed after.
pub async fn run(opts: &ConsoleBenchOptions) -> anyhow::Result<ConsoleBenchReport> {
    if opts.panes == 0 || opts.panes > 16 {
        bail!("--panes must be between 1 and 16");
    }
    if opts.mb == 0 || opts.idle_mb == 0 {
        bail!("--mb must be at least 1");
    }
    let tmux_note = if !opts.tmux {
        Some("--no-tmux".to_string())
    } else if !tmux::available() {
        Some("tmux is not installed (no `tmux -V`)".to_string())
    } else {
        None
    };
    let streams = tempfile::Builder::new()
        .prefix("whilly-bench-streams-")
        .tempdir()
        .context("cannot create a directory for the streams")?;
    let drain_file = streams.path().join("drain.ansi");
    let bytes_per_pane = write_stream(&drain_file, opts.mb)?;
    let idle_file = streams.path().join("idle.ansi");
    write_stream(&idle_file, opts.idle_mb)?;
    let idle_lines = count_lines(&idle_file)?;
    let repo = BenchRepo::create(&opts.whilly, &drain_file, &idle_file, HOLD_SECS)?;
    let mut report = ConsoleBenchReport {
        panes: opts.panes,
        rows: opts.rows,
        cols: opts.cols,
        drain: None,
        idle: None,
        first_frame: None,
        big_idle: Vec::new(),
        live_big: None,
        live_big_tasks: opts.first_frame_tasks,
        db_load: None,
        db_note: None,
        tmux_note,
    };
    let result = measure(
        opts,
        &repo,
        &mut report,
        bytes_per_pane,
        idle_lines,
        &drain_file,
        &idle_file,
    )
    .await;
    if result.is_err() && std::env::var_os("WHILLY_BENCH_KEEP").is_some() {
        eprintln!("scratch project kept: {}", repo.keep().display());
    }
    result?;
    Ok(report)
}

async fn measure(
    opts: &ConsoleBenchOptions,
    repo: &BenchRepo,
    report: &mut ConsoleBenchReport,
    bytes_per_pane: u64,
    idle_lines: usize,
    drain_file: &Path,
    idle_file: &Path,
) -> anyhow::Result<()> {
    let with_tmux = opts.tmux && tmux::available();
    let cases = opts.cases;
    let mut tmux_drain = (None, None);
    if (cases.drain || cases.live_big) && with_tmux {
        tmux_drain = (
            Some(drain_tmux(opts, repo, drain_file, false).await?),
            Some(drain_tmux(opts, repo, drain_file, true).await?),
        );
    }
    if cases.drain {
        let mut drain = drain_console(opts, repo, bytes_per_pane).await?;
        (drain.tmux_detached, drain.tmux_attached) = tmux_drain;
        report.drain = Some(drain);
    }
    if cases.live_big {
        report.live_big = Some(
            scale::live_big(
                opts,
                repo,
                bytes_per_pane,
                opts.first_frame_tasks.max(opts.panes),
                tmux_drain,
            )
            .await?,
        );
    }
    if cases.idle {
        let (whilly, frames) = idle_console(opts, repo, "idle", opts.panes).await?;
        let (spare, _) = idle_console(opts, repo, "idle-spare", opts.panes + 1).await?;
        let mut idle = IdleFigures {
            lines_per_pane: idle_lines,
            scrollback: SCROLLBACK,
            window: Duration::from_secs(opts.idle_secs),
            whilly,
            frames,
            spare_slot: spare,
            tmux: None,
        };
        if with_tmux {
            idle.tmux = Some(idle_tmux(opts, repo, idle_file).await?);
        }
        report.idle = Some(idle);
    }
    if cases.first_frame {
        report.first_frame = Some(first_frames(opts, repo).await?);
    }
    if cases.big_idle {
        for tasks in [opts.first_frame_tasks, opts.big_tasks] {
            report
                .big_idle
                .push(scale::idle_big(opts, repo, tasks.max(1)).await?);
        }
    }
    if cases.db_load {
        match &opts.database_url {
            Some(server) => match scale::db_load(opts, repo, server).await {
                Ok(load) => report.db_load = Some(load),
                Err(e) => report.db_note = Some(format!("{e:#}")),
            },
            None => report.db_note = Some("no Postgres server given".to_string()),
        }
    }
    Ok(())
}

fn write_stream(path: &Path, mb: u64) -> anyhow::Result<u64> {
    let mut file = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
    );
    crate::bench::pty_drain::write_coloured_stream(&mut file, mb)
        .with_context(|| format!("cannot write {}", path.display()))
}

fn count_lines(path: &Path) -> anyhow::Result<usize> {
    let data = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(data.iter().filter(|b| **b == b'\n').count())
}

/// The console in a terminal of its own: `whilly tui --plan <plan> -j <panes>`.
fn start_console(
    opts: &ConsoleBenchOptions,
    repo: &BenchRepo,
    plan: &str,
    parallel: usize,
    needle: Option<String>,
) -> anyhow::Result<TermHost> {
    let parallel = parallel.to_string();
    let dir = repo.repo();
    TermHost::spawn(HostSpec {
        argv: repo.argv(&["tui", "--plan", plan, "-j", &parallel]),
        cwd: &dir,
        env: repo.env(),
        env_remove: BenchRepo::env_remove(),
        rows: opts.rows,
        cols: opts.cols,
        needle,
    })
    .with_context(|| format!("cannot start {}", opts.whilly.display()))
}

/// The console: the process the bench started (the launcher) with the console it runs.
fn sample(pid: u32, who: &str) -> anyhow::Result<procfs::ProcSample> {
    procfs::sample_with_same_children(pid)
        .with_context(|| format!("cannot read /proc for {who} (pid {pid})"))
}

async fn drain_console(
    opts: &ConsoleBenchOptions,
    repo: &BenchRepo,
    bytes_per_pane: u64,
) -> anyhow::Result<DrainFigures> {
    let plan_id = "drain";
    repo.import(&scratch::plan(plan_id, DRAIN_AGENT, opts.panes))?;
    let store = repo.store().await?;
    let mut console = start_console(opts, repo, plan_id, opts.panes, None)?;
    // Generous: a whole MB per second per pane on a loaded machine, plus start-up.
    let limit = Duration::from_secs(60 + opts.mb * opts.panes as u64);
    let tasks = loop {
        let tasks = store.list_tasks(plan_id).await?;
        let (ended, bad) = scratch::finished(&tasks);
        if let Some(t) = bad {
            bail!(
                "drain task {} ended {} ({})",
                t.id,
                t.status,
                t.reason.clone().unwrap_or_default()
            );
        }
        if ended {
            break tasks;
        }
        if !console.running() {
            bail!("the console exited before the drain ended");
        }
        if console.started().elapsed() > limit {
            bail!("the drain did not end within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let end = end_drain(console, store.as_ref(), plan_id).await?;
    Ok(DrainFigures {
        bytes_per_pane,
        whilly: end.span,
        whilly_wall: end.wall,
        whilly_cpu: end.cpu,
        frames: end.frames,
        terminal_bytes: end.terminal_bytes,
        done: tasks
            .iter()
            .filter(|t| t.status == crate::domain::Status::Done)
            .count(),
        logged: repo.output_log_sizes(),
        tmux_detached: None,
        tmux_attached: None,
    })
}

/// What a drained console leaves to measure once it is stopped.
pub(super) struct DrainEnd {
    /// From the first attempt's start to the last DONE, from the audit trail.
    pub span: Duration,
    pub wall: Duration,
    pub cpu: Duration,
    pub frames: u64,
    pub terminal_bytes: u64,
    /// DONE events of the drain tasks.
    pub done: usize,
}

/// Stops a console whose drain has ended and reads its figures: its wall time, CPU, frames and
/// bytes, and the drain's span from the plan's audit trail.
pub(super) async fn end_drain(
    mut console: TermHost,
    store: &dyn crate::store::Store,
    plan_id: &str,
) -> anyhow::Result<DrainEnd> {
    let wall = console.started().elapsed();
    let cpu = sample(console.pid(), "the console")?.cpu;
    let (frames, terminal_bytes) = (console.frames(), console.bytes());
    console.stop(Duration::from_secs(20)).await;
    let events = store
        .events(&EventFilter {
            plan_id: Some(plan_id.to_string()),
            ..Default::default()
        })
        .await?;
    let at = |kind: &'static str| events.iter().filter(move |e| e.event_type == kind);
    let first_start = at(event_types::TASK_STARTED).map(|e| e.ts).min();
    let last_done = at(event_types::TASK_DONE).map(|e| e.ts).max();
    let span = match (first_start, last_done) {
        (Some(a), Some(b)) => (b - a).to_std().unwrap_or_default(),
        _ => bail!("the audit trail has no start or DONE of the drain tasks"),
    };
    Ok(DrainEnd {
        span,
        wall,
        cpu,
        frames,
        terminal_bytes,
        done: at(event_types::TASK_DONE).count(),
    })
}

async fn drain_tmux(
    opts: &ConsoleBenchOptions,
    repo: &BenchRepo,
    stream: &Path,
    attached: bool,
) -> anyhow::Result<TmuxRun> {
    let tag = if attached { "attached" } else { "detached" };
    let go = repo.root().join(format!("go-{tag}"));
    let commands: Vec<String> = (0..opts.panes)
        .map(|i| {
            format!(
                "while [ ! -e {go} ]; do sleep 0.01; done; cat {file}; tmux wait-for -S done-{i}",
                go = tmux::sh_quote(&go.to_string_lossy()),
                file = tmux::sh_quote(&stream.to_string_lossy())
            )
        })
        .collect();
    let mut panes = TmuxPanes::start(
        repo.root(),
        tag,
        &commands,
        opts.rows,
        opts.cols,
        SCROLLBACK,
    )
    .map_err(anyhow::Error::msg)?;
    let server = panes.server_pid().map_err(anyhow::Error::msg)?;
    let client = if attached {
        let pid = panes
            .attach(repo.root(), opts.rows, opts.cols)
            .map_err(anyhow::Error::msg)?;
        // The client has drawn the idle panes once before the clock starts.
        let until = Instant::now() + Duration::from_secs(10);
        while panes.client_bytes() == 0 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        Some(pid)
    } else {
        None
    };
    let usage = |pid: Option<u32>| -> anyhow::Result<procfs::ProcSample> {
        let s = sample(server, "the tmux server")?;
        Ok(match pid {
            Some(c) => s.plus(sample(c, "the tmux client")?),
            None => s,
        })
    };
    let before = usage(client)?;
    let started = Instant::now();
    std::fs::write(&go, b"").with_context(|| format!("cannot create {}", go.display()))?;
    let limit = Duration::from_secs(60 + opts.mb * opts.panes as u64);
    for i in 0..opts.panes {
        panes
            .wait_for(&format!("done-{i}"), limit)
            .await
            .map_err(anyhow::Error::msg)?;
    }
    let took = started.elapsed();
    let after = usage(client)?;
    Ok(TmuxRun {
        took,
        cpu: after.cpu.saturating_sub(before.cpu),
    })
}

/// Measures CPU over the idle window (after [`SETTLE`]) and memory at its end.
async fn quiet_window(
    opts: &ConsoleBenchOptions,
    read: impl Fn() -> anyhow::Result<procfs::ProcSample>,
) -> anyhow::Result<Usage> {
    tokio::time::sleep(SETTLE).await;
    let before = read()?;
    tokio::time::sleep(Duration::from_secs(opts.idle_secs)).await;
    let after = read()?;
    Ok(Usage {
        cpu: after.cpu.saturating_sub(before.cpu),
        rss_kib: after.rss_kib,
        peak_rss_kib: after.peak_rss_kib,
    })
}

/// The console over `panes` idle agents with `parallel` slots: CPU over the window, memory at
/// its end, frames drawn during it.
async fn idle_console(
    opts: &ConsoleBenchOptions,
    repo: &BenchRepo,
    plan_id: &str,
    parallel: usize,
) -> anyhow::Result<(Usage, u64)> {
    repo.import(&scratch::plan(plan_id, IDLE_AGENT, opts.panes))?;
    let ready = repo.ready_dir();
    std::fs::remove_dir_all(&ready)
        .and_then(|()| std::fs::create_dir_all(&ready))
        .with_context(|| format!("cannot empty {}", ready.display()))?;
    let mut console = start_console(opts, repo, plan_id, parallel, None)?;
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        let n = std::fs::read_dir(&ready).map(Iterator::count).unwrap_or(0);
        if n >= opts.panes {
            break;
        }
        if !console.running() {
            bail!("the console exited before its idle agents were ready");
        }
        if Instant::now() > until {
            bail!("only {n} of {} idle agents got ready in 120 s", opts.panes);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let pid = console.pid();
    let frames = std::cell::Cell::new(0);
    let usage = quiet_window(opts, || {
        frames.set(console.frames().saturating_sub(frames.get()));
        sample(pid, "the console")
    })
    .await?;
    if !console.running() {
        bail!("the console exited during the idle window");
    }
    console.stop(Duration::from_secs(20)).await;
    Ok((usage, frames.get()))
}

async fn idle_tmux(
    opts: &ConsoleBenchOptions,
    repo: &BenchRepo,
    stream: &Path,
) -> anyhow::Result<Usage> {
    let commands: Vec<String> = (0..opts.panes)
        .map(|i| {
            format!(
                "cat {}; tmux wait-for -S ready-{i}; exec sleep {HOLD_SECS}",
                tmux::sh_quote(&stream.to_string_lossy())
            )
        })
        .collect();
    let mut panes = TmuxPanes::start(
        repo.root(),
        "idle",
        &commands,
        opts.rows,
        opts.cols,
        SCROLLBACK,
    )
    .map_err(anyhow::Error::msg)?;
    let server = panes.server_pid().map_err(anyhow::Error::msg)?;
    let client = panes
        .attach(repo.root(), opts.rows, opts.cols)
        .map_err(anyhow::Error::msg)?;
    for i in 0..opts.panes {
        panes
            .wait_for(&format!("ready-{i}"), Duration::from_secs(120))
            .await
            .map_err(anyhow::Error::msg)?;
    }
    quiet_window(opts, || {
        Ok(sample(server, "the tmux server")?.plus(sample(client, "the tmux client")?))
    })
    .await
}

async fn first_frames(
    opts: &ConsoleBenchOptions,
    repo: &BenchRepo,
) -> anyhow::Result<FirstFrameFigures> {
    let measure = async |tasks: usize| -> anyhow::Result<Vec<FirstFrame>> {
        let plan_id = format!("ttff-{tasks}");
        repo.import(&scratch::plan(&plan_id, IDLE_AGENT, tasks))?;
        repo.whilly(&["plan", "pause", &plan_id])?;
        let mut runs = Vec::new();
        for _ in 0..opts.first_frame_runs.max(1) {
            let mut console = start_console(opts, repo, &plan_id, 1, Some(plan_id.clone()))?;
            let seen = console
                .wait_until(Duration::from_secs(60), |s| s.needle_frame.is_some())
                .await;
            console.stop(Duration::from_secs(20)).await;
            match (seen.first_frame, seen.needle_frame) {
                (Some(first), Some(plan_shown)) => runs.push(FirstFrame { first, plan_shown }),
                _ => bail!(
                    "the console never showed plan {plan_id} (first frame: {:?}); its screen:\n{}",
                    seen.first_frame,
                    seen.screen
                ),
            }
        }
        Ok(runs)
    };
    let runs = measure(opts.first_frame_tasks.max(1)).await?;
    let floor = measure(1).await?;
    Ok(FirstFrameFigures {
        tasks: opts.first_frame_tasks.max(1),
        runs,
        floor,
    })
}
