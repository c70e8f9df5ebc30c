//! Removing, listing and pruning whilly's worktrees.

use std::collections::{BTreeSet, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use git2::{BranchType, ErrorCode, Repository, WorktreePruneOptions};

use super::error::WorkspaceError;
use super::{Workspaces, layout, lock, meta};

/// One whilly worktree (or a stray directory where one used to be).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorktreeInfo {
    /// Admin entry name under `.git/worktrees/`; empty for a stray directory.
    pub name: String,
    pub path: PathBuf,
    pub branch: Option<String>,
    pub plan_id: Option<String>,
    pub task_id: Option<String>,
    /// Bytes on disk of the worktree directory (0 when it is gone).
    pub size_bytes: u64,
    /// What `git worktree prune` would remove: the directory is gone and it is not locked.
    pub prunable: bool,
    /// Known to git (has an admin entry); false for a stray directory.
    pub registered: bool,
    pub locked: bool,
    /// An idle worktree of the pool, waiting for the next task (see `workspace::pool`).
    pub pooled: bool,
}

/// Which worktrees [`Workspaces::prune`] removes, besides stale and stray ones, which always go.
pub enum PruneSelection<'a> {
    /// Every whilly worktree of the repository.
    All,
    /// Those for which the predicate says the task is finished.
    Finished(&'a dyn Fn(&WorktreeInfo) -> bool),
    /// All but those whose task id is in the set.
    KeepTasks(&'a HashSet<String>),
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PruneReport {
    pub removed: Vec<WorktreeInfo>,
    pub kept: Vec<WorktreeInfo>,
    /// Admin entries dropped by the `git worktree prune` step (any worktree of the repository).
    pub pruned_entries: Vec<String>,
}

pub(super) fn remove(
    ws: &Workspaces,
    name: &str,
    path: &Path,
    branch: &str,
    delete_branch: bool,
) -> Result<(), WorkspaceError> {
    let repo = ws.open()?;
    let _guard = lock::admin(&ws.common_dir, ws.cfg.merge_lock_timeout)?;
    remove_locked(ws, &repo, name, path)?;
    if delete_branch {
        self::delete_branch(&repo, branch)?;
    }
    Ok(())
}

/// Deletes a local branch; a missing one is fine.
pub(super) fn delete_branch(repo: &Repository, branch: &str) -> Result<(), WorkspaceError> {
    match repo.find_branch(branch, BranchType::Local) {
        Ok(mut b) => b
            .delete()
            .map_err(WorkspaceError::git(format!("delete branch {branch}"))),
        Err(e) if e.code() == ErrorCode::NotFound => Ok(()),
        Err(e) => Err(WorkspaceError::git(format!("find branch {branch}"))(e)),
    }
}

pub(super) fn remove_locked(
    ws: &Workspaces,
    repo: &Repository,
    name: &str,
    path: &Path,
) -> Result<(), WorkspaceError> {
    if fs::symlink_metadata(path).is_ok() {
        remove_dir(path)?;
    }
    if !name.is_empty() {
        if let Ok(wt) = repo.find_worktree(name) {
            let mut opts = WorktreePruneOptions::new();
            opts.valid(true).locked(true).working_tree(false);
            wt.prune(Some(&mut opts))
                .map_err(WorkspaceError::git(format!("drop worktree entry {name}")))?;
        }
        let admin = meta::admin_dir(&ws.common_dir, name);
        if admin.exists() {
            remove_dir(&admin)?;
        }
    }
    // Tidy the now-empty plan and repository directories; a non-empty one simply stays.
    let mut dir = path.parent();
    while let Some(d) = dir {
        if !layout::is_within(d, &ws.base_dir) || fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
    Ok(())
}

/// `remove_dir_all` that also copes with read-only directories (Go's module cache makes them).
pub(super) fn remove_dir(path: &Path) -> Result<(), WorkspaceError> {
    let md = match fs::symlink_metadata(path) {
        Ok(md) => md,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(WorkspaceError::io("could not read", path)(e)),
    };
    if !md.is_dir() {
        return fs::remove_file(path).map_err(WorkspaceError::io("could not remove", path));
    }
    match fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            make_writable(path);
            fs::remove_dir_all(path).map_err(WorkspaceError::io("could not remove", path))
        }
        Err(e) => Err(WorkspaceError::io("could not remove", path)(e)),
    }
}

#[cfg(unix)]
fn make_writable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(md) = fs::symlink_metadata(dir) else {
        return;
    };
    if !md.is_dir() {
        return;
    }
    let mode = md.permissions().mode();
    // Best effort: if it fails, the removal after it fails and says why.
    let _ = fs::set_permissions(dir, fs::Permissions::from_mode(mode | 0o700));
    if let Ok(rd) = fs::read_dir(dir) {
        for entry in rd.flatten() {
            make_writable(&entry.path());
        }
    }
}

#[cfg(not(unix))]
fn make_writable(_dir: &Path) {}

/// Bytes on disk under `path`, not following symlinks.
pub(super) fn dir_size(path: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![path.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(md) = fs::symlink_metadata(&p) else {
            continue;
        };
        total += on_disk(&md);
        if md.is_dir()
            && let Ok(rd) = fs::read_dir(&p)
        {
            stack.extend(rd.flatten().map(|e| e.path()));
        }
    }
    total
}

#[cfg(unix)]
fn on_disk(md: &fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    md.blocks() * 512
}

#[cfg(not(unix))]
fn on_disk(md: &fs::Metadata) -> u64 {
    md.len()
}

pub(super) fn list(ws: &Workspaces) -> Result<Vec<WorktreeInfo>, WorkspaceError> {
    let repo = ws.open()?;
    let names = repo
        .worktrees()
        .map_err(WorkspaceError::git("list worktrees"))?;
    let mut out = Vec::new();
    let mut known = BTreeSet::new();
    for name in names.iter().filter_map(|n| n.ok().flatten()) {
        let admin = meta::admin_dir(&ws.common_dir, name);
        let m = meta::read(&admin);
        if m.is_none() && !name.starts_with(layout::ADMIN_PREFIX) {
            continue;
        }
        let wt = repo.find_worktree(name).ok();
        let path = wt
            .as_ref()
            .map(|w| w.path().to_path_buf())
            .or_else(|| m.as_ref().map(|m| m.path.clone()))
            .unwrap_or_default();
        let exists = path.is_dir();
        let locked = wt
            .as_ref()
            .and_then(|w| w.is_locked().ok())
            .is_some_and(|l| !matches!(l, git2::WorktreeLockStatus::Unlocked));
        let prunable = wt
            .as_ref()
            .and_then(|w| w.is_prunable(None).ok())
            .unwrap_or(!exists);
        let branch = m
            .as_ref()
            .map(|m| m.branch.clone())
            .or_else(|| head_branch(&admin));
        known.insert(path.canonicalize().unwrap_or_else(|_| path.clone()));
        out.push(WorktreeInfo {
            name: name.to_string(),
            size_bytes: if exists { dir_size(&path) } else { 0 },
            path,
            branch,
            plan_id: m.as_ref().map(|m| m.plan_id.clone()),
            task_id: m.as_ref().map(|m| m.task_id.clone()),
            prunable,
            registered: true,
            locked,
            pooled: name.starts_with(layout::POOL_ADMIN_PREFIX),
        });
    }
    // Directories in our layout (<repo dir>/<plan>/<task>) that git does not know: crash debris.
    for plan_dir in subdirs(&ws.repo_dir) {
        for task_dir in subdirs(&plan_dir) {
            let canon = task_dir.canonicalize().unwrap_or_else(|_| task_dir.clone());
            if known.contains(&canon) {
                continue;
            }
            out.push(WorktreeInfo {
                name: String::new(),
                size_bytes: dir_size(&task_dir),
                path: task_dir,
                branch: None,
                plan_id: None,
                task_id: None,
                prunable: true,
                registered: false,
                locked: false,
                pooled: false,
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect()
}

fn head_branch(admin: &Path) -> Option<String> {
    let head = fs::read_to_string(admin.join("HEAD")).ok()?;
    head.trim()
        .strip_prefix("ref: refs/heads/")
        .map(str::to_string)
}

pub(super) fn prune(
    ws: &Workspaces,
    which: PruneSelection<'_>,
    delete_branches: bool,
) -> Result<PruneReport, WorkspaceError> {
    let infos = list(ws)?;
    let repo = ws.open()?;
    let mut report = PruneReport::default();
    {
        let _guard = lock::admin(&ws.common_dir, ws.cfg.merge_lock_timeout)?;
        for info in infos {
            // A worktree locked with `git worktree lock` is kept whatever the selection.
            let selected = !info.locked
                && (!info.registered
                    || info.prunable
                    || match &which {
                        PruneSelection::All => true,
                        PruneSelection::Finished(done) => done(&info),
                        PruneSelection::KeepTasks(keep) => {
                            !info.task_id.as_ref().is_some_and(|t| keep.contains(t))
                        }
                    });
            if !selected {
                report.kept.push(info);
                continue;
            }
            remove_locked(ws, &repo, &info.name, &info.path)?;
            if delete_branches
                && let Some(branch) = &info.branch
                && branch.starts_with("whilly/")
                && let Ok(mut b) = repo.find_branch(branch, BranchType::Local)
            {
                b.delete()
                    .map_err(WorkspaceError::git(format!("delete branch {branch}")))?;
            }
            report.removed.push(info);
        }
        // The `git worktree prune` step: stale entries of any worktree, whilly's or not.
        let names = repo
            .worktrees()
            .map_err(WorkspaceError::git("list worktrees"))?;
        for name in names.iter().filter_map(|n| n.ok().flatten()) {
            let Ok(wt) = repo.find_worktree(name) else {
                continue;
            };
            if wt.is_prunable(None).unwrap_or(false) {
                wt.prune(None)
                    .map_err(WorkspaceError::git(format!("prune worktree entry {name}")))?;
                report.pruned_entries.push(name.to_string());
            }
        }
    }
    Ok(report)
}
