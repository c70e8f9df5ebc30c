//! Creating, or reusing, the worktree of one task.

use std::fs;
use std::path::{Path, PathBuf};

use git2::{
    BranchType, ErrorCode, Oid, Repository, ResetType, StatusOptions, WorktreeAddOptions,
    WorktreePruneOptions, build::CheckoutBuilder,
};

use super::error::WorkspaceError;
use super::{
    Workspaces, Worktree, current_branch, include, layout, lock, meta, occupant, pool, setup,
};

/// How long preparing waits for an earlier agent of the worktree to end. The guard whilly runs
/// agents under stops them within a few seconds of whilly's death.
const OCCUPANT_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

pub(super) fn prepare(
    ws: &Workspaces,
    plan_id: &str,
    task_id: &str,
    base_commit: &str,
) -> Result<Worktree, WorkspaceError> {
    let repo = ws.open()?;
    let base = resolve_commit(&repo, base_commit)?;
    let name = layout::admin_name(plan_id, task_id);
    let branch = layout::branch_name(plan_id, task_id);
    let own_path = layout::worktree_path(&ws.base_dir, &ws.repo_dir_key(), plan_id, task_id);
    let admin = meta::admin_dir(&ws.common_dir, &name);
    let base_branch = current_branch(&ws.open_head_root()?);

    // Never reset a worktree under a running agent: an earlier attempt's agent may still be
    // stopping (its whilly was killed). Waited for outside the lock, which others need.
    if let Some(existing) = repo
        .find_worktree(&name)
        .ok()
        .map(|w| w.path().to_path_buf())
    {
        occupant::wait_gone(&admin, &existing, OCCUPANT_WAIT)?;
    }
    let (path, reused, pooled) = {
        let _guard = lock::admin(&ws.common_dir, ws.cfg.merge_lock_timeout)?;
        if layout::is_within(&ws.base_dir, &ws.root) {
            exclude_from_repo(&ws.common_dir, &ws.root, &ws.base_dir)?;
        }
        // Git's lock files left by a whilly killed mid-write (no agent runs here any more, and
        // this process holds the task's lease and the admin lock): every retry would fail on
        // them. One still open is someone's write in progress and stays.
        for lock in [
            admin.join("index.lock"),
            admin.join("HEAD.lock"),
            ws.common_dir.join(format!("refs/heads/{branch}.lock")),
        ] {
            clear_stale_lock(&lock)?;
        }
        if let Some(existing) = reusable(ws, &repo, &name, &admin, &own_path) {
            reset_existing(&repo, &existing, &branch, base, &Ignored::Keep)?;
            (existing, true, false)
        } else {
            clear_leftovers(ws, &repo, &name, &admin, &own_path)?;
            // A new worktree (fresh or from the pool) checks the branch out: nowhere else may.
            let refname = format!("refs/heads/{branch}");
            if let Some(holder) = checked_out_in(&repo, &refname) {
                return Err(WorkspaceError::BranchCheckedOut {
                    branch: branch.clone(),
                    path: holder,
                });
            }
            if ws.cfg.pool == 0 {
                create(&repo, &name, &own_path, &branch, base)?;
                (own_path, false, false)
            } else {
                from_pool(ws, &repo, &name, &branch, base)?
            }
        }
    };

    let mut wt = Worktree {
        path: path.clone(),
        branch: branch.clone(),
        base_commit: base.to_string(),
        base_branch,
        plan_id: plan_id.to_string(),
        task_id: task_id.to_string(),
        name,
        reused,
        pooled,
        setup_output: None,
        included: Vec::new(),
    };
    meta::write(
        &admin,
        &meta::Meta {
            plan_id: plan_id.to_string(),
            task_id: task_id.to_string(),
            branch: branch.clone(),
            base_commit: wt.base_commit.clone(),
            base_branch: wt.base_branch.clone(),
            path: path.clone(),
            created_at: chrono::Utc::now().to_rfc3339(),
        },
    )?;

    wt.included = copy_includes(ws, &repo, base, &path)?;
    meta::write_included(&admin, &wt.included)?;

    if let Some(cmd) = ws
        .cfg
        .setup_command
        .as_deref()
        .filter(|c| !c.trim().is_empty())
    {
        let path_s = path.to_string_lossy().into_owned();
        let root_s = ws.root.to_string_lossy().into_owned();
        let env = [
            ("WHILLY_PLAN_ID", plan_id),
            ("WHILLY_TASK_ID", task_id),
            ("WHILLY_BRANCH", branch.as_str()),
            ("WHILLY_WORKTREE", path_s.as_str()),
            ("WHILLY_REPO_ROOT", root_s.as_str()),
        ];
        let out = setup::run_setup(cmd, &path, &env, ws.cfg.setup_timeout)?;
        wt.setup_output = Some(out.output);
    }
    Ok(wt)
}

impl Workspaces {
    fn repo_dir_key(&self) -> String {
        self.repo_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

pub(super) fn resolve_commit(repo: &Repository, spec: &str) -> Result<Oid, WorkspaceError> {
    let bad = |reason: String| WorkspaceError::BadBaseCommit {
        commit: spec.to_string(),
        reason,
    };
    let obj = repo
        .revparse_single(spec)
        .map_err(|e| bad(e.message().to_string()))?;
    let commit = obj
        .peel_to_commit()
        .map_err(|e| bad(e.message().to_string()))?;
    Ok(commit.id())
}

/// Removes git's lock file at `lock` when no process holds it open (a crash's leftover).
fn clear_stale_lock(lock: &Path) -> Result<(), WorkspaceError> {
    if fs::symlink_metadata(lock).is_err() || crate::procinfo::held_open(lock) {
        return Ok(());
    }
    tracing::warn!(
        "removing {}, left by a process that ended mid-write",
        lock.display()
    );
    match fs::remove_file(lock) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(WorkspaceError::io("could not remove", lock)(e))
        }
        _ => Ok(()),
    }
}

/// The task's own worktree from an earlier attempt, when it is safe to reuse: registered and
/// valid, at its place in the layout or in the pool, and its `.git` file names its entry.
fn reusable(
    ws: &Workspaces,
    repo: &Repository,
    name: &str,
    admin: &Path,
    own_path: &Path,
) -> Option<PathBuf> {
    let wt = repo.find_worktree(name).ok()?;
    let path = wt.path().to_path_buf();
    let placed = pool::same(&path, own_path) || pool::is_slot(ws, &path);
    (wt.validate().is_ok()
        && placed
        && pool::points_to(&path, admin)
        && Repository::open(&path).is_ok())
    .then_some(path)
}

/// A worktree for a task that has none: an idle one from the pool, reset to the task's
/// branch, or a new one in the pool's directory. Under the admin lock.
fn from_pool(
    ws: &Workspaces,
    repo: &Repository,
    name: &str,
    branch: &str,
    base: Oid,
) -> Result<(PathBuf, bool, bool), WorkspaceError> {
    if let Some(path) = pool::take(ws, name)? {
        let ignored = if ws.cfg.keep_build_cache {
            Ignored::KeepCaches(&ws.cfg.cache_dirs)
        } else {
            Ignored::Remove
        };
        match reset_existing(repo, &path, branch, base, &ignored) {
            Ok(()) => return Ok((path, false, true)),
            Err(e) => {
                // Never handed out half-reset: dropped, and a fresh one made.
                tracing::warn!(worktree = %path.display(), "resetting a pooled worktree: {e}; dropping it");
                super::cleanup::remove_locked(ws, repo, name, &path)?;
            }
        }
    }
    let path = pool::new_slot(ws);
    create(repo, name, &path, branch, base)?;
    Ok((path, false, false))
}

/// Removes whatever a crash or a moved base directory left for this task: a stale admin entry
/// (and the directory it points at, which is whilly's own) and a stray directory at `path`.
fn clear_leftovers(
    ws: &Workspaces,
    repo: &Repository,
    name: &str,
    admin: &Path,
    path: &Path,
) -> Result<(), WorkspaceError> {
    if let Ok(wt) = repo.find_worktree(name) {
        let old = wt.path().to_path_buf();
        // Whilly's own directory, unless it now belongs to another entry (a pool directory
        // handed to another task after this one's was lost).
        let ours = meta::read(admin).is_some() || pool::is_slot(ws, &old);
        let claimed = pool::gitfile_target(&old).is_some_and(|_| !pool::points_to(&old, admin));
        if old != path && ours && !claimed && old.exists() {
            super::cleanup::remove_dir(&old)?;
        }
        let mut opts = WorktreePruneOptions::new();
        opts.valid(true).locked(true).working_tree(false);
        wt.prune(Some(&mut opts))
            .map_err(WorkspaceError::git(format!(
                "prune stale worktree entry {name}"
            )))?;
    }
    if admin.exists() {
        super::cleanup::remove_dir(admin)?;
    }
    if fs::symlink_metadata(path).is_ok() {
        super::cleanup::remove_dir(path)?;
    }
    Ok(())
}

/// The commit the task branch should start at: its tip when it still builds on `base` (work of
/// an earlier attempt), else `base`, after saving the old tip under a `-stale-` name.
fn branch_start(repo: &Repository, branch: &str, base: Oid) -> Result<Oid, WorkspaceError> {
    let refname = format!("refs/heads/{branch}");
    let tip = match repo.find_branch(branch, BranchType::Local) {
        Ok(b) => b.get().target(),
        Err(e) if e.code() == ErrorCode::NotFound => None,
        Err(e) => return Err(WorkspaceError::git(format!("look up branch {branch}"))(e)),
    };
    match tip {
        Some(tip)
            if tip == base
                || repo
                    .graph_descendant_of(tip, base)
                    .map_err(WorkspaceError::git("compare the task branch with its base"))? =>
        {
            Ok(tip)
        }
        Some(tip) => {
            let short = &tip.to_string()[..8];
            repo.reference(
                &format!("{refname}-stale-{short}"),
                tip,
                true,
                "whilly: keep the previous attempt's branch before restarting it",
            )
            .map_err(WorkspaceError::git(format!("back up branch {branch}")))?;
            repo.reference(&refname, base, true, "whilly: restart task branch at base")
                .map_err(WorkspaceError::git(format!("reset branch {branch}")))?;
            Ok(base)
        }
        None => {
            let commit = repo
                .find_commit(base)
                .map_err(WorkspaceError::git("find the base commit"))?;
            repo.branch(branch, &commit, false)
                .map_err(WorkspaceError::git(format!("create branch {branch}")))?;
            Ok(base)
        }
    }
}

/// A new worktree at `path` on `branch` (which the caller made sure no working tree has
/// checked out).
fn create(
    repo: &Repository,
    name: &str,
    path: &Path,
    branch: &str,
    base: Oid,
) -> Result<(), WorkspaceError> {
    let refname = format!("refs/heads/{branch}");
    branch_start(repo, branch, base)?;
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(WorkspaceError::io("could not create", parent))?;
    }
    let reference = repo
        .find_reference(&refname)
        .map_err(WorkspaceError::git(format!("find branch {branch}")))?;
    let mut opts = WorktreeAddOptions::new();
    opts.reference(Some(&reference));
    if let Err(e) = repo.worktree(name, path, Some(&opts)) {
        // Leave nothing half-made behind: the next attempt starts clean either way.
        let admin = repo.commondir().join("worktrees").join(name);
        for dir in [&admin, path] {
            if let Err(e) = super::cleanup::remove_dir(dir) {
                tracing::warn!("removing the half-made worktree {}: {e}", dir.display());
            }
        }
        return Err(WorkspaceError::git(format!(
            "create worktree {}",
            path.display()
        ))(e));
    }
    Ok(())
}

/// The working directory (main or linked) that has `refname` checked out, if any.
pub(super) fn checked_out_in(repo: &Repository, refname: &str) -> Option<PathBuf> {
    let head_is = |r: &Repository| {
        r.find_reference("HEAD")
            .ok()
            .and_then(|h| h.symbolic_target().ok().flatten().map(|t| t == refname))
            .unwrap_or(false)
    };
    if !repo.is_bare() && head_is(repo) {
        return repo.workdir().map(Path::to_path_buf);
    }
    let names = repo.worktrees().ok()?;
    for name in names.iter().filter_map(|n| n.ok().flatten()) {
        let Ok(wt) = repo.find_worktree(name) else {
            continue;
        };
        if wt.validate().is_err() {
            continue;
        }
        if let Ok(r) = Repository::open_from_worktree(&wt)
            && head_is(&r)
        {
            return Some(wt.path().to_path_buf());
        }
    }
    None
}

/// What resetting a worktree does with ignored files.
enum Ignored<'a> {
    /// All stay (a retry of the same task keeps its build outputs).
    Keep,
    /// Those under a directory of one of these names stay; the rest go (a pooled worktree).
    KeepCaches(&'a [String]),
    /// All go.
    Remove,
}

impl Ignored<'_> {
    fn removes(&self, rel: &str) -> bool {
        match self {
            Ignored::Keep => false,
            Ignored::Remove => true,
            Ignored::KeepCaches(names) => !rel
                .trim_end_matches('/')
                .split('/')
                .any(|part| names.iter().any(|n| n == part)),
        }
    }
}

/// Brings a reused worktree back to a clean checkout of its branch: uncommitted changes and
/// untracked files go, ignored files as `ignored` says.
fn reset_existing(
    repo: &Repository,
    path: &Path,
    branch: &str,
    base: Oid,
    ignored: &Ignored<'_>,
) -> Result<(), WorkspaceError> {
    let start = branch_start(repo, branch, base)?;
    let wt_repo = Repository::open(path).map_err(WorkspaceError::git(format!(
        "open worktree {}",
        path.display()
    )))?;
    let refname = format!("refs/heads/{branch}");
    wt_repo
        .set_head(&refname)
        .map_err(WorkspaceError::git(format!(
            "check out {branch} in {}",
            path.display()
        )))?;
    let commit = wt_repo
        .find_commit(start)
        .map_err(WorkspaceError::git("find the task branch's commit"))?;
    let mut co = CheckoutBuilder::new();
    co.force();
    wt_repo
        .reset(commit.as_object(), ResetType::Hard, Some(&mut co))
        .map_err(WorkspaceError::git(format!(
            "reset worktree {}",
            path.display()
        )))?;
    let mut opts = StatusOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(false)
        .include_ignored(!matches!(ignored, Ignored::Keep))
        .recurse_ignored_dirs(false);
    let statuses = wt_repo
        .statuses(Some(&mut opts))
        .map_err(WorkspaceError::git(format!(
            "read status of {}",
            path.display()
        )))?;
    for entry in statuses.iter() {
        let Ok(rel) = entry.path() else { continue };
        let status = entry.status();
        if !(status.is_wt_new() || status.is_ignored() && ignored.removes(rel)) {
            continue;
        }
        let target = path.join(rel.trim_end_matches('/'));
        if target.is_dir()
            && !fs::symlink_metadata(&target).is_ok_and(|m| m.file_type().is_symlink())
        {
            super::cleanup::remove_dir(&target)?;
        } else {
            fs::remove_file(&target).map_err(WorkspaceError::io("could not remove", &target))?;
        }
    }
    Ok(())
}

fn copy_includes(
    ws: &Workspaces,
    repo: &Repository,
    base: Oid,
    dest: &Path,
) -> Result<Vec<String>, WorkspaceError> {
    if ws.patterns.is_empty() {
        return Ok(Vec::new());
    }
    let found = include::find_matches(&ws.root, &ws.patterns, std::slice::from_ref(&ws.base_dir));
    let tree = repo
        .find_commit(base)
        .and_then(|c| c.tree())
        .map_err(WorkspaceError::git("read the base commit's tree"))?;
    // Tracked files are already checked out at the right version: copying the main working
    // tree's copy would smuggle in its uncommitted edits.
    let untracked = found
        .into_iter()
        .filter(|(rel, _)| tree.get_path(Path::new(rel)).is_err())
        .collect();
    include::copy_files(&untracked, dest)
}

/// A worktrees dir inside the repository must not show up as untracked files there.
fn exclude_from_repo(
    common_dir: &Path,
    root: &Path,
    base_dir: &Path,
) -> Result<(), WorkspaceError> {
    let Ok(rel) = base_dir.strip_prefix(root) else {
        return Ok(());
    };
    let line = format!("/{}/", rel.to_string_lossy().trim_end_matches('/'));
    let info = common_dir.join("info");
    let file = info.join("exclude");
    let current = fs::read_to_string(&file).unwrap_or_default();
    if current.lines().any(|l| l.trim() == line) {
        return Ok(());
    }
    fs::create_dir_all(&info).map_err(WorkspaceError::io("could not create", &info))?;
    let mut text = current;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str("# whilly worktrees\n");
    text.push_str(&line);
    text.push('\n');
    fs::write(&file, text).map_err(WorkspaceError::io("could not update", &file))
}
