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
use super::shared::Shared;

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
    /// The end of the output that is not written yet: secrets are redacted line by line, so
    /// one split across two reads (or across a pause) is still caught.
    pending: Vec<u8>,
    redactor: crate::domain::secrets::LogRedactor,
    /// The most bytes written to the head of the log; 0: no limit. Past it, only the last
    /// [`LogSink::tail_max`] bytes are kept (in `tail`), written at the end after a note.
    head_max: u64,
    tail_max: usize,
    written: u64,
    tail: std::collections::VecDeque<u8>,
    dropped: u64,
}

/// The tail of a capped log kept in memory: where the agent's final result is.
const TAIL_MAX: usize = 4 * 1024 * 1024;

/// A partial line longer than this is written out without waiting for its end.
const MAX_PENDING: usize = 16 * 1024;

impl LogSink {
    pub(crate) fn new(path: PathBuf, file: File) -> Self {
        Self {
            path,
            out: BufWriter::with_capacity(LOG_BUFFER, file),
            failed: false,
            pending: Vec::new(),
            redactor: Default::default(),
            head_max: 0,
            tail_max: 0,
            written: 0,
            tail: Default::default(),
            dropped: 0,
        }
    }

    /// Keeps at most `limit` bytes (0: no limit): the head, then the tail, with a note of what
    /// was left out between them.
    pub(crate) fn limited(mut self, limit: u64) -> Self {
        if limit > 0 {
            self.tail_max = (limit / 2).min(TAIL_MAX as u64) as usize;
            self.head_max = limit - self.tail_max as u64;
        }
        self
    }

    /// Logs `bytes`, whole lines at once and redacted (`domain::secrets`): what an agent prints
    /// never reaches the disk with a token in it. Parsers read the log, so they see the same.
    fn write(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        let cut = crate::domain::secrets::LogRedactor::line_cut(&self.pending, MAX_PENDING);
        if cut > 0 {
            let lines: Vec<u8> = self.pending.drain(..cut).collect();
            self.emit(&lines);
        }
    }

    fn emit(&mut self, bytes: &[u8]) {
        let redacted = self.redactor.redact(bytes);
        let mut redacted: &[u8] = &redacted;
        if self.head_max > 0 {
            let room = self.head_max.saturating_sub(self.written) as usize;
            if redacted.len() > room {
                // Past the head: the rest goes to the tail, whose oldest bytes make way.
                self.tail.extend(&redacted[room..]);
                let over = self.tail.len().saturating_sub(self.tail_max);
                self.tail.drain(..over);
                self.dropped += over as u64;
                redacted = &redacted[..room];
            }
            self.written += redacted.len() as u64;
        }
        self.write_out(redacted);
    }

    fn write_out(&mut self, redacted: &[u8]) {
        if !self.failed
            && let Err(err) = self.out.write_all(redacted)
        {
            // A full disk must not stop the agent: keep emulating, stop logging, say so once.
            tracing::warn!(path = %self.path.display(), %err, "session log write failed; logging stopped");
            self.failed = true;
        }
    }

    /// The output went quiet: writes out what may be written of the partial line (a short one
    /// waits: it may be the first half of a secret) and flushes.
    fn flush(&mut self) {
        let cut = crate::domain::secrets::LogRedactor::quiet_cut(&self.pending);
        if cut > 0 {
            let part: Vec<u8> = self.pending.drain(..cut).collect();
            self.emit(&part);
        }
        self.flush_file();
    }

    /// The output ended: everything pending is written, and a capped log's tail after a note
    /// of what was left out.
    fn finish(&mut self) {
        if !self.pending.is_empty() {
            let rest = std::mem::take(&mut self.pending);
            self.emit(&rest);
        }
        if !self.tail.is_empty() {
            let note = format!(
                "\n[whilly: {} bytes of output left out here; the log keeps its first {} and its last {} bytes]\n",
                self.dropped,
                self.head_max,
                self.tail.len()
            );
            self.write_out(note.as_bytes());
            let tail: Vec<u8> = std::mem::take(&mut self.tail).into();
            self.write_out(&tail);
        }
        self.flush_file();
    }

    fn flush_file(&mut self) {
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
        self.finish();
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
        log.finish();
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
