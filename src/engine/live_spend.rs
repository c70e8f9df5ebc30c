//! Spend while an agent works, for the budget checks: the pane's view of a stream-json agent
//! feeds each complete output line to the backend's [`UsageMeter`], and where the CLI writes its
//! usage to a session file as it works but prints it only at the end (Codex, Gemini CLI), a
//! follower thread reads that file into the same meter. The running total goes to the attempt control, which the budget guard reads.

use super::control::AttemptControl;
use crate::agent::{SessionLog, UsageMeter};
use crate::domain::Usd;
use crate::pty::LineFilter;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How often the follower looks for the session file and reads what was added to it.
const POLL: Duration = Duration::from_millis(250);

/// The meter and where its running cost goes, shared by the pane's view (PTY reader thread) and
/// the session follower; the lock keeps their readings and reports in one order.
#[derive(Clone)]
struct Spend {
    meter: Arc<Mutex<UsageMeter>>,
    ctl: AttemptControl,
    base: Usd,
}

impl Spend {
    fn feed(&self, line: &str) {
        let mut meter = self.meter.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(cost) = meter.feed_line(line) {
            self.ctl.set_spent(self.base + cost);
        }
    }
}

/// The pane's view of a stream-json agent, metering its spend on the way: each complete line is
/// priced (running total reported to the attempt control, for the budget checks) and rendered.
/// Runs on the PTY reader thread.
pub(crate) struct MeteredView {
    view: Box<dyn LineFilter>,
    spend: Option<Spend>,
    /// Where the CLI also writes its usage, until the output names the session.
    log: Option<SessionLog>,
    follower: Option<SessionFollower>,
}

impl MeteredView {
    /// `base` is the attempt's spend before this round.
    pub(crate) fn new(
        view: Box<dyn LineFilter>,
        meter: Option<UsageMeter>,
        log: Option<SessionLog>,
        ctl: AttemptControl,
        base: Usd,
    ) -> MeteredView {
        let spend = meter.map(|m| Spend {
            meter: Arc::new(Mutex::new(m)),
            ctl,
            base,
        });
        MeteredView {
            view,
            log: log.filter(|_| spend.is_some()),
            spend,
            follower: None,
        }
    }
}

impl LineFilter for MeteredView {
    fn line(&mut self, line: &[u8], out: &mut Vec<u8>) {
        if let (Some(spend), Ok(text)) = (self.spend.as_ref(), std::str::from_utf8(line)) {
            spend.feed(text);
            if self.follower.is_none()
                && let Some(log) = self.log.as_ref()
                && let Some(id) = log.id_in(text)
                && let Some(log) = self.log.take()
            {
                self.follower = Some(SessionFollower::start(log, id, spend.clone()));
            }
        }
        self.view.line(line, out);
    }
}

/// A thread reading one session's file into the meter as the CLI appends to it; it stops when
/// dropped (with the pane's view, when the session ends).
struct SessionFollower {
    stop: Arc<AtomicBool>,
}

impl SessionFollower {
    fn start(log: SessionLog, id: String, spend: Spend) -> SessionFollower {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let spawned = std::thread::Builder::new()
            .name("whilly-session-log".into())
            .spawn(move || follow(&log, &id, &spend, &stopped));
        if let Err(e) = spawned {
            // Live spend from the file is lost; the final parse still prices the run.
            tracing::warn!(error = %e, "could not start following the agent's session file");
        }
        SessionFollower { stop }
    }
}

impl Drop for SessionFollower {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn follow(log: &SessionLog, id: &str, spend: &Spend, stop: &AtomicBool) {
    let mut tail: Option<Tail> = None;
    while !stop.load(Ordering::Relaxed) {
        if tail.is_none() {
            tail = (log.locate)(&log.dir, id).and_then(|p| Tail::open(&p));
        }
        if let Some(t) = tail.as_mut() {
            for line in t.read_lines() {
                spend.feed(&line);
            }
        }
        std::thread::sleep(POLL);
    }
}

/// Reads a growing file's complete lines, each once. The file is the agent CLI's, in a place
/// the agent can write: it is opened only when it is a regular file (a FIFO there cannot hang
/// the follower, a link to a device cannot feed it forever), read at most [`TAIL_CHUNK`] at a
/// time, and a line longer than [`TAIL_LINE_MAX`] is dropped, not kept growing.
pub(crate) struct Tail {
    file: File,
    offset: u64,
    partial: Vec<u8>,
}

/// The most bytes one read takes.
const TAIL_CHUNK: u64 = 1024 * 1024;
/// A line of usage is short; one longer than this is no usage record.
const TAIL_LINE_MAX: usize = 1024 * 1024;

impl Tail {
    pub(crate) fn open(path: &Path) -> Option<Tail> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)
            .ok()?;
        if !file.metadata().ok()?.is_file() {
            tracing::warn!(path = %path.display(), "not following a session file that is not a regular file");
            return None;
        }
        Some(Tail {
            file,
            offset: 0,
            partial: Vec::new(),
        })
    }

    /// The lines completed since the last call (a line still being written waits).
    pub(crate) fn read_lines(&mut self) -> Vec<String> {
        let mut buf = Vec::new();
        let read = self
            .file
            .seek(SeekFrom::Start(self.offset))
            .and_then(|_| (&mut self.file).take(TAIL_CHUNK).read_to_end(&mut buf));
        let Ok(n) = read else {
            return Vec::new();
        };
        self.offset += n as u64;
        self.partial.extend_from_slice(&buf);
        if self.partial.len() > TAIL_LINE_MAX && !self.partial.contains(&b'\n') {
            self.partial.clear();
        }
        let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') else {
            return Vec::new();
        };
        let rest = self.partial.split_off(end + 1);
        let done = std::mem::replace(&mut self.partial, rest);
        done.split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::agent::codex::{Codex, CodexBackend};
    use crate::agent::{AgentSettings, Backend, BackendKind, ModelPrice, PriceTable};
    use crate::engine::control::attempt_control;
    use std::io::Write;
    use std::path::PathBuf;
    use std::time::Instant;

    #[test]
    fn a_fifo_or_device_in_place_of_the_session_file_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("rollout.jsonl");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(
            Tail::open(&fifo).is_none(),
            "opened without blocking, refused"
        );
        assert!(Tail::open(Path::new("/dev/zero")).is_none());
        let file = dir.path().join("real.jsonl");
        std::fs::write(&file, "a\nb\npart").unwrap();
        let mut t = Tail::open(&file).unwrap();
        assert_eq!(t.read_lines(), vec!["a".to_string(), "b".to_string()]);
    }

    const ID: &str = "01a24a53-13e0-7020-a815-07569af19a36";

    fn token_count(input: u64) -> String {
        format!(
            r#"{{"type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{{"input_tokens":{input},"cached_input_tokens":0,"output_tokens":0}}}}}}}}"#
        ) + "\n"
    }

    fn codex(home: &Path) -> CodexBackend {
        let mut s = AgentSettings::new(BackendKind::Codex);
        s.model = Some("gpt-5".into());
        s.env = vec![("CODEX_HOME".into(), home.to_string_lossy().into_owned())];
        CodexBackend::new(s, PathBuf::from("/bin/codex"), Codex)
    }

    fn prices() -> PriceTable {
        let mut p = PriceTable::new();
        p.insert("gpt-5", ModelPrice::new(1.0, 10.0));
        p
    }

    #[test]
    fn a_tail_reads_each_complete_line_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.jsonl");
        let mut f = File::create(&path).unwrap();
        let mut t = Tail::open(&path).unwrap();
        assert!(t.read_lines().is_empty());
        f.write_all(b"one\ntw").unwrap();
        assert_eq!(t.read_lines(), vec!["one"]);
        assert!(t.read_lines().is_empty());
        f.write_all(b"o\n\nthree\n").unwrap();
        assert_eq!(t.read_lines(), vec!["two", "three"]);
    }

    /// The output names the thread; the follower finds its file and meters each running total
    /// as Codex appends it, long before the run's one `turn.completed`.
    #[test]
    fn the_view_follows_the_session_file_into_the_spend() {
        let home = tempfile::tempdir().unwrap();
        let backend = codex(home.path());
        let (handle, ctl) = attempt_control();
        let mut view = MeteredView::new(
            Box::new(crate::agent::TranscriptFilter),
            backend.usage_meter(&prices()),
            backend.session_log(),
            ctl,
            Usd::from_f64(0.5),
        );
        let mut out = Vec::new();
        view.line(
            format!(r#"{{"type":"thread.started","thread_id":"{ID}"}}"#).as_bytes(),
            &mut out,
        );
        let day = home.path().join("sessions/2026/12/06");
        std::fs::create_dir_all(&day).unwrap();
        let path = day.join(format!("rollout-2026-12-06T07-48-08-{ID}.jsonl"));
        let mut f = File::create(&path).unwrap();
        f.write_all(token_count(1_000_000).as_bytes()).unwrap();
        let wait = |want: Usd| {
            let deadline = Instant::now() + Duration::from_secs(10);
            while handle.spent() != want && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            assert_eq!(handle.spent(), want);
        };
        wait(Usd::from_f64(1.5));
        f.write_all(token_count(3_000_000).as_bytes()).unwrap();
        wait(Usd::from_f64(3.5));
        // The run's own total as it ends: the same figure, not added.
        view.line(
            br#"{"type":"turn.completed","usage":{"input_tokens":3000000,"cached_input_tokens":0,"output_tokens":0}}"#,
            &mut out,
        );
        assert_eq!(handle.spent(), Usd::from_f64(3.5));
        // Once the view is gone the follower stops reading.
        drop(view);
        std::thread::sleep(POLL * 3);
        f.write_all(token_count(9_000_000).as_bytes()).unwrap();
        std::thread::sleep(POLL * 3);
        assert_eq!(handle.spent(), Usd::from_f64(3.5));
    }
}
