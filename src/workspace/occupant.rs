//! Which agent last ran in a worktree: its process group, noted when it starts and cleared when
//! it ends. A new attempt (a retry, `--resume` after a crash) waits for that group to be gone
//! before it resets the worktree, so it never starts a second agent where an earlier one still
//! writes (whilly was killed and the agent's guard is still stopping it, say).
//!
//! The note lives in the worktree's admin directory (`.git/worktrees/<name>/whilly-agent.json`).
//! Only this host's processes can be checked; a group counts as the worktree's occupant only
//! while one of its members works inside the worktree, so a recycled process-group id is not
//! mistaken for it.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::error::WorkspaceError;
use crate::procinfo::{cwd_within, group_members};

const FILE: &str = "whilly-agent.json";

#[derive(Debug, Serialize, Deserialize)]
struct Occupant {
    pgid: i32,
    host: String,
}

fn host() -> String {
    hostname::get()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default()
}

pub(super) fn note(admin_dir: &Path, pgid: i32) {
    let body = serde_json::to_vec(&Occupant { pgid, host: host() }).unwrap_or_default();
    if let Err(e) = std::fs::write(admin_dir.join(FILE), body) {
        tracing::warn!("noting the agent of {}: {e}", admin_dir.display());
    }
}

pub(super) fn clear(admin_dir: &Path) {
    match std::fs::remove_file(admin_dir.join(FILE)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            tracing::warn!("clearing the agent note of {}: {e}", admin_dir.display());
        }
        _ => {}
    }
}

/// The earlier agent's processes still working in `worktree`.
fn still_there(admin_dir: &Path, worktree: &Path) -> Option<(i32, Vec<i32>)> {
    let text = std::fs::read_to_string(admin_dir.join(FILE)).ok()?;
    let o: Occupant = serde_json::from_str(&text).ok()?;
    if o.host != host() {
        return None;
    }
    let inside: Vec<i32> = group_members(o.pgid)
        .into_iter()
        .filter(|pid| cwd_within(*pid, worktree))
        .collect();
    (!inside.is_empty()).then_some((o.pgid, inside))
}

/// Whether an agent that ran in `worktree` still has processes working there (a pooled
/// worktree with one is not handed out).
pub(super) fn present(admin_dir: &Path, worktree: &Path) -> bool {
    still_there(admin_dir, worktree).is_some()
}

/// Waits up to `limit` for the earlier agent of this worktree to be gone.
pub(super) fn wait_gone(
    admin_dir: &Path,
    worktree: &Path,
    limit: Duration,
) -> Result<(), WorkspaceError> {
    let started = Instant::now();
    let mut logged = false;
    loop {
        let Some((pgid, pids)) = still_there(admin_dir, worktree) else {
            clear(admin_dir);
            return Ok(());
        };
        if started.elapsed() >= limit {
            return Err(WorkspaceError::StillOccupied {
                path: worktree.to_path_buf(),
                pgid,
                pids,
            });
        }
        if !logged {
            tracing::warn!(
                worktree = %worktree.display(),
                pgid,
                "an earlier agent still runs in the worktree; waiting for it to end"
            );
            logged = true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
