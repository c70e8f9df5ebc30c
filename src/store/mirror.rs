//! The JSONL mirror of the audit trail: after each commit, the events that transaction wrote are
//! appended to a file, one JSON object per line, so `tail -f` and plain tools can follow a run.
//!
//! The database stays the source of truth; a mirror write failure is logged, never raised, because
//! the transaction it mirrors has already committed.

use super::types::Event;
use chrono::SecondsFormat;
use serde_json::{Value, json};
use std::io::Write;
use std::path::PathBuf;

/// Appends committed events to a JSONL file.
#[derive(Debug, Clone)]
pub(crate) struct JsonlMirror {
    path: PathBuf,
}

impl JsonlMirror {
    pub(crate) fn new(path: impl Into<PathBuf>) -> Self {
        JsonlMirror { path: path.into() }
    }

    /// Appends `events` (in order) and logs a warning on failure.
    pub(crate) fn append(&self, events: &[Event]) {
        if let Err(e) = self.try_append(events) {
            tracing::warn!(
                path = %self.path.display(),
                error = %e,
                count = events.len(),
                "could not append events to the JSONL mirror; the database still has them"
            );
        }
    }

    /// Appends `events` in ONE `write` call on an `O_APPEND` descriptor, so lines from concurrent
    /// processes never interleave mid-line.
    pub(crate) fn try_append(&self, events: &[Event]) -> std::io::Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        let buf = render_lines(events);
        if let Some(parent) = self.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            crate::fsutil::private_dir(parent)?;
        }
        let mut file = crate::fsutil::private_append(&self.path)?;
        // `write_all` could split into several writes on a short write; a single `write` that
        // comes back short is reported instead of finished non-atomically.
        let written = file.write(buf.as_bytes())?;
        if written != buf.len() {
            return Err(std::io::Error::other(format!(
                "short write to the mirror: {written} of {} bytes",
                buf.len()
            )));
        }
        Ok(())
    }
}

/// One event as a mirror line's JSON object.
pub(crate) fn event_line(e: &Event) -> Value {
    json!({
        "id": e.id,
        "ts": e.ts.to_rfc3339_opts(SecondsFormat::Millis, true),
        "event_type": e.event_type,
        "plan_id": e.plan_id,
        "task_id": e.task_id,
        "worker_id": e.worker_id,
        "epoch": e.epoch,
        "from": e.from_status.map(|s| s.as_str()),
        "to": e.to_status.map(|s| s.as_str()),
        "payload": e.payload,
    })
}

/// All events as newline-terminated JSON lines.
pub(crate) fn render_lines(events: &[Event]) -> String {
    let mut buf = String::new();
    for e in events {
        buf.push_str(&event_line(e).to_string());
        buf.push('\n');
    }
    buf
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::domain::Status;
    use chrono::{TimeZone, Utc};

    fn ev(id: i64) -> Event {
        Event {
            id,
            ts: Utc
                .timestamp_millis_opt(1_700_000_000_123)
                .single()
                .unwrap_or_default(),
            event_type: "task.claimed".into(),
            plan_id: Some("p".into()),
            task_id: Some("T-1".into()),
            worker_id: Some("w".into()),
            epoch: Some(3),
            from_status: Some(Status::Pending),
            to_status: Some(Status::Claimed),
            payload: json!({"k": "line\nbreak"}),
        }
    }

    #[test]
    fn one_line_per_event_with_the_documented_keys() {
        let text = render_lines(&[ev(1), ev(2)]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        let v: Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(v["id"], 1);
        assert_eq!(v["ts"], "2023-11-14T22:13:20.123Z");
        assert_eq!(v["from"], "PENDING");
        assert_eq!(v["to"], "CLAIMED");
        assert_eq!(v["epoch"], 3);
        assert_eq!(v["payload"]["k"], "line\nbreak");
    }

    #[test]
    fn appends_to_a_new_file_in_a_new_dir() {
        let dir = tempfile::tempdir().unwrap();
        let m = JsonlMirror::new(dir.path().join("sub/events.jsonl"));
        m.try_append(&[ev(1)]).unwrap();
        m.try_append(&[]).unwrap();
        m.try_append(&[ev(2), ev(3)]).unwrap();
        let text = std::fs::read_to_string(&m.path).unwrap();
        assert_eq!(text.lines().count(), 3);
    }
}
