//! What whilly records about its worktrees, in the worktree's admin dir (`.git/worktrees/<name>/`),
//! so `list` and `prune` know the real plan and task ids (safe ids are lossy) and which files
//! were copied in by the include list (they must never be committed).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::WorkspaceError;

const META_FILE: &str = "whilly.json";
const INCLUDED_FILE: &str = "whilly-included";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Meta {
    pub plan_id: String,
    pub task_id: String,
    pub branch: String,
    pub base_commit: String,
    pub base_branch: Option<String>,
    pub path: PathBuf,
    pub created_at: String,
}

pub(super) fn admin_dir(common_dir: &Path, name: &str) -> PathBuf {
    common_dir.join("worktrees").join(name)
}

pub(super) fn write(admin: &Path, meta: &Meta) -> Result<(), WorkspaceError> {
    let path = admin.join(META_FILE);
    let text = serde_json::to_string_pretty(meta).map_err(|e| WorkspaceError::Io {
        what: "could not encode worktree metadata for",
        path: path.clone(),
        source: std::io::Error::other(e),
    })?;
    std::fs::write(&path, text).map_err(WorkspaceError::io("could not write", &path))
}

/// `None` when the entry is not whilly's or its metadata is unreadable.
pub(super) fn read(admin: &Path) -> Option<Meta> {
    let text = std::fs::read_to_string(admin.join(META_FILE)).ok()?;
    serde_json::from_str(&text).ok()
}

pub(super) fn write_included(admin: &Path, files: &[String]) -> Result<(), WorkspaceError> {
    let path = admin.join(INCLUDED_FILE);
    let mut text = files.join("\n");
    text.push('\n');
    std::fs::write(&path, text).map_err(WorkspaceError::io("could not write", &path))
}

pub(super) fn read_included(admin: &Path) -> Vec<String> {
    std::fs::read_to_string(admin.join(INCLUDED_FILE))
        .map(|t| {
            t.lines()
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}
