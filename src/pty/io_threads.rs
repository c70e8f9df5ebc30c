//! The reader and writer threads of a session. Blocking reads and writes live here, never in
//! tokio tasks: the reader may wait on the child, but never on the UI.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::time::Instant;

use super::filter::DisplayPipe;
use super::session::Shared;

/// Bytes read per `read` call.
pub(crate) const READ_CHUNK: usize = 64 * 1024;
/// Log buffer: output is flushed whenever the reader is about to wait, so the log is current
/// whenever the child is quiet, and written in large blocks while it floods.
const LOG_BUFFER: usize = 256 * 1024;
/// Chunks still drained after the session is dropped, so a process outside the group that keeps
/// flooding the terminal cannot keep the thread alive.
const SHUTDOWN_DRAIN_CHUNKS: usize = 64;

/// The append-only raw output log of one attempt.
pub(crate) struct LogSink {
    path: PathBuf,
    out: BufWriter<File>,
    failed: bool,
    /// The end of the output that is not a whole line yet: secrets are redacted line by line,
    /// so one split across two reads is still caught.
    pending: Vec<u8>,
}

/// A partial line longer than this is written out without waiting for its end.
const MAX_PENDING: usize = 16 * 1024;

impl LogSink {
    pub(crate) fn new(path: PathBuf, file: File) -> Self {
        Self {
            path,
            out: BufWriter::with_capacity(LOG_BUFFER, file),
            failed: false,
            pending: Vec::new(),
        }
    }

    /// Logs `bytes`, whole lines at once and redacted (`domain::secrets`): what an agent prints
    /// never reaches the disk with a token in it. Parsers read the log, so they see the same.
    fn write(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        let cut = match self.pending.iter().rposition(|b| *b == b'\n') {
            Some(i) => i + 1,
            None if self.pending.len() >= MAX_PENDING => self.pending.len(),
            None => return,
        };
        let lines: Vec<u8> = self.pending.drain(..cut).collect();
        self.emit(&lines);
    }

    fn emit(&mut self, bytes: &[u8]) {
        let redacted = crate::domain::secrets::redact_bytes(bytes);
        if !self.failed
            && let Err(err) = self.out.write_all(&redacted)
        {
            // A full disk must not stop the agent: keep emulating, stop logging, say so once.
            tracing::warn!(path = %self.path.display(), %err, "session log write failed; logging stopped");
            self.failed = true;
        }
    }

    /// Writes out what is pending (the output went quiet: a prompt without a newline is a
    /// whole thing too) and flushes.
    fn flush(&mut self) {
        if !self.pending.is_empty() {
            let rest = std::mem::take(&mut self.pending);
            self.emit(&rest);
        }
        if !self.failed
            && let Err(err) = self.out.flush()
        {
            tracing::warn!(path = %self.path.display(), %err, "session log flush failed; logging stopped");
            self.failed = true;
        }
    }
}

impl Drop for LogSink {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Readiness of (pty, wake pipe); errors are reported as "pty ready" so `read` surfaces them.
fn poll2(pty: RawFd, wake: RawFd, timeout_ms: i32) -> (bool, bool) {
    let mut fds = [
        libc::pollfd {
            fd: pty,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: wake,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    loop {
        // SAFETY: `fds` is a valid array of two pollfd for the duration of the call.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout_ms) };
        if rc >= 0 {
            return (fds[0].revents != 0, fds[1].revents != 0);
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return (true, false);
        }
    }
}

/// Reads the PTY until EOF (or until the session is dropped and the backlog drained): log,
/// emulator, query replies, counters, then a generation bump for whoever renders.
pub(crate) fn run_reader(
    pty: OwnedFd,
    wake: OwnedFd,
    mut log: Option<LogSink>,
    mut display: Option<DisplayPipe>,
    shared: Arc<Shared>,
    replies: SyncSender<Vec<u8>>,
) {
    let pty_fd = pty.as_raw_fd();
    let wake_fd = wake.as_raw_fd();
    let mut pty = File::from(pty);
    let mut buf = vec![0u8; READ_CHUNK];
    let mut shown = Vec::new();
    let mut shutdown_budget: Option<usize> = None;
    loop {
        let (mut ready, mut woken) = poll2(pty_fd, wake_fd, 0);
        if !ready {
            if shutdown_budget.is_some() {
                break;
            }
            if let Some(log) = log.as_mut() {
                log.flush();
            }
            (ready, woken) = poll2(pty_fd, wake_fd, -1);
        }
        if woken && shutdown_budget.is_none() {
            shutdown_budget = Some(SHUTDOWN_DRAIN_CHUNKS);
        }
        if let Some(left) = shutdown_budget.as_mut() {
            if *left == 0 {
                break;
            }
            *left -= 1;
        }
        if !ready {
            continue;
        }
        let n = match pty.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock
                ) =>
            {
                continue;
            }
            Err(e) => {
                // EIO is how Linux says "every slave descriptor is closed": the normal end.
                if e.raw_os_error() != Some(libc::EIO) {
                    tracing::warn!(err = %e, "pty read failed");
                }
                break;
            }
        };
        let chunk = &buf[..n];
        if let Some(log) = log.as_mut() {
            log.write(chunk);
        }
        let answer = match display.as_mut() {
            None => shared.emulate(chunk),
            Some(pipe) => {
                shown.clear();
                pipe.feed(chunk, &mut shown);
                emulate(&shared, &shown)
            }
        };
        shared.counters.record(n, Instant::now());
        send_replies(&replies, answer);
        shared.bump_generation();
    }
    if let Some(log) = log.as_mut() {
        log.flush();
    }
    if let Some(pipe) = display.as_mut() {
        shown.clear();
        pipe.finish(&mut shown);
        send_replies(&replies, emulate(&shared, &shown));
    }
    shared.run.send_modify(|s| s.output_closed = true);
    shared.bump_generation();
}

fn emulate(shared: &Shared, shown: &[u8]) -> Vec<u8> {
    if shown.is_empty() {
        Vec::new()
    } else {
        shared.emulate(shown)
    }
}

fn send_replies(replies: &SyncSender<Vec<u8>>, answer: Vec<u8>) {
    if answer.is_empty() {
        return;
    }
    match replies.try_send(answer) {
        Ok(()) | Err(TrySendError::Disconnected(_)) => {}
        Err(TrySendError::Full(_)) => {
            tracing::warn!("input queue full; a terminal query reply was dropped");
        }
    }
}

/// Writes queued input (keys, pastes, query replies) to the PTY in order until the queue closes
/// or the terminal does.
pub(crate) fn run_writer(mut out: Box<dyn Write + Send>, queue: Receiver<Vec<u8>>) {
    while let Ok(bytes) = queue.recv() {
        if let Err(err) = out.write_all(&bytes).and_then(|()| out.flush()) {
            tracing::debug!(%err, "pty write failed; input closed");
            break;
        }
    }
}
