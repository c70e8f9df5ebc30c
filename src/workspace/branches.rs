//! Task branches as `whilly doctor` sees them: which exist, and whether their work is already on
//! the base branch (then deleting one loses nothing).

use git2::{BranchType, ErrorCode};

use super::Workspaces;
use super::error::WorkspaceError;

/// Every local branch whilly made (`whilly/…`), by short name.
pub(super) fn task_branches(ws: &Workspaces) -> Result<Vec<String>, WorkspaceError> {
    let repo = ws.open()?;
    let branches = repo
        .branches(Some(BranchType::Local))
        .map_err(WorkspaceError::git("list branches"))?;
    let mut out = Vec::new();
    for (b, _) in branches.flatten() {
        if let Ok(Some(name)) = b.name()
            && name.starts_with("whilly/")
        {
            out.push(name.to_string());
        }
    }
    out.sort();
    Ok(out)
}

/// Whether every commit of `branch` is on the base (the checked-out branch's tip): `None` when
/// there is no such branch.
pub(super) fn landed(ws: &Workspaces, branch: &str) -> Result<Option<bool>, WorkspaceError> {
    let repo = ws.open()?;
    let tip = match repo.find_branch(branch, BranchType::Local) {
        Ok(b) => b.get().peel_to_commit().map(|c| c.id()),
        Err(e) if e.code() == ErrorCode::NotFound => return Ok(None),
        Err(e) => return Err(WorkspaceError::git(format!("find branch {branch}"))(e)),
    }
    .map_err(WorkspaceError::git(format!("read branch {branch}")))?;
    let base = ws.base_commit()?;
    let base = git2::Oid::from_str(&base).map_err(WorkspaceError::git("read the base commit"))?;
    if base == tip {
        return Ok(Some(true));
    }
    let on_base = repo
        .graph_descendant_of(base, tip)
        .map_err(WorkspaceError::git(format!(
            "compare {branch} with the base"
        )))?;
    Ok(Some(on_base))
}

/// Deletes a local branch; a missing one is not an error.
pub(super) fn delete(ws: &Workspaces, branch: &str) -> Result<(), WorkspaceError> {
    super::cleanup::delete_branch(&ws.open()?, branch)
}
