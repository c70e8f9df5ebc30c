//! A finished attempt's log replayed into a terminal emulator, for the replay view: the log is
//! found from the task's events (the executor records its path as evidence), its tail fed to an
//! emulator of the pane's size. Stream-json logs (Claude) go through the same transcript filter
//! as the live pane, so the replay reads like the pane did.

use crate::agent::transcript::TranscriptFilter;
use crate::pty::{Emulator, LineFilter, TermSize};
use crate::store::{Event, EventFilter, Store};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// At most this much of the end of a log is replayed: enough for the scrollback.
const MAX_REPLAY_BYTES: u64 = 8 * 1024 * 1024;

/// The newest attempt log recorded in `events` (any `log` string in a payload, nested or not).
pub fn log_path_in(events: &[Event]) -> Option<PathBuf> {
    events
        .iter()
        .rev()
        .find_map(|e| find_log(&e.payload))
        .map(PathBuf::from)
}

fn find_log(v: &Value) -> Option<String> {
    match v {
        Value::Object(map) => map
            .get("log")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| map.values().find_map(find_log)),
        _ => None,
    }
}

/// The newest attempt log of `task_id` on disk, across runs (`<runs>/<run>/<plan>/<task>/*.log`):
/// how a console finds the log of an attempt another process is running right now (its path is
/// recorded only when the attempt ends).
pub fn newest_log_on_disk(runs: &Path, plan_id: &str, task_id: &str) -> Option<PathBuf> {
    let (plan, task) = (
        crate::domain::safe_id(plan_id),
        crate::domain::safe_id(task_id),
    );
    std::fs::read_dir(runs)
        .ok()?
        .flatten()
        .flat_map(|run| {
            std::fs::read_dir(run.path().join(&plan).join(&task))
                .into_iter()
                .flatten()
                .flatten()
        })
        .map(|f| f.path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .max()
        .map(|(_, p)| p)
}

/// Finds `task_id`'s last log through the store.
pub async fn find_log_path(
    store: &Arc<dyn Store>,
    plan_id: &str,
    task_id: &str,
) -> Result<PathBuf, String> {
    let events = store
        .events(&EventFilter {
            plan_id: Some(plan_id.to_string()),
            task_id: Some(task_id.to_string()),
            ..EventFilter::default()
        })
        .await
        .map_err(|e| e.to_string())?;
    log_path_in(&events).ok_or_else(|| format!("{task_id} has no attempt log yet"))
}

/// The log at `path` replayed into an emulator of `size` with `scrollback` lines.
pub fn replay_file(path: &Path, size: TermSize, scrollback: usize) -> Result<Emulator, String> {
    let bytes =
        read_tail(path, MAX_REPLAY_BYTES).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(replay_bytes(&bytes, size, scrollback))
}

/// `bytes` (a PTY log) replayed; stream-json lines rendered as the live pane renders them.
pub fn replay_bytes(bytes: &[u8], size: TermSize, scrollback: usize) -> Emulator {
    let mut emu = Emulator::new(size, scrollback);
    let stream_json = bytes
        .split(|b| *b == b'\n')
        .map(|l| l.trim_ascii())
        .find(|l| !l.is_empty())
        .is_some_and(|l| l.starts_with(b"{\"type\""));
    if !stream_json {
        emu.process(bytes);
        return emu;
    }
    let mut filter = TranscriptFilter;
    let mut out = Vec::new();
    for line in bytes.split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.starts_with(b"{") {
            filter.line(line, &mut out);
        } else if !line.is_empty() {
            out.extend_from_slice(line);
            out.extend_from_slice(b"\r\n");
        }
    }
    emu.process(&out);
    emu
}

fn read_tail(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    if len > max {
        f.seek(SeekFrom::Start(len - max))?;
    }
    let mut buf = Vec::new();
    f.take(max).read_to_end(&mut buf)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_newest_log_on_disk_is_found_across_runs() {
        let runs = tempfile::tempdir().unwrap();
        assert_eq!(newest_log_on_disk(runs.path(), "p", "T"), None);
        let old = runs.path().join("20260101T000000Z/p/T");
        let new = runs.path().join("20260102T000000Z/p/T");
        std::fs::create_dir_all(&old).unwrap();
        std::fs::create_dir_all(&new).unwrap();
        std::fs::write(old.join("1.log"), "old").unwrap();
        std::fs::write(old.join("1.prompt.md"), "not a log").unwrap();
        let past = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(old.join("1.log"))
            .unwrap()
            .set_modified(past)
            .unwrap();
        std::fs::write(new.join("2.log"), "new").unwrap();
        assert_eq!(
            newest_log_on_disk(runs.path(), "p", "T"),
            Some(new.join("2.log"))
        );
        // Another task's logs are not taken.
        assert_eq!(newest_log_on_disk(runs.path(), "p", "U"), None);
    }

    fn ev(id: i64, payload: Value) -> Event {
        Event {
            id,
            ts: chrono::Utc::now(),
            event_type: "task.done".into(),
            plan_id: Some("p".into()),
            task_id: Some("T".into()),
            worker_id: None,
            epoch: None,
            from_status: None,
            to_status: None,
            payload,
        }
    }

    #[test]
    fn the_newest_log_wins_wherever_it_sits() {
        let events = [
            ev(1, json!({"log": "/runs/a/1.log"})),
            ev(2, json!({"evidence": {"log": "/runs/b/2.log"}})),
            ev(3, json!({"reason": "x"})),
        ];
        assert_eq!(log_path_in(&events), Some(PathBuf::from("/runs/b/2.log")));
        assert_eq!(log_path_in(&events[2..]), None);
    }

    #[test]
    fn plain_logs_replay_as_is_and_stream_json_as_a_transcript() {
        let emu = replay_bytes(
            b"\x1b[1mhello\x1b[0m\r\nworld\r\n",
            TermSize::new(5, 20),
            10,
        );
        assert!(
            emu.screen_text().starts_with("hello\nworld"),
            "{}",
            emu.screen_text()
        );
        let json = br#"{"type":"assistant","message":{"content":[{"type":"text","text":"Reading the parser."}]}}
{"type":"result","subtype":"success","is_error":false,"num_turns":2,"total_cost_usd":0.01,"result":"done"}
"#;
        let emu = replay_bytes(json, TermSize::new(8, 60), 10);
        let text = emu.screen_text();
        assert!(text.contains("Reading the parser."), "{text}");
        assert!(!text.contains("{\"type\""), "{text}");
    }

    #[test]
    fn a_missing_log_is_named() {
        let err = replay_file(Path::new("/nonexistent/1.log"), TermSize::new(5, 20), 10)
            .err()
            .unwrap_or_default();
        assert!(err.contains("/nonexistent/1.log"), "{err}");
    }
}
