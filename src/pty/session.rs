//! A child process in a pseudo-terminal with an emulated screen.

use std::ffi::OsString;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossterm::event::{KeyEvent, MouseEvent};
use portable_pty::{CommandBuilder, MasterPty, PtySize, native_pty_system};
use tokio::sync::watch;

use super::PtyError;
use super::emulator::Emulator;
use super::filter::DisplayPipe;
use super::io_threads::{LogSink, run_reader, run_writer};
use super::keys::{InputModes, encode_focus, encode_key, encode_mouse, encode_paste};
use super::process::{ExitInfo, group_alive, process_group_of, run_waiter, signal_group};
use super::shared::{RunState, Shared};
use super::spec::{SpawnSpec, TermSize};
use super::stats::{OutputCounters, OutputStats};
use super::tap::{ScreenSnapshot, Tap, TapRead};

/// Messages the writer queue holds before `write_input` reports backpressure.
const INPUT_QUEUE: usize = 1024;
/// After the child exits, how long `wait` keeps waiting for the rest of its output. Bounded
/// because a grandchild outside our reach may hold the terminal open.
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(1);
/// How often `terminate` looks at the process group while it waits.
const GROUP_POLL: Duration = Duration::from_millis(20);
/// How long `terminate` waits for the group to vanish after SIGKILL before giving up.
const KILL_SETTLE: Duration = Duration::from_secs(5);

/// A child running in its own PTY and process group, its output logged and emulated.
///
/// Dropping the session kills the child's whole process group: agents are never orphaned.
pub struct PtySession {
    shared: Arc<Shared>,
    master: Mutex<Box<dyn MasterPty + Send>>,
    input: SyncSender<Vec<u8>>,
    pid: i32,
    log_path: Option<PathBuf>,
    started: Instant,
    /// Dropping it lets the waiter thread kill the group's leftovers and reap the child.
    release_waiter: Option<Sender<()>>,
    /// Dropping it tells the reader thread to finish.
    wake_reader: Option<OwnedFd>,
}

impl std::fmt::Debug for PtySession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PtySession")
            .field("pid", &self.pid)
            .field("log_path", &self.log_path)
            .field("run", &*self.shared.run.borrow())
            .finish_non_exhaustive()
    }
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> PtyError {
    let what = what.into();
    move |source| PtyError::Io { what, source }
}

fn open_log(path: &Path) -> Result<std::fs::File, PtyError> {
    let log_err = |source| PtyError::Log {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        crate::fsutil::private_dir(parent).map_err(log_err)?;
    }
    crate::fsutil::private_append(path).map_err(log_err)
}

/// A close-on-exec duplicate of `fd`, owned.
fn dup_cloexec(fd: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor we then own.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if new < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `new` is a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// A close-on-exec pipe: (read end, write end).
fn pipe_cloexec() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors are fresh and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn command_for(spec: &SpawnSpec, cwd: &Path) -> CommandBuilder {
    // Through the guard: whatever kills whilly, the agent's process group goes with it.
    let path = spec
        .env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone());
    let argv = crate::procguard::guarded_argv(&spec.argv, path.as_deref(), cwd);
    let mut cmd = CommandBuilder::from_argv(argv);
    cmd.cwd(cwd.as_os_str());
    cmd.env_remove("COLUMNS");
    cmd.env_remove("LINES");
    for (k, v) in &spec.env {
        if k != "COLUMNS" && k != "LINES" {
            cmd.env(k, v);
        }
    }
    cmd.env("TERM", "xterm-256color");
    cmd
}

impl PtySession {
    /// Opens a PTY at `spec.size`, starts `spec.argv` in it as the leader of a new session and
    /// process group, and starts the reader, writer and waiter threads.
    pub fn spawn(mut spec: SpawnSpec) -> Result<PtySession, PtyError> {
        spec.validate()?;
        let cwd = match &spec.cwd {
            Some(dir) => {
                let meta = std::fs::metadata(dir).map_err(|source| PtyError::Cwd {
                    path: dir.clone(),
                    source,
                })?;
                if !meta.is_dir() {
                    let source =
                        std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory");
                    return Err(PtyError::Cwd {
                        path: dir.clone(),
                        source,
                    });
                }
                dir.clone()
            }
            // portable-pty would fall back to $HOME; an agent must run where we are.
            None => std::env::current_dir().map_err(io_err("cannot read the current directory"))?,
        };
        let log = match &spec.log_path {
            Some(path) => Some(LogSink::new(path.clone(), open_log(path)?).limited(spec.log_limit)),
            None => None,
        };
        let size = spec.size.clamped();
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: size.rows,
                cols: size.cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .map_err(|e| PtyError::OpenPty(format!("{e:#}")))?;
        let program = spec
            .argv
            .first()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let child = pair
            .slave
            .spawn_command(command_for(&spec, &cwd))
            .map_err(|e| PtyError::Spawn {
                program: program.clone(),
                detail: format!("{e:#}"),
            })?;
        // Our copy of the slave must go, or the reader never sees EOF.
        drop(pair.slave);
        let pid = child
            .process_id()
            .and_then(|p| i32::try_from(p).ok())
            .ok_or_else(|| PtyError::Spawn {
                program: program.clone(),
                detail: "no process id".into(),
            })?;
        // The std Child is not needed: the waiter thread observes and reaps by pid.
        drop(child);
        let started = Instant::now();

        let kill_on_error = |err: PtyError| {
            if let Err(e) = signal_group(pid, libc::SIGKILL) {
                tracing::warn!(pid, "killing a session that failed to start: {e}");
            }
            let mut status = 0;
            // SAFETY: reaping our own child after killing it.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            err
        };
        if let Some(pgid) = process_group_of(pid)
            && pgid != pid
        {
            return Err(kill_on_error(PtyError::NotGroupLeader { pid, pgid }));
        }

        let master = pair.master;
        let setup = (|| {
            let raw = master
                .as_raw_fd()
                .ok_or_else(|| PtyError::OpenPty("the PTY master has no file descriptor".into()))?;
            let reader_fd = dup_cloexec(raw).map_err(io_err("cannot duplicate the PTY master"))?;
            let writer = master
                .take_writer()
                .map_err(|e| PtyError::OpenPty(format!("{e:#}")))?;
            let (wake_read, wake_write) = pipe_cloexec().map_err(io_err("cannot create a pipe"))?;
            Ok::<_, PtyError>((reader_fd, writer, wake_read, wake_write))
        })();
        let (reader_fd, writer, wake_read, wake_write) = setup.map_err(kill_on_error)?;

        let shared = Arc::new(Shared {
            emulator: Mutex::new(Emulator::new(size, spec.scrollback)),
            counters: OutputCounters::new(started),
            generation: watch::Sender::new(0),
            run: watch::Sender::new(RunState::default()),
            tap: Mutex::new(None),
        });
        let (input, input_rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(INPUT_QUEUE);
        let (release_waiter, release_rx) = std::sync::mpsc::channel::<()>();

        let waiter_shared = Arc::clone(&shared);
        let threads = (|| {
            std::thread::Builder::new()
                .name(format!("pty-wait-{pid}"))
                .spawn(move || {
                    run_waiter(pid, release_rx, |info| {
                        waiter_shared.run.send_modify(|s| s.exit = Some(info));
                        waiter_shared.bump_generation();
                    })
                })
                .map_err(io_err("cannot start the waiter thread"))?;
            std::thread::Builder::new()
                .name(format!("pty-write-{pid}"))
                .spawn(move || run_writer(writer, input_rx))
                .map_err(io_err("cannot start the writer thread"))?;
            let reader_shared = Arc::clone(&shared);
            let replies = input.clone();
            let display = spec.display_filter.take().map(DisplayPipe::new);
            std::thread::Builder::new()
                .name(format!("pty-read-{pid}"))
                .spawn(move || {
                    run_reader(reader_fd, wake_read, log, display, reader_shared, replies)
                })
                .map_err(io_err("cannot start the reader thread"))?;
            Ok::<_, PtyError>(())
        })();
        let session = PtySession {
            shared,
            master: Mutex::new(master),
            input,
            pid,
            log_path: spec.log_path.clone(),
            started,
            release_waiter: Some(release_waiter),
            wake_reader: Some(wake_write),
        };
        // On error, dropping the session kills the group and releases whatever threads started.
        threads?;
        Ok(session)
    }

    /// The child's pid, which is also its process-group and session id.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    pub fn pgid(&self) -> i32 {
        self.pid
    }

    /// Whether the terminal's foreground program (or the agent itself) is blocked reading the
    /// terminal: it waits for someone to type (see [`crate::procinfo::blocked_reading`]).
    pub fn waiting_for_input(&self) -> bool {
        if !self.is_running() {
            return false;
        }
        let (tty, foreground) = {
            let master = self.master.lock().unwrap_or_else(|e| e.into_inner());
            (master.tty_name(), master.process_group_leader())
        };
        let Some(tty) = tty else {
            return false;
        };
        let mut pids = vec![self.pid];
        if let Some(fg) = foreground
            && fg != self.pid
            && fg > 1
        {
            pids.push(fg);
        }
        pids.into_iter()
            .any(|pid| crate::procinfo::blocked_reading(pid, &tty))
    }

    pub fn log_path(&self) -> Option<&Path> {
        self.log_path.as_deref()
    }

    pub fn started(&self) -> Instant {
        self.started
    }

    // ---- input ----

    /// Queues raw bytes for the child. Never blocks: a full queue (the child is not reading)
    /// is reported as `InputBackpressure`.
    pub fn write_input(&self, bytes: &[u8]) -> Result<(), PtyError> {
        if bytes.is_empty() {
            return Ok(());
        }
        match self.input.try_send(bytes.to_vec()) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => Err(PtyError::InputBackpressure),
            Err(TrySendError::Disconnected(_)) => Err(PtyError::InputClosed),
        }
    }

    /// A key press, encoded for the child's current modes (application cursor …).
    pub fn send_key(&self, key: KeyEvent) -> Result<(), PtyError> {
        self.write_input(&encode_key(key, &self.input_modes()))
    }

    /// A pane-relative mouse event; sent only if the child enabled a mouse mode covering it.
    pub fn send_mouse(&self, event: MouseEvent) -> Result<(), PtyError> {
        self.write_input(&encode_mouse(event, &self.input_modes()))
    }

    /// Focus gained/lost; sent only if the child enabled focus reporting (mode 1004).
    pub fn send_focus(&self, gained: bool) -> Result<(), PtyError> {
        self.write_input(&encode_focus(gained, &self.input_modes()))
    }

    /// Pastes text, bracketed only when the child enabled bracketed paste (mode 2004).
    pub fn paste(&self, text: &str) -> Result<(), PtyError> {
        self.write_input(&encode_paste(text, &self.input_modes()))
    }

    // ---- size ----

    /// Resizes the PTY (the child gets SIGWINCH) and the emulator together; clamped to ≥ 2×2.
    /// Returns the size applied.
    pub fn resize(&self, rows: u16, cols: u16) -> Result<TermSize, PtyError> {
        let size = TermSize::new(rows, cols).clamped();
        let master = self.master.lock().unwrap_or_else(|e| e.into_inner());
        // Emulator first, under the master lock, so output drawn for the new size lands on a
        // screen of that size.
        self.shared.lock_emulator().resize(size);
        if let Some(tap) = self.shared.lock_tap().as_mut() {
            tap.invalidate();
        }
        master
            .resize(PtySize {
                rows: size.rows,
                cols: size.cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .map_err(|e| PtyError::Resize {
                rows: size.rows,
                cols: size.cols,
                detail: format!("{e:#}"),
            })?;
        self.shared.bump_generation();
        Ok(size)
    }

    pub fn size(&self) -> TermSize {
        self.shared.lock_emulator().size()
    }

    // ---- screen ----

    /// Runs `f` on the current screen (for tui-term's `PseudoTerminal`). Keep `f` short: the
    /// reader waits for the lock.
    pub fn with_screen<R>(&self, f: impl FnOnce(&vt100::Screen) -> R) -> R {
        f(self.shared.lock_emulator().screen())
    }

    /// Runs `f` with the emulator itself (scrollback walks, several reads under one lock).
    pub fn with_emulator<R>(&self, f: impl FnOnce(&mut Emulator) -> R) -> R {
        f(&mut self.shared.lock_emulator())
    }

    /// The visible screen as text (trailing spaces and empty lines trimmed).
    pub fn screen_text(&self) -> String {
        self.shared.lock_emulator().screen_text()
    }

    /// The last `max_lines` lines of scrollback plus screen, as text.
    pub fn contents_with_scrollback(&self, max_lines: usize) -> String {
        self.shared
            .lock_emulator()
            .contents_with_scrollback(max_lines)
    }

    /// Cursor position, 0-based (row, col).
    pub fn cursor_position(&self) -> (u16, u16) {
        self.shared.lock_emulator().cursor_position()
    }

    /// The title set with OSC 0/2 (empty if none).
    pub fn title(&self) -> String {
        self.shared.lock_emulator().title().to_string()
    }

    pub fn input_modes(&self) -> InputModes {
        self.shared.lock_emulator().input_modes()
    }

    pub fn alternate_screen(&self) -> bool {
        self.shared.lock_emulator().alternate_screen()
    }

    /// True while the child is inside a synchronized-output block (mode 2026).
    pub fn sync_output_active(&self) -> bool {
        self.shared.lock_emulator().sync_output_active()
    }

    /// Since when the child has been inside a synchronized-output block: a renderer holds the
    /// pane's repaint meanwhile, but not longer than its own timeout.
    pub fn sync_output_since(&self) -> Option<Instant> {
        self.shared.lock_emulator().sync_output_since()
    }

    /// Scrolls the view back `rows` lines (0 = live). Returns the offset applied.
    pub fn set_scrollback_offset(&self, rows: usize) -> usize {
        let applied = self.shared.lock_emulator().set_scrollback_offset(rows);
        self.shared.bump_generation();
        applied
    }

    pub fn scrollback_offset(&self) -> usize {
        self.shared.lock_emulator().scrollback_offset()
    }

    // ---- remote viewers ----

    /// Starts (or restarts) copying the emulator's input, at most `cap` bytes between reads,
    /// and returns the screen the copy continues from.
    pub fn tap_start(&self, cap: usize) -> ScreenSnapshot {
        let emu = self.shared.lock_emulator();
        let snapshot = ScreenSnapshot {
            bytes: emu.screen().state_formatted(),
            size: emu.size(),
        };
        *self.shared.lock_tap() = Some(Tap::new(cap));
        snapshot
    }

    /// The bytes since the last read (`None` when not tapping).
    pub fn tap_take(&self) -> Option<TapRead> {
        self.shared.lock_tap().as_mut().map(Tap::take)
    }

    /// Stops copying (nobody watches any more).
    pub fn tap_stop(&self) {
        *self.shared.lock_tap() = None;
    }

    // ---- change notification ----

    /// A receiver that changes whenever the screen may have changed (output, resize, exit).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.shared.generation.subscribe()
    }

    /// Increases whenever the screen may have changed; compare with the last value rendered.
    pub fn generation(&self) -> u64 {
        *self.shared.generation.borrow()
    }

    /// Waits until `pred` holds for the screen, re-checking on each change. False on timeout or
    /// once the output has ended without `pred` holding.
    pub async fn wait_for_screen(
        &self,
        timeout: Duration,
        mut pred: impl FnMut(&vt100::Screen) -> bool,
    ) -> bool {
        let mut changes = self.subscribe();
        let mut run = self.shared.run.subscribe();
        let watch = async {
            loop {
                changes.borrow_and_update();
                if self.with_screen(&mut pred) {
                    return true;
                }
                if run.borrow_and_update().output_closed {
                    // The last output may have landed between the check above and the close.
                    return self.with_screen(&mut pred);
                }
                if changes.changed().await.is_err() {
                    return self.with_screen(&mut pred);
                }
            }
        };
        tokio::time::timeout(timeout, watch).await.unwrap_or(false)
    }

    /// Waits until the visible screen contains `needle`.
    pub async fn wait_for_text(&self, needle: &str, timeout: Duration) -> bool {
        self.wait_for_screen(timeout, |s| s.contents().contains(needle))
            .await
    }

    // ---- accounting ----

    pub fn stats(&self) -> OutputStats {
        self.shared.counters.snapshot(Instant::now())
    }

    // ---- process control ----

    pub fn run_state(&self) -> RunState {
        *self.shared.run.borrow()
    }

    /// The exit, once the child has exited.
    pub fn exit_info(&self) -> Option<ExitInfo> {
        self.run_state().exit
    }

    pub fn is_running(&self) -> bool {
        self.exit_info().is_none()
    }

    async fn wait_exit(&self) -> ExitInfo {
        let mut run = self.shared.run.subscribe();
        loop {
            if let Some(exit) = run.borrow_and_update().exit {
                return exit;
            }
            if run.changed().await.is_err() {
                // Unreachable while `self` holds the sender; report unknown rather than hang.
                return ExitInfo {
                    code: None,
                    signal: None,
                };
            }
        }
    }

    /// Waits for the child to exit, then for its remaining output to be read (bounded), so the
    /// screen and log are complete when this returns.
    pub async fn wait(&self) -> ExitInfo {
        let exit = self.wait_exit().await;
        let mut run = self.shared.run.subscribe();
        let drained = async {
            while !run.borrow_and_update().output_closed {
                if run.changed().await.is_err() {
                    break;
                }
            }
        };
        // Output still unread after this is given up: the exit is what the caller waits for.
        let _ = tokio::time::timeout(DRAIN_AFTER_EXIT, drained).await;
        exit
    }

    /// SIGKILL to the whole process group, now.
    pub fn kill(&self) -> Result<(), PtyError> {
        signal_group(self.pid, libc::SIGKILL).map_err(|source| PtyError::Signal {
            pgid: self.pid,
            source,
        })
    }

    /// Sends a signal (e.g. SIGINT) to the whole process group.
    pub fn signal(&self, signal: i32) -> Result<(), PtyError> {
        signal_group(self.pid, signal).map_err(|source| PtyError::Signal {
            pgid: self.pid,
            source,
        })
    }

    /// SIGTERM to the process group; whatever is still in the group after `grace` (the child or
    /// anything it started) gets SIGKILL. Returns how the child ended.
    pub async fn terminate(&self, grace: Duration) -> Result<ExitInfo, PtyError> {
        if self.exit_info().is_some() && !group_alive(self.pid) {
            return Ok(self.wait().await);
        }
        self.signal(libc::SIGTERM)?;
        let deadline = tokio::time::Instant::now() + grace;
        // A timeout here is handled below: whatever is still alive then gets SIGKILL.
        let _ = tokio::time::timeout_at(deadline, self.wait_exit()).await;
        while group_alive(self.pid) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(GROUP_POLL).await;
        }
        if self.exit_info().is_none() || group_alive(self.pid) {
            self.kill()?;
            let settle = tokio::time::Instant::now() + KILL_SETTLE;
            let _ = tokio::time::timeout_at(settle, self.wait_exit()).await;
            while group_alive(self.pid) && tokio::time::Instant::now() < settle {
                tokio::time::sleep(GROUP_POLL).await;
            }
        }
        Ok(self.wait().await)
    }
}

impl Drop for PtySession {
    fn drop(&mut self) {
        // The child is unreaped until the waiter is released, so its group id is still ours.
        if (self.exit_info().is_none() || group_alive(self.pid))
            && let Err(e) = signal_group(self.pid, libc::SIGKILL)
        {
            tracing::warn!(
                pid = self.pid,
                "killing a dropped session's process group: {e}"
            );
        }
        self.release_waiter.take();
        self.wake_reader.take();
    }
}

/// `OsString` pairs from `&str` pairs, for callers building a `SpawnSpec` env by hand.
pub fn env_pairs<'a>(
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Vec<(OsString, OsString)> {
    pairs
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
}
