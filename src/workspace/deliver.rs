//! Bringing a task branch back into its base branch, and updating the base's working tree with
//! care when it is checked out.

use std::path::PathBuf;

use git2::{BranchType, Oid};

use super::commit;
use super::error::WorkspaceError;
use super::landed::{self, AlwaysOurs, DeliveryFence, Landed};
use super::replay::{Replay, replay, task_commits, update_base};
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
                pooled: false,
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
