//! Bringing a task branch back into its base branch, and updating the base's working tree with
//! care when it is checked out.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use git2::{BranchType, Oid, Repository, Sort, StatusOptions, build::CheckoutBuilder};

use super::commit::{self, signature};
use super::error::WorkspaceError;
use super::landed::{self, AlwaysOurs, DeliveryFence, Landed};
use super::prepare::checked_out_in;
use super::{Delivery, MergeMode, Workspaces, Worktree, lock};

/// Commits an attempt's work and delivers it, fenced. Under the merge lock, first the fence is
/// asked whether the lease is still ours (`LeaseLost` otherwise, and nothing is committed: an
/// attempt presumed dead leaves no commit on the task branch for the next attempt to carry
/// along); then an earlier landing of this task that the queue never recorded ends delivery
/// (`AlreadyLanded`: nothing lands twice); a landing leaves its note. Whoever takes the task
/// over must take the merge lock to deliver, and then finds the note.
pub(super) fn commit_and_deliver(
    ws: &Workspaces,
    wt: &Worktree,
    message: &str,
    snapshot: Option<&commit::Snapshot>,
    mode: MergeMode,
    fence: &dyn DeliveryFence,
) -> Result<(Option<String>, Delivery), WorkspaceError> {
    let _lock = lock::merge(&ws.common_dir, ws.cfg.merge_lock_timeout)?;
    match fence.still_ours() {
        Ok(true) => {}
        Ok(false) => return Ok((None, Delivery::LeaseLost)),
        Err(detail) => return Err(WorkspaceError::FenceUnanswered { detail }),
    }
    let mark = super::trailer::TaskMark::of_attempt(
        &wt.plan_id,
        &wt.task_id,
        fence.epoch(),
        &fence.queue_mark(),
    );
    let made = commit::commit(ws, wt, &mark.stamp(message), false, snapshot)?;
    // The agent's own commits (and an earlier attempt's) carry the mark too: every commit that
    // lands or is pushed names its task and attempt.
    let fork = Oid::from_str(&wt.base_commit).map_err(|e| WorkspaceError::BadBaseCommit {
        commit: wt.base_commit.clone(),
        reason: e.message().to_string(),
    })?;
    let tip = commit::stamp(&ws.open()?, &wt.branch, fork, &mark)?;
    let commit = made.map(|_| tip.to_string());
    Ok((commit, deliver_locked(ws, wt, mode, fence)?))
}

/// Delivers the branch of a task whose work was committed earlier but could not land then (a
/// dirty base, a conflict): the operator has cleaned up and asks again. The kept worktree is
/// used when there is one, else the task branch alone. A landing removes the worktree and the
/// branch; anything else leaves both as they are.
pub(super) fn land(
    ws: &Workspaces,
    plan_id: &str,
    task_id: &str,
    mode: MergeMode,
    fence: &dyn DeliveryFence,
) -> Result<Delivery, WorkspaceError> {
    let _lock = lock::merge(&ws.common_dir, ws.cfg.merge_lock_timeout)?;
    match fence.still_ours() {
        Ok(true) => {}
        Ok(false) => return Ok(Delivery::LeaseLost),
        Err(detail) => return Err(WorkspaceError::FenceUnanswered { detail }),
    }
    let kept = ws.find(plan_id, task_id)?;
    let wt = match &kept {
        Some(wt) => wt.clone(),
        None => {
            let branch = super::layout::branch_name(plan_id, task_id);
            let repo = ws.open()?;
            if repo.find_branch(&branch, BranchType::Local).is_err() {
                return Err(WorkspaceError::NoTaskBranch { branch });
            }
            Worktree {
                path: PathBuf::new(),
                branch,
                base_commit: ws.base_commit()?,
                base_branch: ws.current_branch()?,
                plan_id: plan_id.to_string(),
                task_id: task_id.to_string(),
                name: super::layout::admin_name(plan_id, task_id),
                reused: true,
                setup_output: None,
                included: Vec::new(),
            }
        }
    };
    let delivery = deliver_locked(ws, &wt, mode, fence)?;
    let landed = matches!(
        delivery,
        Delivery::FastForwarded { .. }
            | Delivery::Merged { .. }
            | Delivery::NothingToDo
            | Delivery::AlreadyLanded { .. }
    );
    if landed {
        match &kept {
            Some(wt) => super::cleanup::remove(ws, &wt.name, &wt.path, &wt.branch, true)?,
            None => {
                if let Ok(mut b) = ws.open()?.find_branch(&wt.branch, BranchType::Local)
                    && let Err(e) = b.delete()
                {
                    tracing::warn!("deleting the landed branch {}: {e}", wt.branch);
                }
            }
        }
    }
    Ok(delivery)
}

/// Delivers outside any queue.
pub(super) fn deliver(
    ws: &Workspaces,
    wt: &Worktree,
    mode: MergeMode,
) -> Result<Delivery, WorkspaceError> {
    let _lock = lock::merge(&ws.common_dir, ws.cfg.merge_lock_timeout)?;
    deliver_locked(ws, wt, mode, &AlwaysOurs)
}

/// The delivery itself; the caller holds the merge lock.
fn deliver_locked(
    ws: &Workspaces,
    wt: &Worktree,
    mode: MergeMode,
    fence: &dyn DeliveryFence,
) -> Result<Delivery, WorkspaceError> {
    let repo = ws.open()?;
    let tip = repo
        .find_branch(&wt.branch, BranchType::Local)
        .map_err(WorkspaceError::git(format!(
            "find task branch {}",
            wt.branch
        )))?
        .get()
        .target()
        .ok_or_else(|| WorkspaceError::Git {
            context: format!("task branch {} is not a direct reference", wt.branch),
            source: git2::Error::from_str("symbolic branch"),
        })?;
    let fork = Oid::from_str(&wt.base_commit).map_err(|e| WorkspaceError::BadBaseCommit {
        commit: wt.base_commit.clone(),
        reason: e.message().to_string(),
    })?;
    if mode == MergeMode::None {
        return Ok(if tip == fork {
            Delivery::NothingToDo
        } else {
            Delivery::LeftForReview {
                branch: wt.branch.clone(),
            }
        });
    }
    let base_branch = wt
        .base_branch
        .clone()
        .ok_or_else(|| WorkspaceError::DetachedBase {
            path: ws.root.clone(),
        })?;
    if let Some(target) = &ws.cfg.shared_base {
        return super::shared_base::deliver(ws, wt, mode, fence, target, &base_branch);
    }
    let base_ref = format!("refs/heads/{base_branch}");

    let base_tip = repo
        .refname_to_id(&base_ref)
        .map_err(WorkspaceError::git(format!(
            "find base branch {base_branch}"
        )))?;
    let note = landed::read(&ws.common_dir, &wt.plan_id, &wt.task_id);
    if let Some(l) = landed::unrecorded_landing(&repo, note, base_tip, fence)? {
        return Ok(Delivery::AlreadyLanded {
            base_branch: l.base_branch,
            commit: l.commit,
            epoch: l.epoch,
        });
    }
    let gerr = || WorkspaceError::git("compare the task branch with the base branch");
    if tip == base_tip || repo.graph_descendant_of(base_tip, tip).map_err(gerr())? {
        return Ok(Delivery::NothingToDo);
    }
    let commits = task_commits(&repo, tip, base_tip)?;
    if commits.is_empty() {
        return Ok(Delivery::NothingToDo);
    }
    let fast_forward =
        mode == MergeMode::Ff && repo.graph_descendant_of(tip, base_tip).map_err(gerr())?;
    let new_tip = if fast_forward {
        tip
    } else {
        match replay(&repo, &commits, base_tip)? {
            Replay::Done(oid) if oid == base_tip => return Ok(Delivery::NothingToDo),
            Replay::Done(oid) => oid,
            Replay::Conflict(files) => {
                return Ok(Delivery::Conflict {
                    branch: wt.branch.clone(),
                    files,
                });
            }
        }
    };
    let what = if fast_forward {
        "fast-forward"
    } else {
        "cherry-pick"
    };
    // A rebase of the base branch detaches HEAD and keeps the branch's name aside: moving the
    // branch under it would be undone by `git rebase --abort`, taking the landing with it.
    if let Some(busy) = super::busy::busy_branches(&repo)
        .into_iter()
        .find(|b| b.branch == base_branch)
    {
        return Ok(Delivery::BaseBusy {
            branch: wt.branch.clone(),
            base_branch,
            worktree: busy.worktree,
            operation: busy.operation.to_string(),
        });
    }
    let msg = format!("whilly: {what} {} ({})", wt.branch, wt.task_id);
    if let Some(dirty) = update_base(&repo, &base_ref, base_tip, new_tip, &msg, &base_branch)? {
        return Ok(Delivery::BaseDirty {
            branch: wt.branch.clone(),
            base_branch,
            worktree: dirty.0,
            files: dirty.1,
        });
    }
    let note = Landed {
        commit: new_tip.to_string(),
        base_branch: base_branch.clone(),
        epoch: fence.epoch(),
        queue: fence.queue_mark(),
    };
    if let Err(e) = landed::write(&ws.common_dir, &wt.plan_id, &wt.task_id, &note) {
        // The work landed; only the guard against a second landing is missing.
        tracing::error!(task = %wt.task_id, "writing the landing note: {e}");
    }
    Ok(if fast_forward {
        Delivery::FastForwarded {
            base_branch,
            commit: new_tip.to_string(),
        }
    } else {
        Delivery::Merged {
            base_branch,
            commit: new_tip.to_string(),
            commits: commits.len(),
        }
    })
}

/// The task's own commits, oldest first: reachable from its tip but not from the base.
pub(super) fn task_commits(
    repo: &Repository,
    tip: Oid,
    base_tip: Oid,
) -> Result<Vec<Oid>, WorkspaceError> {
    let e = || WorkspaceError::git("list the task's commits");
    let mut walk = repo.revwalk().map_err(e())?;
    walk.set_sorting(Sort::TOPOLOGICAL | Sort::REVERSE)
        .map_err(e())?;
    walk.push(tip).map_err(e())?;
    walk.hide(base_tip).map_err(e())?;
    walk.simplify_first_parent().map_err(e())?;
    walk.collect::<Result<Vec<_>, _>>().map_err(e())
}

pub(super) enum Replay {
    Done(Oid),
    Conflict(Vec<String>),
}

/// Cherry-picks `commits` onto `onto` in memory (no working tree involved), keeping authors.
/// A commit whose change is already in the base is dropped, as `git rebase` does.
pub(super) fn replay(
    repo: &Repository,
    commits: &[Oid],
    onto: Oid,
) -> Result<Replay, WorkspaceError> {
    let e = |what: &str| WorkspaceError::git(format!("cherry-pick: {what}"));
    let sig = signature(repo)?;
    let mut onto = repo.find_commit(onto).map_err(e("find the base commit"))?;
    for &oid in commits {
        let commit = repo.find_commit(oid).map_err(e("find a task commit"))?;
        let mainline = if commit.parent_count() > 1 { 1 } else { 0 };
        let mut index = repo
            .cherrypick_commit(&commit, &onto, mainline, None)
            .map_err(e("apply a task commit"))?;
        if index.has_conflicts() {
            let mut files = BTreeSet::new();
            for conflict in index.conflicts().map_err(e("read conflicts"))? {
                let c = conflict.map_err(e("read a conflict"))?;
                for entry in [c.our, c.their, c.ancestor].into_iter().flatten() {
                    files.insert(String::from_utf8_lossy(&entry.path).into_owned());
                }
            }
            return Ok(Replay::Conflict(files.into_iter().collect()));
        }
        let tree_id = index.write_tree_to(repo).map_err(e("write a tree"))?;
        if tree_id == onto.tree_id() {
            continue;
        }
        let tree = repo.find_tree(tree_id).map_err(e("find a tree"))?;
        let message = commit.message_raw().unwrap_or("whilly: task commit");
        let new = repo
            .commit(None, &commit.author(), &sig, message, &tree, &[&onto])
            .map_err(e("write a commit"))?;
        onto = repo.find_commit(new).map_err(e("find the new commit"))?;
    }
    Ok(Replay::Done(onto.id()))
}

/// Moves the base branch from `old` to `new`. When a working tree has it checked out, that tree
/// and its index are updated for the touched files first, and only if they are clean there:
/// `Some((worktree, files))` means nothing was changed because of those dirty files.
pub(super) fn update_base(
    repo: &Repository,
    base_ref: &str,
    old: Oid,
    new: Oid,
    msg: &str,
    base_branch: &str,
) -> Result<Option<(PathBuf, Vec<String>)>, WorkspaceError> {
    let holder = checked_out_in(repo, base_ref);
    let mut checked_out: Option<(PathBuf, Vec<String>)> = None;
    if let Some(dir) = &holder {
        let w = Repository::open(dir)
            .map_err(WorkspaceError::git(format!("open {}", dir.display())))?;
        let head_now = w.head().ok().and_then(|h| h.target());
        if head_now != Some(old) {
            return Err(WorkspaceError::BaseMoved {
                branch: base_branch.to_string(),
            });
        }
        let touched = touched_paths(repo, old, new)?;
        let dirty = dirty_paths(&w, &touched)?;
        if !dirty.is_empty() {
            return Ok(Some((dir.clone(), dirty)));
        }
        // Objects handed to checkout must come from the repository doing the checkout.
        let new_tree = w
            .find_commit(new)
            .and_then(|c| c.into_object().peel(git2::ObjectType::Tree))
            .map_err(WorkspaceError::git("read the new base tree"))?;
        // SAFE against HEAD (still `old`): a file changed since our status check makes the whole
        // checkout fail before anything is written.
        let mut co = paths_checkout(&touched);
        if let Err(err) = w.checkout_tree(&new_tree, Some(&mut co)) {
            if err.code() == git2::ErrorCode::Conflict {
                return Ok(Some((dir.clone(), touched)));
            }
            return Err(WorkspaceError::git(format!("update {}", dir.display()))(
                err,
            ));
        }
        checked_out = Some((dir.clone(), touched));
    }
    if let Err(err) = repo.reference_matching(base_ref, new, true, old, msg) {
        if let Some((dir, touched)) = checked_out
            && let Ok(w) = Repository::open(&dir)
        {
            // Put the files back as they were so the tree matches its (unmoved) HEAD again.
            if let Ok(old_tree) = w
                .find_commit(old)
                .and_then(|c| c.into_object().peel(git2::ObjectType::Tree))
            {
                let mut co = paths_checkout(&touched);
                co.force();
                if let Err(e) = w.checkout_tree(&old_tree, Some(&mut co)) {
                    tracing::warn!(
                        "restoring {} in the base worktree after a failed merge: {e}",
                        touched.join(", ")
                    );
                }
            }
        }
        return Err(if err.code() == git2::ErrorCode::Modified {
            WorkspaceError::BaseMoved {
                branch: base_branch.to_string(),
            }
        } else {
            WorkspaceError::git(format!("update branch {base_branch}"))(err)
        });
    }
    Ok(None)
}

fn paths_checkout(paths: &[String]) -> CheckoutBuilder<'static> {
    let mut co = CheckoutBuilder::new();
    co.safe().disable_pathspec_match(true).update_index(true);
    for p in paths {
        co.path(p.as_str());
    }
    co
}

fn touched_paths(repo: &Repository, old: Oid, new: Oid) -> Result<Vec<String>, WorkspaceError> {
    let e = || WorkspaceError::git("diff the base branch with its new tip");
    let old_tree = repo.find_commit(old).and_then(|c| c.tree()).map_err(e())?;
    let new_tree = repo.find_commit(new).and_then(|c| c.tree()).map_err(e())?;
    let diff = repo
        .diff_tree_to_tree(Some(&old_tree), Some(&new_tree), None)
        .map_err(e())?;
    let mut paths = BTreeSet::new();
    for delta in diff.deltas() {
        for f in [delta.old_file(), delta.new_file()] {
            if let Some(p) = f.path().and_then(Path::to_str) {
                paths.insert(p.to_string());
            }
        }
    }
    Ok(paths.into_iter().collect())
}

/// Touched files that are not exactly as committed in the checked-out tree (modified, staged,
/// untracked or ignored where the task adds a file).
fn dirty_paths(w: &Repository, touched: &[String]) -> Result<Vec<String>, WorkspaceError> {
    if touched.is_empty() {
        return Ok(Vec::new());
    }
    let mut opts = StatusOptions::new();
    opts.include_untracked(true)
        .include_ignored(true)
        .recurse_untracked_dirs(true)
        .disable_pathspec_match(true);
    for p in touched {
        opts.pathspec(p.as_str());
    }
    let statuses = w
        .statuses(Some(&mut opts))
        .map_err(WorkspaceError::git("read the base working tree's status"))?;
    let mut dirty: Vec<String> = statuses
        .iter()
        .filter(|s| s.status() != git2::Status::CURRENT)
        .filter_map(|s| s.path().ok().map(str::to_string))
        .collect();
    dirty.sort();
    dirty.dedup();
    Ok(dirty)
}
