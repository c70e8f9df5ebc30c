//! The worktree pool: a finished task's worktree is kept and handed to a later task of the same
//! repository, so a task costs a reset of the files that differ instead of a checkout of the
//! whole tree, and its checks find the build outputs of the task before.
//!
//! How it holds together:
//! - Pooled worktrees live at `<repo dir>/.pool/<n>` (a `safe_id` never holds a dot, so no plan
//!   directory can take that name) and never move: virtualenvs and build caches record absolute
//!   paths.
//! - While a task uses one, its admin entry (`.git/worktrees/<name>`) has the task's name, so
//!   everything else (retries, `find`, the agent note, delivery) works as for a per-task
//!   worktree. Released, the entry is renamed `whilly-pool-<n>` and HEAD detached, so the task's
//!   branch is free. Renaming an entry is what `git worktree move` does to a path: the
//!   worktree's `.git` file is rewritten to name the entry.
//! - Handing one out resets it fully (index, tracked files, untracked files, ignored files but
//!   the build caches, every per-worktree state file: reflog, `config.worktree`, an operation in
//!   progress). The state it was released in is never trusted: a crash between any two steps
//!   leaves an entry whose `.git` file and admin entry disagree, and such an entry is dropped.
//! - All of it runs under the admin lock, which other processes respect too.
//! - `git stash` in a worktree writes the repository's one `refs/stash`: entries an agent made
//!   are dropped when its task releases the worktree (and named in the log, to restore one).

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use git2::Repository;
use serde::{Deserialize, Serialize};

use super::error::WorkspaceError;
use super::layout::{POOL_ADMIN_PREFIX, POOL_DIR};
use super::{Workspaces, Worktree, cleanup, meta, occupant};

const POOL_META: &str = "whilly-pool.json";
/// The files of an admin entry a reused worktree keeps: the rest is per-task state.
const ADMIN_KEEP: &[&str] = &["gitdir", "commondir", "HEAD", "index", POOL_META];

#[derive(Debug, Serialize, Deserialize)]
struct PoolMeta {
    released_at: String,
    last_plan: String,
    last_task: String,
}

/// An idle pooled worktree.
#[derive(Debug)]
pub(super) struct Idle {
    pub admin: PathBuf,
    pub path: PathBuf,
    released_at: String,
}

pub(super) fn pool_dir(ws: &Workspaces) -> PathBuf {
    ws.repo_dir.join(POOL_DIR)
}

/// Whether `path` is one of the pool's worktree directories.
pub(super) fn is_slot(ws: &Workspaces, path: &Path) -> bool {
    let dir = pool_dir(ws);
    path.parent().is_some_and(|p| same(p, &dir))
}

/// Whether two paths name the same place (resolving symlinks where they exist).
pub(super) fn same(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// The admin entry a worktree's `.git` file names, if it is a readable gitfile.
pub(super) fn gitfile_target(worktree: &Path) -> Option<PathBuf> {
    let text = fs::read_to_string(worktree.join(".git")).ok()?;
    let target = text.trim().strip_prefix("gitdir:")?.trim();
    let target = PathBuf::from(target);
    Some(if target.is_absolute() {
        target
    } else {
        worktree.join(target)
    })
}

/// Whether `worktree`'s `.git` file names the admin entry `admin`.
pub(super) fn points_to(worktree: &Path, admin: &Path) -> bool {
    gitfile_target(worktree).is_some_and(|t| same(&t, admin))
}

fn write_gitfile(worktree: &Path, admin: &Path) -> Result<(), WorkspaceError> {
    let file = worktree.join(".git");
    let tmp = worktree.join(".git.whilly-tmp");
    fs::write(&tmp, format!("gitdir: {}\n", admin.display()))
        .map_err(WorkspaceError::io("could not write", &tmp))?;
    fs::rename(&tmp, &file).map_err(WorkspaceError::io("could not replace", &file))
}

/// The worktree directory an admin entry's `gitdir` file names.
fn entry_path(admin: &Path) -> Option<PathBuf> {
    let text = fs::read_to_string(admin.join("gitdir")).ok()?;
    let git = PathBuf::from(text.trim());
    git.parent().map(Path::to_path_buf)
}

fn entries(ws: &Workspaces) -> Vec<(String, PathBuf)> {
    let dir = ws.common_dir.join("worktrees");
    let Ok(rd) = fs::read_dir(&dir) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| Some((e.file_name().into_string().ok()?, e.path())))
        .collect()
}

/// The idle pooled worktrees, most recently released first.
pub(super) fn idle(ws: &Workspaces) -> Vec<Idle> {
    let mut out: Vec<Idle> = entries(ws)
        .into_iter()
        .filter(|(name, _)| name.starts_with(POOL_ADMIN_PREFIX))
        .map(|(_, admin)| {
            let released_at = fs::read_to_string(admin.join(POOL_META))
                .ok()
                .and_then(|t| serde_json::from_str::<PoolMeta>(&t).ok())
                .map(|m| m.released_at)
                .unwrap_or_default();
            Idle {
                path: entry_path(&admin).unwrap_or_default(),
                admin,
                released_at,
            }
        })
        .collect();
    out.sort_by(|a, b| b.released_at.cmp(&a.released_at));
    out
}

/// A new pooled worktree's directory: the lowest number no directory and no admin entry uses.
/// Called under the admin lock.
pub(super) fn new_slot(ws: &Workspaces) -> PathBuf {
    let dir = pool_dir(ws);
    let taken: HashSet<PathBuf> = entries(ws)
        .iter()
        .filter_map(|(_, admin)| entry_path(admin))
        .collect();
    (1u32..)
        .map(|n| dir.join(n.to_string()))
        .find(|p| fs::symlink_metadata(p).is_err() && !taken.contains(p))
        .unwrap_or_else(|| dir.join("0"))
}

/// Whether an idle entry can be handed out as it is: its directory is in the pool, its `.git`
/// file names it, and git opens it.
fn consistent(ws: &Workspaces, idle: &Idle) -> bool {
    is_slot(ws, &idle.path)
        && idle.path.is_dir()
        && points_to(&idle.path, &idle.admin)
        && Repository::open(&idle.path).is_ok()
}

/// Removes an idle entry and its directory (only a pool directory is ever removed).
fn drop_idle(ws: &Workspaces, idle: &Idle) -> Result<(), WorkspaceError> {
    tracing::warn!(
        worktree = %idle.path.display(),
        "dropping a pooled worktree in an unknown state"
    );
    // Its directory goes unless another entry owns it (names it, and is named by it).
    let other = gitfile_target(&idle.path)
        .filter(|t| !same(t, &idle.admin) && entry_path(t).is_some_and(|p| same(&p, &idle.path)));
    if is_slot(ws, &idle.path) && other.is_none() {
        cleanup::remove_dir(&idle.path)?;
    }
    cleanup::remove_dir(&idle.admin)
}

/// Hands an idle pooled worktree to the task whose admin entry will be `name` (which must not
/// exist): renames the entry and clears its per-task state. The caller resets the files. `None`
/// when the pool holds none that is usable. Called under the admin lock.
pub(super) fn take(ws: &Workspaces, name: &str) -> Result<Option<PathBuf>, WorkspaceError> {
    let target = meta::admin_dir(&ws.common_dir, name);
    if fs::symlink_metadata(&target).is_ok() {
        return Ok(None);
    }
    for idle in idle(ws) {
        if !consistent(ws, &idle) {
            drop_idle(ws, &idle)?;
            continue;
        }
        // A process the last agent left behind still works there: not this one.
        if occupant::present(&idle.admin, &idle.path) {
            continue;
        }
        clear_state(&idle.admin)?;
        cleanup::remove_dir(&idle.admin.join(POOL_META))?;
        write_gitfile(&idle.path, &target)?;
        fs::rename(&idle.admin, &target)
            .map_err(WorkspaceError::io("could not rename", &idle.admin))?;
        return Ok(Some(idle.path));
    }
    Ok(None)
}

/// Removes every file of an admin entry but what a reused worktree needs: the reflog, an
/// operation in progress, `config.worktree`, per-worktree refs, a lock, whilly's notes.
fn clear_state(admin: &Path) -> Result<(), WorkspaceError> {
    let rd = fs::read_dir(admin).map_err(WorkspaceError::io("could not read", admin))?;
    for entry in rd.flatten() {
        let name = entry.file_name();
        if ADMIN_KEEP.iter().any(|k| name == *k) {
            continue;
        }
        cleanup::remove_dir(&entry.path())?;
    }
    Ok(())
}

/// Puts the finished task's worktree `wt` in the pool when it is a pool directory, the pool has
/// room and the disk budget allows; `Ok(false)`: it should be removed instead. Called under the
/// admin lock, after the task's work was committed (or abandoned).
pub(super) fn put(ws: &Workspaces, wt: &Worktree) -> Result<bool, WorkspaceError> {
    if ws.cfg.pool == 0 || !is_slot(ws, &wt.path) || !wt.path.is_dir() {
        return Ok(false);
    }
    let admin = meta::admin_dir(&ws.common_dir, &wt.name);
    if !points_to(&wt.path, &admin) || occupant::present(&admin, &wt.path) {
        return Ok(false);
    }
    if idle(ws).len() >= ws.cfg.pool {
        return Ok(false);
    }
    if let Some(max) = ws.cfg.max_disk
        && cleanup::dir_size(&ws.repo_dir) > max
    {
        tracing::info!(
            "worktrees over [worktrees] max_disk: not pooling {}",
            wt.path.display()
        );
        return Ok(false);
    }
    let Some(slot) = wt
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
    else {
        return Ok(false);
    };
    // Detached, so the task's branch is free to be deleted or checked out elsewhere.
    let wt_repo = Repository::open(&wt.path).map_err(WorkspaceError::git(format!(
        "open worktree {}",
        wt.path.display()
    )))?;
    let head = wt_repo
        .head()
        .and_then(|h| h.peel_to_commit().map(|c| c.id()))
        .map_err(WorkspaceError::git("read the worktree's HEAD"))?;
    wt_repo
        .set_head_detached(head)
        .map_err(WorkspaceError::git("detach the worktree's HEAD"))?;
    let pooled = meta::admin_dir(&ws.common_dir, &format!("{POOL_ADMIN_PREFIX}{slot}"));
    if fs::symlink_metadata(&pooled).is_ok() {
        cleanup::remove_dir(&pooled)?;
    }
    let note = PoolMeta {
        released_at: chrono::Utc::now().to_rfc3339(),
        last_plan: wt.plan_id.clone(),
        last_task: wt.task_id.clone(),
    };
    clear_state(&admin)?;
    let note_path = admin.join(POOL_META);
    fs::write(&note_path, serde_json::to_vec(&note).unwrap_or_default())
        .map_err(WorkspaceError::io("could not write", &note_path))?;
    write_gitfile(&wt.path, &pooled)?;
    fs::rename(&admin, &pooled).map_err(WorkspaceError::io("could not rename", &admin))?;
    Ok(true)
}

/// Done with a finished task's worktree: its stash entries dropped, then the worktree pooled
/// for a later task when [`put`] takes it, else removed; the branch deleted when asked.
pub(super) fn release(
    ws: &Workspaces,
    wt: &Worktree,
    delete_branch: bool,
) -> Result<(), WorkspaceError> {
    let mut repo = ws.open()?;
    let _guard = super::lock::admin(&ws.common_dir, ws.cfg.merge_lock_timeout)?;
    let since = meta::read(&meta::admin_dir(&ws.common_dir, &wt.name))
        .and_then(|m| chrono::DateTime::parse_from_rfc3339(&m.created_at).ok())
        .map_or(i64::MAX, |t| t.timestamp());
    drop_task_stashes(&mut repo, wt, since);
    let pooled = put(ws, wt).unwrap_or_else(|e| {
        tracing::warn!(worktree = %wt.path.display(), "not pooled, removed instead: {e}");
        false
    });
    if !pooled {
        cleanup::remove_locked(ws, &repo, &wt.name, &wt.path)?;
    }
    if delete_branch {
        cleanup::delete_branch(&repo, &wt.branch)?;
    }
    Ok(())
}

/// Drops the stash entries the task's agent made (`git stash` in a worktree writes the
/// repository's one stash): those made on the task's branch, and those on a detached HEAD at
/// or above the task's base since the task started. Each is logged with the command that
/// brings it back.
fn drop_task_stashes(repo: &mut Repository, wt: &Worktree, since: i64) {
    let on_branch = [
        format!("WIP on {}:", wt.branch),
        format!("On {}:", wt.branch),
    ];
    let base = git2::Oid::from_str(&wt.base_commit).ok();
    let base_tip = wt
        .base_branch
        .as_deref()
        .and_then(|b| repo.refname_to_id(&format!("refs/heads/{b}")).ok());
    let mut doomed = Vec::new();
    if let Ok(log) = repo.reflog("refs/stash") {
        for (i, entry) in log.iter().enumerate() {
            let msg = entry.message().ok().flatten().unwrap_or_default();
            let mine = on_branch.iter().any(|p| msg.starts_with(p.as_str()))
                || (msg.contains("(no branch)")
                    && entry.committer().when().seconds() >= since
                    && detached_at_task(repo, entry.id_new(), base, base_tip));
            if mine {
                doomed.push((i, entry.id_new()));
            }
        }
    }
    for (i, oid) in doomed.into_iter().rev() {
        match repo.stash_drop(i) {
            Ok(()) => tracing::warn!(
                task = %wt.task_id,
                "dropped the agent's stash entry {oid} (restore: git stash store {oid})"
            ),
            Err(e) => tracing::warn!(task = %wt.task_id, "dropping stash entry {oid}: {e}"),
        }
    }
}

/// Whether a stash made on a detached HEAD was made on the task's commits: its HEAD is the
/// task's base, or above it and not on the base branch.
fn detached_at_task(
    repo: &Repository,
    stash: git2::Oid,
    base: Option<git2::Oid>,
    base_tip: Option<git2::Oid>,
) -> bool {
    let (Some(base), Ok(commit)) = (base, repo.find_commit(stash)) else {
        return false;
    };
    let Ok(head) = commit.parent_id(0) else {
        return false;
    };
    if head == base {
        return true;
    }
    let above = repo.graph_descendant_of(head, base).unwrap_or(false);
    let on_base = base_tip
        .is_some_and(|tip| tip == head || repo.graph_descendant_of(tip, head).unwrap_or(false));
    above && !on_base
}
