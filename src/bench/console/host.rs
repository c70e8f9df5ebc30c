//! A program in a terminal of its own: a PTY of a fixed size whose output is read as fast as it
//! comes (like sshd or a fast terminal would) and watched for frames. The console wraps every
//! frame in a synchronized update (`ESC [ ? 2026 h` … `ESC [ ? 2026 l`), so the end of one is
//! the moment the operator's terminal may show it: that is how the first frame is timed, at the
//! terminal, with no hook inside the console and no polling latency. Like any terminal it
//! answers the cursor-position query programs send at start.

use portable_pty::{CommandBuilder, MasterPty, PtySize, native_pty_system};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The end of a synchronized update: one complete frame.
pub(crate) const FRAME_END: &[u8] = b"\x1b[?2026l";
/// "Where is the cursor?" (DSR 6): a terminal must answer it, and the console asks it once at
/// start (ratatui), giving up after two seconds.
pub(crate) const CURSOR_QUERY: &[u8] = b"\x1b[6n";

/// Counts a byte pattern in a stream that arrives in arbitrary chunks.
#[derive(Debug)]
pub(crate) struct PatternCounter {
    pattern: &'static [u8],
    /// The last bytes of the stream so far (shorter than the pattern), for a pattern split
    /// across reads.
    carry: Vec<u8>,
}

impl PatternCounter {
    pub(crate) fn new(pattern: &'static [u8]) -> PatternCounter {
        PatternCounter {
            pattern,
            carry: Vec::new(),
        }
    }

    /// Occurrences that end within `chunk`.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> u64 {
        let keep = self.pattern.len().saturating_sub(1);
        // The carry is shorter than the pattern, so any match in carry + head straddles them.
        let mut joined = std::mem::take(&mut self.carry);
        let carried = joined.len();
        joined.extend_from_slice(&chunk[..chunk.len().min(keep)]);
        let straddling = if carried > 0 {
            count(&joined, self.pattern)
        } else {
            0
        };
        let total = straddling + count(chunk, self.pattern);
        joined.truncate(carried);
        joined.extend_from_slice(&chunk[chunk.len().saturating_sub(keep)..]);
        let cut = joined.len().saturating_sub(keep);
        self.carry = joined.split_off(cut);
        total as u64
    }
}

fn count(hay: &[u8], pattern: &[u8]) -> usize {
    hay.windows(pattern.len()).filter(|w| *w == pattern).count()
}

/// What the terminal has seen so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Seen {
    /// End of the first complete frame, after spawn.
    pub first_frame: Option<Duration>,
    /// End of the first frame whose screen contains the needle, after spawn.
    pub needle_frame: Option<Duration>,
    /// The screen text at that frame (or at the first frame when there is no needle).
    pub screen: String,
    /// The program closed the terminal (exited).
    pub closed: bool,
}

struct Shared {
    seen: Mutex<Seen>,
    bytes: AtomicU64,
    frames: AtomicU64,
}

/// A program running in a `rows`×`cols` terminal.
pub(crate) struct TermHost {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    // Held open: closing the master would hang the program up.
    _master: Box<dyn MasterPty + Send>,
    pid: u32,
    started: Instant,
    shared: Arc<Shared>,
}

/// How to start the program.
pub(crate) struct HostSpec<'a> {
    pub argv: Vec<OsString>,
    pub cwd: &'a Path,
    pub env: Vec<(OsString, OsString)>,
    pub env_remove: Vec<OsString>,
    pub rows: u16,
    pub cols: u16,
    /// Text that marks the frame worth timing (e.g. the plan id in the header, shown once the
    /// plan is loaded).
    pub needle: Option<String>,
}

impl TermHost {
    pub(crate) fn spawn(spec: HostSpec<'_>) -> std::io::Result<TermHost> {
        let io = |e: anyhow::Error| std::io::Error::other(format!("{e:#}"));
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: spec.rows,
                cols: spec.cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .map_err(io)?;
        let Some((program, args)) = spec.argv.split_first() else {
            return Err(std::io::Error::other("nothing to run"));
        };
        let mut cmd = CommandBuilder::new(program);
        cmd.args(args);
        cmd.cwd(spec.cwd);
        for k in &spec.env_remove {
            cmd.env_remove(k);
        }
        for (k, v) in &spec.env {
            cmd.env(k, v);
        }
        let mut reader = pair.master.try_clone_reader().map_err(io)?;
        let mut writer = pair.master.take_writer().map_err(io)?;
        let started = Instant::now();
        let child = pair.slave.spawn_command(cmd).map_err(io)?;
        drop(pair.slave);
        let pid = child
            .process_id()
            .ok_or_else(|| std::io::Error::other("the program has no process id"))?;
        let shared = Arc::new(Shared {
            seen: Mutex::new(Seen::default()),
            bytes: AtomicU64::new(0),
            frames: AtomicU64::new(0),
        });
        let thread_shared = shared.clone();
        let (rows, cols, needle) = (spec.rows, spec.cols, spec.needle);
        std::thread::Builder::new()
            .name(format!("bench-term-{pid}"))
            .spawn(move || {
                read_loop(
                    &mut reader,
                    &mut writer,
                    &thread_shared,
                    started,
                    rows,
                    cols,
                    needle,
                );
            })?;
        Ok(TermHost {
            child,
            _master: pair.master,
            pid,
            started,
            shared,
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    pub(crate) fn started(&self) -> Instant {
        self.started
    }

    pub(crate) fn seen(&self) -> Seen {
        self.shared
            .seen
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    /// Bytes the program wrote to its terminal.
    pub(crate) fn bytes(&self) -> u64 {
        self.shared.bytes.load(Ordering::Relaxed)
    }

    /// Complete frames it drew.
    pub(crate) fn frames(&self) -> u64 {
        self.shared.frames.load(Ordering::Relaxed)
    }

    /// Whether it is still running (reaps it when not).
    pub(crate) fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits until `done(seen)` holds, the program exits, or `timeout` passes.
    pub(crate) async fn wait_until(
        &mut self,
        timeout: Duration,
        done: impl Fn(&Seen) -> bool,
    ) -> Seen {
        let until = Instant::now() + timeout;
        loop {
            let seen = self.seen();
            if done(&seen) || Instant::now() >= until || !self.running() {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// SIGTERM, then SIGKILL after `grace`. Returns whether it ended by itself within `grace`.
    pub(crate) async fn stop(&mut self, grace: Duration) -> bool {
        if !self.running() {
            return true;
        }
        signal(self.pid, nix::sys::signal::Signal::SIGTERM);
        let until = Instant::now() + grace;
        while Instant::now() < until {
            if !self.running() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        false
    }
}

impl Drop for TermHost {
    fn drop(&mut self) {
        if !self.running() {
            return;
        }
        // A console stops its agents on SIGTERM; give it a moment before forcing it.
        signal(self.pid, nix::sys::signal::Signal::SIGTERM);
        for _ in 0..250 {
            if !self.running() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn signal(pid: u32, sig: nix::sys::signal::Signal) {
    if let Ok(pid) = i32::try_from(pid) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
    }
}

/// Reads until the program closes the terminal. Until the frame worth timing has been seen the
/// output also goes through an emulator, to read the screen; after that it is only counted.
fn read_loop(
    reader: &mut Box<dyn Read + Send>,
    writer: &mut Box<dyn Write + Send>,
    shared: &Shared,
    started: Instant,
    rows: u16,
    cols: u16,
    needle: Option<String>,
) {
    let mut parser = Some(vt100::Parser::new(rows, cols, 0));
    let mut frames_in = PatternCounter::new(FRAME_END);
    let mut queries_in = PatternCounter::new(CURSOR_QUERY);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let at = started.elapsed();
        let chunk = &buf[..n];
        shared.bytes.fetch_add(n as u64, Ordering::Relaxed);
        let frames = frames_in.feed(chunk);
        if let Some(p) = parser.as_mut() {
            p.process(chunk);
        }
        for _ in 0..queries_in.feed(chunk) {
            let (row, col) = parser
                .as_ref()
                .map_or((0, 0), |p| p.screen().cursor_position());
            let reply = format!("\x1b[{};{}R", row + 1, col + 1);
            if writer.write_all(reply.as_bytes()).is_err() {
                break;
            }
        }
        if frames == 0 {
            continue;
        }
        let before = shared.frames.fetch_add(frames, Ordering::Relaxed);
        let Ok(mut seen) = shared.seen.lock() else {
            break;
        };
        if before == 0 {
            seen.first_frame = Some(at);
        }
        if let Some(p) = parser.as_ref() {
            let screen = p.screen().contents();
            let hit = needle.as_deref().is_none_or(|n| screen.contains(n));
            if hit {
                seen.needle_frame = Some(at);
                seen.screen = screen;
                parser = None;
            } else if before == 0 {
                seen.screen = screen;
            }
        }
    }
    if let Ok(mut seen) = shared.seen.lock() {
        seen.closed = true;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn frames_in(chunks: &[&[u8]]) -> u64 {
        let mut s = PatternCounter::new(FRAME_END);
        chunks.iter().map(|c| s.feed(c)).sum()
    }

    #[test]
    fn frames_are_counted_wherever_the_reads_split_them() {
        let stream = b"\x1b[?2026hA\x1b[?2026l\x1b[?2026hBB\x1b[?2026lxyz\x1b[?2026l";
        assert_eq!(frames_in(&[stream]), 3);
        for cut in 0..stream.len() {
            let (a, b) = stream.split_at(cut);
            assert_eq!(frames_in(&[a, b]), 3, "cut at {cut}");
        }
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(frames_in(&bytes), 3, "byte by byte");
        let threes: Vec<&[u8]> = stream.chunks(3).collect();
        assert_eq!(frames_in(&threes), 3);
        assert_eq!(frames_in(&[b"\x1b[?2026", b"h"]), 0);
    }

    #[tokio::test]
    async fn a_program_in_the_terminal_is_watched_for_frames() {
        let dir = tempfile::tempdir().unwrap();
        let script = "printf 'hello\\033[?2026h\\033[?2026l'; sleep 0.2; \
                      printf '\\033[2J\\033[Hready now\\033[?2026l'; sleep 5";
        let mut host = TermHost::spawn(HostSpec {
            argv: vec!["sh".into(), "-c".into(), script.into()],
            cwd: dir.path(),
            env: Vec::new(),
            env_remove: Vec::new(),
            rows: 10,
            cols: 40,
            needle: Some("ready now".into()),
        })
        .unwrap();
        let seen = host
            .wait_until(Duration::from_secs(10), |s| s.needle_frame.is_some())
            .await;
        let first = seen.first_frame.unwrap();
        let ready = seen.needle_frame.unwrap();
        assert!(ready > first, "{seen:?}");
        assert!(seen.screen.contains("ready now"), "{seen:?}");
        assert_eq!(host.frames(), 2);
        assert!(host.stop(Duration::from_secs(5)).await);
        assert!(!host.running());
    }
}
