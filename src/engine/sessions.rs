//! The live agent sessions of this process, for whoever watches them (the console's panes,
//! headless evidence). The engine writes; readers only look.

use crate::pty::PtySession;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What an attempt is doing, as the engine knows it (never guessed from the screen).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    Preparing,
    Running,
    WaitingForHuman,
    Verifying,
    Delivering,
    Done,
    Failed,
}

#[derive(Clone)]
pub struct SessionInfo {
    pub task_pk: i64,
    pub plan_id: String,
    pub task_id: String,
    pub agent: String,
    pub attempt: i64,
    pub started: Instant,
    pub state: SessionState,
    /// The agent's terminal, while a process runs (none for a human handoff).
    pub pty: Option<Arc<PtySession>>,
    pub log_path: Option<std::path::PathBuf>,
    /// What the pane should say beyond its state (a handoff whose approved answer then failed
    /// a check says which, and the output's tail).
    pub note: Option<String>,
}

/// Shared map of task pk → session.
#[derive(Clone, Default)]
pub struct SessionRegistry {
    inner: Arc<Mutex<BTreeMap<i64, SessionInfo>>>,
    /// The terminal size the next agent should start with, when a watcher knows it (the console:
    /// the size its next pane will have). An agent that prints before its pane resizes it would
    /// otherwise fill its scrollback with rows of the wrong width.
    spawn_size: Arc<Mutex<Option<crate::pty::TermSize>>>,
    /// Bumped on every change, so a watcher wakes when a session comes, goes or changes state
    /// instead of polling (an idle console costs nothing).
    changes: Arc<tokio::sync::watch::Sender<u64>>,
}

impl SessionRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn upsert(&self, info: SessionInfo) {
        if let Ok(mut m) = self.inner.lock() {
            m.insert(info.task_pk, info);
        }
        self.changed();
    }

    pub fn update(&self, task_pk: i64, f: impl FnOnce(&mut SessionInfo)) {
        if let Ok(mut m) = self.inner.lock()
            && let Some(s) = m.get_mut(&task_pk)
        {
            f(s);
        }
        self.changed();
    }

    pub fn remove(&self, task_pk: i64) -> Option<SessionInfo> {
        let gone = self.inner.lock().ok().and_then(|mut m| m.remove(&task_pk));
        self.changed();
        gone
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Wakes (`changed().await`) after every change to the sessions.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    pub fn snapshot(&self) -> Vec<SessionInfo> {
        self.inner
            .lock()
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    pub fn set_spawn_size(&self, size: crate::pty::TermSize) {
        if let Ok(mut s) = self.spawn_size.lock() {
            *s = Some(size);
        }
    }

    pub fn spawn_size(&self) -> Option<crate::pty::TermSize> {
        self.spawn_size.lock().ok().and_then(|s| *s)
    }

    /// Kills every agent still running (quit, panic): agents are never orphaned.
    pub fn kill_all(&self) {
        for s in self.snapshot() {
            if let Some(pty) = s.pty
                && let Err(e) = pty.kill()
            {
                tracing::warn!(task = %s.task_id, "killing the agent: {e}");
            }
        }
    }
}
