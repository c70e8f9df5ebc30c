//! The console's event loop: the engine in a tokio task, keyboard/mouse input on its own thread,
//! store polling on its own task, pane output waking the loop through each PTY's generation
//! counter. It renders only when something changed, at most `fps` times a second, and runs the
//! state machine's effects.

mod effects;
mod input;
mod pulls;

use super::action::Action;
use super::keymap::{Keymap, KeymapError};
use super::model::{Level, PaneMeta};
use super::msg::Msg;
use super::resize::ResizeCoalescer;
use super::state::AppState;
use super::terminal::{ConsoleTerminal, TerminalGuard, draw_synchronized};
use super::theme::Theme;
use super::ui::{self, FrameInfo, UiContext};
use super::wizard::run::WizardContext;
use crate::agent::HandoffDir;
use crate::config::Config;
use crate::engine::panes::RemotePanes;
use crate::engine::sessions::SessionRegistry;
use crate::engine::sessions::SessionState;
use crate::engine::setup::RunSetup;
use crate::engine::{Engine, RunSummary, StopLevel};
use crate::notify::{Notice, NoticeKind, Notifier, NotifyEnv};
use crate::pty::PtySession;
use crate::store::{PlanRecord, Store, StoreResult};
use crate::workspace::Workspaces;
use crossterm::event::Event;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinHandle;

/// How often the panes are looked at while there are any (who waits for input, remote panes'
/// ages); sessions coming, going or changing state wake the console at once.
const PANE_POLL: Duration = Duration::from_secs(1);
/// A pane's PTY is resized once its size has been stable this long.
const RESIZE_DEBOUNCE: Duration = Duration::from_millis(80);
/// How long a pane inside a synchronized update may hold back the frame.
const SYNC_HOLD: Duration = Duration::from_millis(100);
/// How often a held frame looks again.
const SYNC_RECHECK: Duration = Duration::from_millis(8);
/// How often the agents' processes are looked at for a blocked read of their terminal.
const INPUT_CHECK: Duration = Duration::from_secs(1);
/// Scrollback of a replayed log.
const REPLAY_SCROLLBACK: usize = 5000;

/// How the console looks and feels, from the config.
#[derive(Debug, Clone)]
pub(crate) struct ConsoleOptions {
    pub keymap: Keymap,
    pub theme: Theme,
    pub fps: u32,
    pub notifier: Notifier,
    /// Set when quitting may leave agents running in the background (see `tui::detach`).
    pub background: Option<Background>,
    /// `[queue] worker_offline_secs`: workers silent for longer are not counted.
    pub worker_offline_after: Duration,
    /// `[remote] takeover`: keys may go to agents in remote panes.
    pub remote_takeover: bool,
    /// `[run] agent`: what runs a task that names no agent (here or, with the same
    /// configuration, on another worker).
    pub default_agent: String,
}

/// What leaving agents in the background needs: the launcher to release and where the log is.
#[derive(Debug, Clone)]
pub(crate) struct Background {
    pub launcher: super::detach::Launcher,
    pub log_dir: std::path::PathBuf,
}

impl ConsoleOptions {
    /// `[keys]`, `[tui] fps` (or `ssh_fps` over SSH) and `[tui] theme` (mono under `NO_COLOR`).
    pub(crate) fn from_config(
        cfg: &Config,
        over_ssh: bool,
        no_color: Option<&str>,
    ) -> Result<ConsoleOptions, KeymapError> {
        Ok(ConsoleOptions {
            keymap: Keymap::with_overrides(&cfg.keys)?,
            theme: Theme::resolve(&cfg.tui.theme, no_color),
            fps: if over_ssh {
                cfg.tui.ssh_fps
            } else {
                cfg.tui.fps
            }
            .clamp(1, 240),
            notifier: Notifier::new(cfg.notifications.clone(), NotifyEnv::from_process()),
            background: None,
            worker_offline_after: Duration::from_secs(cfg.queue.worker_offline_secs),
            remote_takeover: cfg.remote.takeover,
            default_agent: cfg.run.agent.clone(),
        })
    }

    /// From the process environment (`SSH_CONNECTION`, `NO_COLOR`).
    pub(crate) fn from_env(cfg: &Config) -> Result<ConsoleOptions, KeymapError> {
        let ssh = std::env::var_os("SSH_CONNECTION").is_some();
        let no_color = std::env::var("NO_COLOR").ok();
        ConsoleOptions::from_config(cfg, ssh, no_color.as_deref())
    }
}

/// How the console ended.
#[derive(Debug, Clone)]
pub(crate) struct ConsoleOutcome {
    /// The engine's summary (None if it failed or was not awaited).
    pub summary: Option<RunSummary>,
    pub engine_error: Option<String>,
    /// The operator left the agents to finish in the background: the terminal is no longer
    /// ours (standard output is `/dev/null`).
    pub detached: bool,
}

/// What the console needs besides the engine: where the handoffs and worktrees live, and the
/// agent for the PRD wizard and the challenge (or why there is none).
struct Surroundings {
    handoff: HandoffDir,
    /// `.whilly/runs`: attempt logs, for replays of attempts other processes are running.
    runs: std::path::PathBuf,
    workspaces: Arc<Workspaces>,
    wizard: Result<WizardContext, String>,
}

/// The read-only agent for the wizard and the challenge: the run's default agent.
fn wizard_context(
    cfg: &Config,
    repo_root: &std::path::Path,
    store: &Arc<dyn Store>,
    plan_id: &str,
) -> Result<WizardContext, String> {
    let agent = crate::engine::configure::read_only_agent(
        cfg,
        repo_root,
        None,
        crate::prd::oneshot::DEFAULT_TIMEOUT,
    )
    .map_err(|e| format!("agent {:?} cannot answer the wizard: {e}", cfg.run.agent))?;
    Ok(WizardContext {
        agent: Arc::new(agent),
        root: repo_root.to_path_buf(),
        store: store.clone(),
        plan_id: plan_id.to_string(),
    })
}

/// The first frame, before the run is prepared: the plan's header over an empty console, so a
/// large plan does not keep the operator looking at a blank terminal.
pub(crate) fn draw_splash(
    terminal: &mut ConsoleTerminal,
    opts: &ConsoleOptions,
    plan: PlanRecord,
    backend: &str,
) -> std::io::Result<()> {
    let mut state = AppState::new(backend, Instant::now());
    state.worker_offline_after = opts.worker_offline_after;
    state.set_data(plan, Vec::new(), Vec::new());
    state.set_status("loading the plan's tasks…", Level::Info);
    let screens: BTreeMap<i64, Arc<PtySession>> = BTreeMap::new();
    let ctx = UiContext {
        keymap: &opts.keymap,
        theme: &opts.theme,
        screens: &screens,
    };
    draw_synchronized(terminal, |f| {
        ui::draw(f, &state, &ctx);
    })
}

/// Runs the plan with the console on the terminal (already entered: `guard`) until the operator
/// quits. The terminal is restored and every agent stopped before this returns, whatever
/// happens.
pub(crate) async fn run(
    setup: RunSetup,
    opts: ConsoleOptions,
    guard: TerminalGuard,
    mut terminal: ConsoleTerminal,
) -> anyhow::Result<ConsoleOutcome> {
    let RunSetup {
        store,
        plan_id,
        engine_cfg,
        executor,
        sessions,
        repo_root,
        config,
        workspaces,
        observer,
        initial,
    } = setup;
    let around = Surroundings {
        handoff: HandoffDir::in_project(&repo_root),
        runs: crate::store::open::state_dir(&repo_root).join("runs"),
        workspaces,
        wizard: wizard_context(&config, &repo_root, &store, &plan_id),
    };
    let (shutdown_tx, shutdown_rx) = watch::channel(StopLevel::Run);
    // While the console is open its engine serves the plan: tasks merged in by the wizard,
    // reset or sent back run without a restart. It reports instead of ending when idle.
    let mut engine_cfg = engine_cfg;
    let (idle_tx, idle_rx) = watch::channel(None);
    engine_cfg.exit_when_idle = false;
    engine_cfg.idle_reports = Some(Arc::new(idle_tx));
    let slots = engine_cfg.slots;
    let backend = store.info().backend.to_string();
    let engine_store = store.clone();
    let mut console = Console::new(store, plan_id, sessions, opts, backend, shutdown_tx, around);
    console.slots = slots;
    console.idle = Some(idle_rx);
    console.state.observer = observer;
    console.state.no_oneshot_agent = console.around.wizard.as_ref().err().cloned();
    console.state.can_background = console.opts.background.is_some();
    console.state.own_worker = Some(engine_cfg.worker_id.clone());
    console.state.remote_takeover = console.opts.remote_takeover;
    console.start_remote(engine_cfg.worker_id.clone());
    if let Some((plan, tasks)) = initial {
        console.state.set_data(plan, tasks, Vec::new());
    }
    // One frame before any agent starts, so the first agents already spawn at their panes' size.
    if let Err(e) = console.draw(&mut terminal) {
        tracing::warn!("first frame: {e}");
    }
    // The console's engine is a worker of the queue like any other: it shows in workers views.
    let presence =
        match crate::engine::presence::WorkerPresence::start(engine_store.clone(), &engine_cfg)
            .await
        {
            Ok(p) => Some(p),
            Err(e) => {
                tracing::warn!("registering as a worker: {e}");
                None
            }
        };
    let pull_watch = tokio::spawn(pulls::watch(
        engine_store.clone(),
        console.plan_id.clone(),
        config.clone(),
        console.msg_tx.clone(),
    ));
    let engine = Engine::new(engine_store, Arc::new(executor), engine_cfg, shutdown_rx);
    let mut engine = tokio::spawn(engine.run());
    let mut result = console.run(terminal, &mut engine).await;
    pull_watch.abort();
    if let Ok(outcome) = &mut result
        && outcome.detached
    {
        // The agents finish in this process; the terminal goes back to the shell first.
        guard.release_terminal();
        console.stop_input();
        console.join_input();
        console.finish_in_background(outcome, &mut engine).await;
    }
    if let Some(p) = presence {
        p.stop().await;
    }
    // Restore the terminal, then kill whatever agent is left (nothing, normally).
    drop(guard);
    console.stop_input();
    result
}

/// How the engine task ended: its summary, or what went wrong (its own error or the task's).
fn engine_end(
    joined: Result<StoreResult<RunSummary>, tokio::task::JoinError>,
) -> Result<RunSummary, String> {
    match joined {
        Ok(Ok(summary)) => Ok(summary),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => Err(format!("the engine task failed: {e}")),
    }
}

async fn stop_engine(
    shutdown: &watch::Sender<StopLevel>,
    engine: &mut JoinHandle<StoreResult<RunSummary>>,
) -> Option<RunSummary> {
    let _ = shutdown.send(StopLevel::Now);
    engine.await.ok().and_then(Result::ok)
}

struct Console {
    store: Arc<dyn Store>,
    plan_id: String,
    sessions: SessionRegistry,
    opts: ConsoleOptions,
    shutdown: watch::Sender<StopLevel>,
    state: AppState,
    ptys: BTreeMap<i64, Arc<PtySession>>,
    wake: Arc<Notify>,
    resizes: ResizeCoalescer,
    frame: FrameInfo,
    dirty: bool,
    last_draw: Option<Instant>,
    quit: bool,
    quit_after_engine: bool,
    engine_done: bool,
    /// The serving engine's word on the plan each time it runs out of work (see
    /// `EngineConfig::idle_reports`).
    idle: Option<watch::Receiver<Option<RunSummary>>>,
    frozen_now: Option<Instant>,
    hold_until: Option<Instant>,
    /// Replies of the work effects started: every one goes through `AppState::update`.
    msg_tx: mpsc::UnboundedSender<Msg>,
    msg_rx: mpsc::UnboundedReceiver<Msg>,
    /// The wizard's running agent call: aborted (its agent killed) when the wizard closes.
    wizard_task: Option<JoinHandle<()>>,
    /// The split key's running agent call: aborted (its agent killed) when the dialog closes.
    split_task: Option<JoinHandle<()>>,
    input_stop: Arc<Notify>,
    input_thread: Option<std::thread::JoinHandle<()>>,
    /// Set when the operator chose to go on in the background: `Some(whole_plan)`.
    detach: Option<bool>,
    around: Surroundings,
    /// Notices waiting to be written to the terminal after the next frame.
    notices: Vec<Notice>,
    /// The engine's slots: how many panes to expect when sizing new agents.
    slots: usize,
    /// The replay view's emulator, fed from a finished attempt's log.
    replay_screen: Option<crate::pty::Emulator>,
    /// Replayed screens: not state (like the panes' screens), so apart from `msg_tx`.
    replay_tx: mpsc::UnboundedSender<ReplayScreen>,
    replay_rx: mpsc::UnboundedReceiver<ReplayScreen>,
    /// The size of the live replay's log when it was last loaded.
    replay_len: Option<u64>,
    /// When the agents' processes were last looked at for a blocked read of their terminal.
    input_checked: Option<Instant>,
    /// The terminals of agents other workers run (remote panes).
    remote: Option<RemotePanes>,
}

/// A replay's log, replayed into an emulator, for task pk.
type ReplayScreen = (i64, std::path::PathBuf, crate::pty::Emulator);

/// The live panes plus the replay view's screen under [`super::model::REPLAY_PK`].
struct ConsoleScreens<'a> {
    ptys: &'a BTreeMap<i64, Arc<PtySession>>,
    replay: Option<&'a crate::pty::Emulator>,
    remote: Option<&'a RemotePanes>,
}

impl super::screens::PaneScreens for ConsoleScreens<'_> {
    fn with_screen(&self, task_pk: i64, f: &mut dyn FnMut(&vt100::Screen)) -> bool {
        if task_pk == super::model::REPLAY_PK {
            return match self.replay {
                Some(emu) => {
                    f(emu.screen());
                    true
                }
                None => false,
            };
        }
        self.ptys.with_screen(task_pk, f) || self.remote.is_some_and(|r| r.with_screen(task_pk, f))
    }
}

impl Console {
    fn new(
        store: Arc<dyn Store>,
        plan_id: String,
        sessions: SessionRegistry,
        opts: ConsoleOptions,
        backend: String,
        shutdown: watch::Sender<StopLevel>,
        around: Surroundings,
    ) -> Console {
        let (msg_tx, msg_rx) = mpsc::unbounded_channel();
        let (replay_tx, replay_rx) = mpsc::unbounded_channel();
        let offline_after = opts.worker_offline_after;
        Console {
            store,
            plan_id,
            sessions,
            opts,
            shutdown,
            state: {
                let mut state = AppState::new(backend, Instant::now());
                state.worker_offline_after = offline_after;
                state
            },
            ptys: BTreeMap::new(),
            wake: Arc::new(Notify::new()),
            resizes: ResizeCoalescer::new(RESIZE_DEBOUNCE),
            frame: FrameInfo::default(),
            dirty: true,
            last_draw: None,
            quit: false,
            quit_after_engine: false,
            engine_done: false,
            idle: None,
            frozen_now: None,
            hold_until: None,
            msg_tx,
            msg_rx,
            wizard_task: None,
            split_task: None,
            input_stop: Arc::new(Notify::new()),
            input_thread: None,
            detach: None,
            around,
            notices: Vec::new(),
            slots: 1,
            replay_screen: None,
            replay_tx,
            replay_rx,
            replay_len: None,
            input_checked: None,
            remote: None,
        }
    }

    /// Follows the terminals of agents that other workers run; their changes wake the loop.
    fn start_remote(&mut self, viewer: String) {
        let remote = RemotePanes::start(self.store.clone(), viewer);
        let (changed, wake) = (remote.changed(), self.wake.clone());
        tokio::spawn(async move {
            loop {
                changed.notified().await;
                wake.notify_one();
            }
        });
        self.remote = Some(remote);
    }

    /// Panes for the tasks other workers run in this plan, shown from their published
    /// terminals (read-only unless `[remote] takeover`).
    fn remote_panes(&self, local: &[PaneMeta]) -> Vec<PaneMeta> {
        let Some(remote) = &self.remote else {
            return Vec::new();
        };
        let now = Instant::now();
        let utc = chrono::Utc::now();
        // From the leased tasks' index, not the whole plan: this runs every session poll
        // (10 a second), and a plan may hold 100,000 tasks.
        let metas: Vec<PaneMeta> = self
            .state
            .tasks_held_elsewhere()
            .into_iter()
            .filter(|t| {
                t.status == crate::domain::Status::InProgress
                    && !local.iter().any(|p| p.task_pk == t.pk)
            })
            .map(|t| {
                let host = t
                    .worker_id
                    .as_deref()
                    .and_then(|w| w.split('/').next())
                    .unwrap_or("another worker");
                let agent = t
                    .spec
                    .agent
                    .clone()
                    .or_else(|| self.state.plan.as_ref().and_then(|p| p.spec.agent.clone()))
                    .unwrap_or_else(|| self.opts.default_agent.clone());
                let age = (utc - t.updated_at).to_std().unwrap_or_default();
                PaneMeta {
                    task_pk: t.pk,
                    task_id: t.id.clone(),
                    agent,
                    attempt: t.attempts,
                    // Kept from the last look: recomputed, it would jitter and redraw.
                    started: self
                        .state
                        .pane(t.pk)
                        .filter(|p| p.remote.is_some())
                        .map(|p| p.started)
                        .unwrap_or_else(|| now.checked_sub(age).unwrap_or(now)),
                    state: SessionState::Running,
                    has_screen: remote.has_screen(t.pk),
                    waiting_input: false,
                    remote: Some(host.to_string()),
                    note: None,
                }
            })
            .collect();
        remote.want(metas.iter().map(|p| p.task_pk).collect());
        metas
    }

    fn stop_input(&self) {
        // A permit: the thread stops even if it is not waiting yet.
        self.input_stop.notify_one();
    }

    /// Finds the task's log and replays it into an emulator of the body's size, off the loop;
    /// the screen arrives on `replay_rx`, a failure as [`Msg::Replay`] (the screen shown
    /// meanwhile is kept).
    fn load_replay(&self, task_pk: i64, task_id: String) {
        // The replay fills the body: the terminal less header, footer and borders.
        let (cols, rows) = crossterm::terminal::size().unwrap_or((120, 40));
        let size =
            crate::pty::TermSize::new(rows.saturating_sub(5).max(1), cols.saturating_sub(2).max(1));
        let store = self.store.clone();
        let plan = self.plan_id.clone();
        let (tx, msgs) = (self.replay_tx.clone(), self.msg_tx.clone());
        let live = self.state.running_elsewhere(task_pk);
        let runs = self.around.runs.clone();
        tokio::spawn(async move {
            // An attempt running in another process: the log it is writing now.
            let on_disk = if live {
                let (runs, plan, id) = (runs, plan.clone(), task_id.clone());
                tokio::task::spawn_blocking(move || {
                    super::replay::newest_log_on_disk(&runs, &plan, &id)
                })
                .await
                .ok()
                .flatten()
            } else {
                None
            };
            let found = match on_disk {
                Some(p) => Ok(p),
                None => super::replay::find_log_path(&store, &plan, &task_id).await,
            };
            let loaded = match found {
                Ok(path) => tokio::task::spawn_blocking(move || {
                    super::replay::replay_file(&path, size, REPLAY_SCROLLBACK)
                        .map(|emu| (path, emu))
                })
                .await
                .unwrap_or_else(|e| Err(e.to_string())),
                Err(e) => Err(e),
            };
            let sent = match loaded {
                Ok((path, emu)) => tx.send((task_pk, path, emu)).is_ok(),
                Err(e) => msgs.send(Msg::Replay(task_pk, Err(e))).is_ok(),
            };
            if !sent {
                tracing::debug!(task_pk, "replay loaded after the console closed");
            }
        });
    }

    /// Reloads the replay of an attempt another process is running, once a second, unless the
    /// operator scrolled back in it: a live view of a background agent.
    fn refresh_live_replay(&mut self) {
        let Some(r) = self.state.replay.as_ref() else {
            return;
        };
        let at_bottom = self
            .replay_screen
            .as_ref()
            .is_none_or(|e| e.scrollback_offset() == 0);
        // Only when the log grew: replaying up to 8 MiB each second for nothing costs CPU.
        let len = r
            .path
            .as_ref()
            .and_then(|p| std::fs::metadata(p).ok())
            .map(|m| m.len());
        if self.state.view == super::model::View::Replay
            && at_bottom
            && self.state.running_elsewhere(r.task_pk)
            && (len.is_none() || len != self.replay_len)
        {
            self.replay_len = len;
            let (task_pk, task_id) = (r.task_pk, r.task_id.clone());
            self.load_replay(task_pk, task_id);
        }
    }

    /// Waits for the input thread to stop reading the terminal (it wakes at once).
    fn join_input(&mut self) {
        if let Some(t) = self.input_thread.take() {
            let _ = t.join();
        }
    }

    /// Detaches from the terminal and waits, without a screen, for the running agents to finish
    /// (the engine claims nothing more). SIGTERM, SIGHUP or SIGINT stop them at once, their tasks
    /// released: detached agents are never orphaned.
    async fn finish_in_background(
        &mut self,
        outcome: &mut ConsoleOutcome,
        engine: &mut JoinHandle<StoreResult<RunSummary>>,
    ) {
        let running: Vec<String> = self.state.panes.iter().map(|p| p.task_id.clone()).collect();
        let Some(bg) = self.opts.background.clone() else {
            outcome.summary = stop_engine(&self.shutdown, engine).await;
            return;
        };
        let whole_plan = self.detach.unwrap_or(false);
        let text = super::detach::message(
            &running,
            whole_plan,
            std::process::id(),
            &self.plan_id,
            &bg.log_dir,
        );
        // Listening before the pid is printed: a signal sent as soon as it is read is not lost.
        let mut signals = Signals::new();
        if let Err(e) = bg.launcher.detach(&text) {
            eprintln!("whilly: cannot leave the agents in the background ({e}); stopping them");
            tracing::error!("detaching from the terminal: {e}");
            outcome.summary = stop_engine(&self.shutdown, engine).await;
            return;
        }
        tracing::info!(
            plan = %self.plan_id,
            pid = std::process::id(),
            whole_plan,
            "detached from the terminal; going on in the background with: {}",
            running.join(", ")
        );
        if let Some(t) = self.wizard_task.take() {
            t.abort();
        }
        if let Some(t) = self.split_task.take() {
            t.abort();
        }
        let joined = tokio::select! {
            joined = &mut *engine => Some(joined),
            _ = signals.recv() => None,
        };
        let joined = match joined {
            Some(j) => j,
            None => {
                tracing::warn!("signalled in the background: stopping the agents");
                let _ = self.shutdown.send(StopLevel::Now);
                engine.await
            }
        };
        match engine_end(joined) {
            Ok(summary) => {
                tracing::info!(
                    "{}",
                    crate::engine::progress::summary_line(&self.plan_id, &summary)
                );
                outcome.summary = Some(summary);
            }
            Err(e) => outcome.engine_error = Some(e),
        }
    }

    async fn run(
        &mut self,
        mut terminal: ConsoleTerminal,
        engine: &mut JoinHandle<StoreResult<RunSummary>>,
    ) -> anyhow::Result<ConsoleOutcome> {
        let (input_tx, mut input_rx) = mpsc::unbounded_channel();
        self.input_thread = spawn_input_thread(input_tx, self.input_stop.clone());
        let (data_tx, mut data_rx) = mpsc::channel(4);
        let reload = Arc::new(Notify::new());
        let loader = tokio::spawn(super::feed::load_loop(
            self.store.clone(),
            self.plan_id.clone(),
            self.around.handoff.clone(),
            data_tx,
            reload.clone(),
        ));
        let mut signals = Signals::new();

        let frame_every = Duration::from_secs_f64(1.0 / f64::from(self.opts.fps.max(1)));
        let mut sessions_changed = self.sessions.subscribe();
        let mut pane_tick = tokio::time::interval(PANE_POLL);
        pane_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut clock_tick = tokio::time::interval(Duration::from_secs(1));
        clock_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut input_open = true;
        let mut idle = self.idle.take();
        let mut outcome = ConsoleOutcome {
            summary: None,
            engine_error: None,
            detached: false,
        };

        let result: anyhow::Result<()> = loop {
            let deadline = self.next_deadline(frame_every);
            tokio::select! {
                biased;
                ev = input_rx.recv(), if input_open => match ev {
                    Some(ev) => self.on_input(ev),
                    None => input_open = false,
                },
                joined = &mut *engine, if !self.engine_done => {
                    self.engine_done = true;
                    // The last transitions must show with the summary, not a poll later.
                    reload.notify_one();
                    self.frozen_now = Some(Instant::now());
                    match engine_end(joined) {
                        Ok(summary) => self.run_finished(&mut outcome, summary, true),
                        Err(e) => {
                            outcome.engine_error = Some(e.clone());
                            self.update(Msg::EngineFailed(e));
                        }
                    }
                    self.sync_sessions();
                    self.dirty = true;
                    if self.quit_after_engine {
                        self.quit = true;
                    }
                }
                Some(report) = next_idle_report(&mut idle), if !self.engine_done => {
                    match report {
                        Some(summary) => {
                            // Announced once per run over, not again when the figures change.
                            let announce = !self.state.finished();
                            self.run_finished(&mut outcome, summary, announce);
                        }
                        None => {
                            outcome.summary = None;
                            self.update(Msg::Resumed);
                        }
                    }
                    reload.notify_one();
                    self.dirty = true;
                }
                _ = signals.recv() => {
                    // SIGTERM / SIGHUP / SIGINT: nobody may be watching; stop cleanly and leave.
                    self.stop_agents();
                    self.quit_after_engine = true;
                    if self.engine_done {
                        self.quit = true;
                    }
                }
                Some(msg) = data_rx.recv() => {
                    // A periodic reload with nothing new waits for the clock's next frame (at
                    // most a second): an idle console draws once a second, not once per reload.
                    let news = match &msg {
                        Msg::Data(d) => {
                            !self.state.seen_history || !d.events.is_empty() || self.state.finished()
                        }
                        _ => true,
                    };
                    self.update(msg);
                    self.dirty |= news;
                    if news && self.remote.is_some() {
                        // Other workers' panes come from the tasks just loaded.
                        self.sync_sessions();
                    }
                }
                Some(msg) = self.msg_rx.recv() => {
                    self.state.now = Instant::now();
                    self.update(msg);
                    self.dirty = true;
                }
                Some((pk, path, emu)) = self.replay_rx.recv() => {
                    self.update(Msg::Replay(pk, Ok(path)));
                    if self.state.replay.as_ref().is_some_and(|r| r.task_pk == pk) {
                        self.replay_screen = Some(emu);
                    }
                    self.dirty = true;
                }
                _ = self.wake.notified() => self.dirty = true,
                Ok(()) = sessions_changed.changed() => self.sync_sessions(),
                _ = pane_tick.tick(), if !self.state.panes.is_empty() => self.sync_sessions(),
                _ = clock_tick.tick(), if !self.state.finished() => {
                    self.dirty = true;
                    self.state.github_wait = crate::forge::github::rate_limit_wait();
                    self.refresh_live_replay();
                }
                _ = sleep_until(deadline), if deadline.is_some() => {}
            }
            if self.quit {
                break Ok(());
            }
            let now = Instant::now();
            for (pk, (rows, cols)) in self.resizes.due(now) {
                if let Some(pty) = self.ptys.get(&pk)
                    && let Err(e) = pty.resize(rows, cols)
                {
                    tracing::warn!(task_pk = pk, "pane resize: {e}");
                }
            }
            let frame_due = self.last_draw.is_none_or(|t| now >= t + frame_every);
            if self.dirty && frame_due && self.pane_mid_update(now) {
                // Drawn once the agent ends its synchronized update (its output wakes us), or
                // when the hold times out.
                self.hold_until = Some(now + SYNC_RECHECK);
                continue;
            }
            self.hold_until = None;
            if self.dirty
                && frame_due
                && let Err(e) = self.draw(&mut terminal)
            {
                break Err(anyhow::anyhow!("drawing the console failed: {e}"));
            }
            // Between frames, so an escape never lands inside a frame's output.
            for notice in std::mem::take(&mut self.notices) {
                self.opts.notifier.send(&notice, terminal.backend_mut());
            }
        };
        loader.abort();
        if self.detach.is_some() && !self.engine_done {
            outcome.detached = true;
        } else if !self.engine_done {
            // Leaving before the engine ended (forced quit, draw error): no agent may survive.
            outcome.summary = stop_engine(&self.shutdown, engine).await;
        }
        result.map(|()| outcome)
    }

    /// The run is over (the engine ended, or the serving engine ran out of work): the summary
    /// shows, and `announce` sends the plan-finished notice unless the operator is stopping.
    fn run_finished(&mut self, outcome: &mut ConsoleOutcome, summary: RunSummary, announce: bool) {
        if announce && !self.state.stopping && !self.state.draining {
            self.notices.push(Notice::new(
                NoticeKind::PlanFinished,
                &self.plan_id,
                crate::engine::progress::summary_line(&self.plan_id, &summary),
            ));
        }
        outcome.summary = Some(summary.clone());
        self.update(Msg::Finished(summary));
    }

    /// Whether a visible pane is inside a synchronized-output block (mode 2026) that began
    /// less than [`SYNC_HOLD`] ago: drawing now would show a half-painted agent screen.
    fn pane_mid_update(&self, now: Instant) -> bool {
        self.frame.panes.iter().any(|(pk, _)| {
            self.ptys
                .get(pk)
                .and_then(|p| p.sync_output_since())
                .is_some_and(|since| now.saturating_duration_since(since) < SYNC_HOLD)
        })
    }

    fn next_deadline(&self, frame_every: Duration) -> Option<Instant> {
        let draw = if self.dirty {
            let at = self
                .last_draw
                .map_or_else(Instant::now, |t| t + frame_every);
            Some(self.hold_until.map_or(at, |h| h.max(at)))
        } else {
            None
        };
        match (draw, self.resizes.next_due()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn draw(&mut self, terminal: &mut ConsoleTerminal) -> std::io::Result<()> {
        self.state.now = self.frozen_now.unwrap_or_else(Instant::now);
        if self.frozen_now.is_none() {
            self.state.wall = chrono::Utc::now();
        }
        if self.state.view != super::model::View::Replay {
            self.replay_screen = None;
        }
        let screens = ConsoleScreens {
            ptys: &self.ptys,
            replay: self.replay_screen.as_ref(),
            remote: self.remote.as_ref(),
        };
        let ctx = UiContext {
            keymap: &self.opts.keymap,
            theme: &self.opts.theme,
            screens: &screens,
        };
        let mut info = FrameInfo::default();
        let state = &self.state;
        draw_synchronized(terminal, |f| info = ui::draw(f, state, &ctx))?;
        let now = Instant::now();
        for (pk, inner) in &info.panes {
            if self.ptys.contains_key(pk) && inner.width > 0 && inner.height > 0 {
                self.resizes.want(*pk, (inner.height, inner.width), now);
            }
        }
        // The next agent starts at the size its pane will have.
        if let Some(area) = info.pane_area {
            // Agents come a slot at a time; size them for the grid they will share.
            let expect = (self.state.panes.len() + 1).max(self.slots);
            let next = crate::tui::grid::pane_rects(area, expect);
            if let Some(r) = next.last()
                && r.width > 2
                && r.height > 2
            {
                self.sessions
                    .set_spawn_size(crate::pty::TermSize::new(r.height - 2, r.width - 2));
            }
        }
        self.frame = info;
        self.dirty = false;
        self.last_draw = Some(now);
        Ok(())
    }

    /// Mirrors the session registry into the state and watches new terminals for output.
    fn sync_sessions(&mut self) {
        let snapshot = self.sessions.snapshot();
        let panes: Vec<PaneMeta> = snapshot
            .iter()
            .map(|s| PaneMeta {
                task_pk: s.task_pk,
                task_id: s.task_id.clone(),
                agent: s.agent.clone(),
                attempt: s.attempt,
                started: s.started,
                state: s.state,
                has_screen: s.pty.is_some(),
                waiting_input: false,
                remote: None,
                note: s.note.clone(),
            })
            .collect();
        let mut ptys = BTreeMap::new();
        for s in &snapshot {
            let Some(pty) = &s.pty else { continue };
            let known = self
                .ptys
                .get(&s.task_pk)
                .is_some_and(|p| Arc::ptr_eq(p, pty));
            if !known {
                let size = pty.size();
                self.resizes.note_applied(s.task_pk, (size.rows, size.cols));
                let mut rx = pty.subscribe();
                let wake = self.wake.clone();
                tokio::spawn(async move {
                    while rx.changed().await.is_ok() {
                        wake.notify_one();
                    }
                });
                self.dirty = true;
            }
            ptys.insert(s.task_pk, pty.clone());
        }
        if ptys.len() != self.ptys.len() {
            self.dirty = true;
        }
        self.resizes.retain(|pk| ptys.contains_key(&pk));
        self.ptys = ptys;
        let mut sorted = panes;
        let remote = self.remote_panes(&sorted);
        sorted.extend(remote);
        sorted.sort_by_key(|p| p.task_pk);
        // Who waits for input is read from /proc once a second, not on every session poll.
        let now = Instant::now();
        let look = self
            .input_checked
            .is_none_or(|t| now.saturating_duration_since(t) >= INPUT_CHECK);
        if look {
            self.input_checked = Some(now);
        }
        for p in &mut sorted {
            p.waiting_input = if look {
                self.ptys
                    .get(&p.task_pk)
                    .is_some_and(|pty| pty.waiting_for_input())
            } else {
                self.state
                    .pane(p.task_pk)
                    .is_some_and(|old| old.waiting_input)
            };
            let was = self
                .state
                .pane(p.task_pk)
                .is_some_and(|old| old.waiting_input);
            if p.waiting_input && !was {
                self.notices.push(Notice::new(
                    NoticeKind::NeedsHuman,
                    &self.plan_id,
                    format!(
                        "{} waits for input in its terminal: i types into it",
                        p.task_id
                    ),
                ));
            }
        }
        for p in &sorted {
            let was_waiting = self
                .state
                .pane(p.task_pk)
                .is_some_and(|old| old.state == SessionState::WaitingForHuman);
            if p.state == SessionState::WaitingForHuman && !was_waiting {
                self.notices.push(Notice::new(
                    NoticeKind::NeedsHuman,
                    &self.plan_id,
                    format!(
                        "{} waits for a human (handoff): H opens the inbox",
                        p.task_id
                    ),
                ));
            }
        }
        if sorted != self.state.panes {
            self.state.set_panes(sorted);
            self.dirty = true;
        }
    }

    // ---- actions and effects ---------------------------------------------------------------

    fn act(&mut self, action: Action) {
        self.update(Msg::Action(action));
    }

    /// Hands `msg` to the state and carries out what it asks for.
    fn update(&mut self, msg: Msg) {
        for effect in self.state.update(msg) {
            self.run_effect(effect);
        }
    }

    fn stop_agents(&mut self) {
        self.state.stopping = true;
        self.state.takeover = None;
        let _ = self.shutdown.send(StopLevel::Now);
    }
}

/// The engine's next idle report; `None` (never ready) once there is no engine to report.
async fn next_idle_report(
    rx: &mut Option<watch::Receiver<Option<RunSummary>>>,
) -> Option<Option<RunSummary>> {
    let Some(r) = rx.as_mut() else {
        return std::future::pending().await;
    };
    if r.changed().await.is_err() {
        *rx = None;
        return std::future::pending().await;
    }
    Some(r.borrow_and_update().clone())
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(t) => tokio::time::sleep_until(tokio::time::Instant::from_std(t)).await,
        None => std::future::pending().await,
    }
}

/// Reads terminal input on a plain thread so heavy pane output never delays a key press. The
/// thread sleeps until a key, a resize or `stop` (crossterm's event stream wakes its reader on
/// drop): an idle console does not look at the terminal on a timer.
fn spawn_input_thread(
    tx: mpsc::UnboundedSender<Event>,
    stop: Arc<Notify>,
) -> Option<std::thread::JoinHandle<()>> {
    use futures::StreamExt;
    use futures::future::Either;
    let spawned = std::thread::Builder::new()
        .name("whilly-tui-input".into())
        .spawn(move || {
            let mut events = crossterm::event::EventStream::new();
            futures::executor::block_on(async {
                let stopped = stop.notified();
                futures::pin_mut!(stopped);
                loop {
                    match futures::future::select(events.next(), stopped.as_mut()).await {
                        Either::Left((Some(Ok(ev)), _)) => {
                            if tx.send(ev).is_err() {
                                return;
                            }
                        }
                        Either::Left((Some(Err(e)), _)) => {
                            tracing::warn!("terminal input: {e}");
                            return;
                        }
                        Either::Left((None, _)) | Either::Right(_) => return,
                    }
                }
            });
            // Dropping the stream wakes and ends crossterm's reader: nothing reads the
            // terminal once this thread is joined.
            drop(events);
        });
    match spawned {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::error!("cannot start the input thread: {e}");
            None
        }
    }
}

/// SIGTERM, SIGHUP (the terminal went away) and SIGINT (from `kill`, as raw mode turns Ctrl-C
/// into a key).
struct Signals {
    streams: Vec<tokio::signal::unix::Signal>,
}

impl Signals {
    fn new() -> Signals {
        use tokio::signal::unix::{SignalKind, signal};
        let streams = [
            SignalKind::terminate(),
            SignalKind::hangup(),
            SignalKind::interrupt(),
        ]
        .into_iter()
        .filter_map(|k| signal(k).ok())
        .collect();
        Signals { streams }
    }

    async fn recv(&mut self) {
        if self.streams.is_empty() {
            return std::future::pending().await;
        }
        let futs = self.streams.iter_mut().map(|s| Box::pin(s.recv()));
        let _ = futures::future::select_all(futs).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_follow_config_ssh_and_no_color() {
        let mut cfg = Config::default();
        cfg.tui.fps = 50;
        cfg.tui.ssh_fps = 20;
        let o = ConsoleOptions::from_config(&cfg, false, None).unwrap();
        assert_eq!(o.fps, 50);
        assert!(o.theme.color);
        let o = ConsoleOptions::from_config(&cfg, true, Some("1")).unwrap();
        assert_eq!(o.fps, 20);
        assert!(!o.theme.color);
    }

    #[test]
    fn bad_keys_in_config_are_refused_naming_the_key() {
        let mut cfg = Config::default();
        cfg.keys.insert("x".into(), "explode".into());
        let err = ConsoleOptions::from_config(&cfg, false, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("[keys] \"x\""), "{err}");
        assert!(err.contains("explode"), "{err}");
    }
}
