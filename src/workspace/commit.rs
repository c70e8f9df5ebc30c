//! Committing the agent's work on the task branch.

use std::path::Path;

use git2::{IndexAddOption, Repository, Signature};

use super::error::WorkspaceError;
use super::{Workspaces, Worktree, meta};

pub(super) fn commit(
    ws: &Workspaces,
    wt: &Worktree,
    message: &str,
    allow_empty: bool,
) -> Result<Option<String>, WorkspaceError> {
    let repo = Repository::open(&wt.path).map_err(WorkspaceError::git(format!(
        "open worktree {}",
        wt.path.display()
    )))?;
    let head = repo
        .head()
        .and_then(|h| h.peel_to_commit())
        .map_err(WorkspaceError::git(format!(
            "read HEAD of {}",
            wt.path.display()
        )))?;
    let head_tree = head
        .tree()
        .map_err(WorkspaceError::git("read HEAD's tree"))?;
    let mut index = repo
        .index()
        .map_err(WorkspaceError::git("read the worktree's index"))?;
    let all = std::iter::empty::<&str>();
    // add_all picks up new and modified files and honours .gitignore; update_all stages deletions.
    index
        .add_all(all.clone(), IndexAddOption::DEFAULT, None)
        .map_err(WorkspaceError::git("stage the agent's changes"))?;
    index
        .update_all(all, None)
        .map_err(WorkspaceError::git("stage deleted files"))?;
    let admin = meta::admin_dir(&ws.common_dir, &wt.name);
    for rel in meta::read_included(&admin) {
        // Include files (secrets like .env) are copies from the main tree, never task output.
        if head_tree.get_path(Path::new(&rel)).is_err() {
            let _ = index.remove_path(Path::new(&rel));
        }
    }
    index
        .write()
        .map_err(WorkspaceError::git("write the worktree's index"))?;
    let tree_id = index
        .write_tree()
        .map_err(WorkspaceError::git("write the commit's tree"))?;
    if tree_id == head_tree.id() && !allow_empty {
        return Ok(None);
    }
    let tree = repo
        .find_tree(tree_id)
        .map_err(WorkspaceError::git("find the new tree"))?;
    let sig = signature(&repo)?;
    let oid = repo
        .commit(Some("HEAD"), &sig, &sig, message, &tree, &[&head])
        .map_err(WorkspaceError::git(format!("commit on {}", wt.branch)))?;
    Ok(Some(oid.to_string()))
}

/// The repository's configured identity, or Whilly's own when none is set.
pub(super) fn signature(repo: &Repository) -> Result<Signature<'static>, WorkspaceError> {
    repo.signature()
        .or_else(|_| Signature::now("Whilly", "whilly@localhost"))
        .map_err(WorkspaceError::git("make a commit signature"))
}
