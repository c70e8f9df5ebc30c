//! Landing on a base branch that several clones share through a remote (`[delivery] push`):
//! workers in separate clones, on separate machines, see one queue and one remote, and nothing
//! of each other's git directories. So the landing happens on the remote's base branch, and the
//! remote's history is what tells a second worker that the task already landed:
//!
//! 1. fetch the remote's base; if a commit there carries this task's mark (see
//!    [`super::trailer`]) from an attempt whose landing the queue never recorded, the task is
//!    finished by it (`AlreadyLanded`) and nothing lands again;
//! 2. bring the task's (marked) commits onto the remote's tip, fast-forward or replayed;
//! 3. prove the lease, then push: a fast-forward from the tip just fetched, which the remote
//!    refuses when its branch moved meanwhile (the compare-and-swap); a refusal starts again at
//!    1 with the new tip;
//! 4. bring the clone's own base branch along when it can be fast-forwarded and is clean.

use git2::{BranchType, FetchOptions, Oid, Repository, Sort};

use super::credentials::{PushAuth, callbacks};
use super::error::WorkspaceError;
use super::landed::{self, DeliveryFence, Landed};
use super::replay::{Replay, replay, task_commits, update_base};
use super::trailer::TaskMark;
use super::{Delivery, MergeMode, Workspaces, Worktree};

/// Where landings go when clones share a base branch.
#[derive(Clone)]
pub struct SharedBase {
    pub remote: String,
    pub auth: PushAuth,
}

impl PartialEq for SharedBase {
    fn eq(&self, other: &Self) -> bool {
        self.remote == other.remote && self.auth.token == other.auth.token
    }
}

impl std::fmt::Debug for SharedBase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token stays out of debug output.
        write!(f, "SharedBase({})", self.remote)
    }
}

/// Marks an [`earlier_landing`] made by a newer attempt than ours.
const NEWER: &str = "newer attempt";
/// Rounds of fetch, replay and push before giving up on a base that keeps moving; between
/// rounds a pause of a random few tens of milliseconds, growing, so landers racing for the
/// branch spread out instead of colliding again.
const ROUNDS: u32 = 40;
/// How far back the remote's history is searched for an earlier landing of the task.
const SEARCH_DEPTH: usize = 5000;

/// The delivery itself, with the merge lock held (it orders this clone's workers; the remote
/// orders the clones).
pub(super) fn deliver(
    ws: &Workspaces,
    wt: &Worktree,
    mode: MergeMode,
    fence: &dyn DeliveryFence,
    target: &SharedBase,
    base_branch: &str,
) -> Result<Delivery, WorkspaceError> {
    let repo = ws.open()?;
    let tip = repo
        .find_branch(&wt.branch, BranchType::Local)
        .ok()
        .and_then(|b| b.get().target())
        .ok_or_else(|| WorkspaceError::NoTaskBranch {
            branch: wt.branch.clone(),
        })?;
    let ours = TaskMark::of_attempt(&wt.plan_id, &wt.task_id, fence.epoch(), &fence.queue_mark());
    let not_pushed = |detail: String| Delivery::NotPushed {
        branch: wt.branch.clone(),
        base_branch: base_branch.to_string(),
        remote: target.remote.clone(),
        detail,
    };
    for round in 0..ROUNDS {
        let remote_tip = match fetch_base(&repo, target, base_branch) {
            Ok(Some(t)) => t,
            Ok(None) => {
                return Ok(not_pushed(format!(
                    "the remote {} has no branch {base_branch} to land on; push it there once (`git push {} {base_branch}`)",
                    target.remote, target.remote
                )));
            }
            // Another process of this clone (a `git fetch` of the operator's, say) holds the
            // tracking ref's lock for a moment: another round, not a parked task.
            Err(e) if is_lock_contention(&e) && round + 1 < ROUNDS => {
                pause(round);
                continue;
            }
            Err(e) => return Ok(not_pushed(e.to_string())),
        };
        if let Some(l) = earlier_landing(&repo, remote_tip, &ours, fence)? {
            if l.queue == NEWER {
                return Ok(Delivery::LeaseLost);
            }
            catch_up(&repo, base_branch, remote_tip);
            return Ok(Delivery::AlreadyLanded {
                base_branch: base_branch.to_string(),
                commit: l.commit,
                epoch: l.epoch,
            });
        }
        let commits = task_commits(&repo, tip, remote_tip)?;
        if tip == remote_tip || commits.is_empty() {
            catch_up(&repo, base_branch, remote_tip);
            return Ok(Delivery::NothingToDo);
        }
        let fast_forward = mode == MergeMode::Ff
            && repo
                .graph_descendant_of(tip, remote_tip)
                .map_err(WorkspaceError::git(
                    "compare the task branch with the remote",
                ))?;
        let new_tip = if fast_forward {
            tip
        } else {
            match replay(&repo, &commits, remote_tip)? {
                Replay::Done(oid) if oid == remote_tip => return Ok(Delivery::NothingToDo),
                Replay::Done(oid) => oid,
                Replay::Conflict(files) => {
                    return Ok(Delivery::Conflict {
                        branch: wt.branch.clone(),
                        files,
                    });
                }
            }
        };
        match fence.still_ours() {
            Ok(true) => {}
            Ok(false) => return Ok(Delivery::LeaseLost),
            Err(detail) => return Err(WorkspaceError::FenceUnanswered { detail }),
        }
        crate::failpoint::crash_if("before_push");
        match push_from(&repo, target, base_branch, remote_tip, new_tip) {
            Ok(Pushed::Moved) => {
                pause(round);
                tracing::info!(
                    remote = %target.remote,
                    branch = base_branch,
                    "the shared base moved while landing {}; landing again on its new tip",
                    wt.task_id
                );
                continue;
            }
            Ok(Pushed::Done) => {}
            Err(e) => return Ok(not_pushed(e.to_string())),
        }
        let note = Landed {
            commit: new_tip.to_string(),
            base_branch: base_branch.to_string(),
            epoch: fence.epoch(),
            queue: fence.queue_mark(),
        };
        if let Err(e) = landed::write(&ws.common_dir, &wt.plan_id, &wt.task_id, &note) {
            tracing::error!(task = %wt.task_id, "writing the landing note: {e}");
        }
        catch_up(&repo, base_branch, new_tip);
        return Ok(if fast_forward {
            Delivery::FastForwarded {
                base_branch: base_branch.to_string(),
                commit: new_tip.to_string(),
            }
        } else {
            Delivery::Merged {
                base_branch: base_branch.to_string(),
                commit: new_tip.to_string(),
                commits: commits.len(),
            }
        });
    }
    Ok(not_pushed(format!(
        "the remote's {base_branch} moved {ROUNDS} times while this task was landing on it; merge it again when the other workers are quieter"
    )))
}

/// A landing of the task on the remote's `base_branch` that the queue never recorded, looked
/// for before an attempt spends anything (another clone's worker landed it and died). A remote
/// that cannot be reached now is no answer: delivery looks again before it lands.
pub(super) fn unrecorded(
    ws: &Workspaces,
    target: &SharedBase,
    base_branch: &str,
    plan_id: &str,
    task_id: &str,
    fence: &dyn DeliveryFence,
) -> Result<Option<Landed>, WorkspaceError> {
    // The clone's tracking ref is fetched into under the merge lock, as delivery does.
    let _lock = super::lock::merge(&ws.common_dir, ws.cfg.merge_lock_timeout)?;
    let repo = ws.open()?;
    let remote_tip = match fetch_base(&repo, target, base_branch) {
        Ok(Some(t)) => t,
        Ok(None) => return Ok(None),
        Err(e) => {
            tracing::info!("looking for an earlier landing on the shared base: {e}");
            return Ok(None);
        }
    };
    let ours = TaskMark::of_attempt(plan_id, task_id, fence.epoch(), &fence.queue_mark());
    Ok(earlier_landing(&repo, remote_tip, &ours, fence)?
        .filter(|l| l.queue != NEWER)
        .map(|l| {
            catch_up(&repo, base_branch, remote_tip);
            Landed {
                base_branch: base_branch.to_string(),
                ..l
            }
        }))
}

/// A growing, random pause between rounds, so landers racing for the branch spread out.
fn pause(round: u32) {
    let jitter = rand::random::<u64>() % (20 * (u64::from(round) + 1));
    std::thread::sleep(std::time::Duration::from_millis(10 + jitter.min(500)));
}

/// Whether a git error is another process holding a lock this one needs for a moment.
fn is_lock_contention(e: &WorkspaceError) -> bool {
    match e {
        WorkspaceError::Git { source, .. } => {
            source.code() == git2::ErrorCode::Locked || source.message().contains("failed to lock")
        }
        _ => false,
    }
}

/// The remote's tip of `branch`, fetched into `refs/remotes/<remote>/<branch>`; `None` when
/// the remote has no such branch.
fn fetch_base(
    repo: &Repository,
    target: &SharedBase,
    branch: &str,
) -> Result<Option<Oid>, WorkspaceError> {
    let remote = &target.remote;
    let mut r = repo
        .find_remote(remote)
        .map_err(WorkspaceError::git(format!("find remote {remote}")))?;
    let url = r.url().unwrap_or_default().to_string();
    let tracking = format!("refs/remotes/{remote}/{branch}");
    let mut opts = FetchOptions::new();
    opts.remote_callbacks(callbacks(&target.auth, &url));
    match r.fetch(
        &[format!("+refs/heads/{branch}:{tracking}")],
        Some(&mut opts),
        None,
    ) {
        Ok(()) => {}
        // A remote without the branch answers "couldn't find remote ref".
        Err(e) if e.message().contains("find remote ref") => return Ok(None),
        Err(e) => {
            return Err(WorkspaceError::git(format!(
                "fetch {branch} from {remote} ({url})"
            ))(e));
        }
    }
    Ok(repo.refname_to_id(&tracking).ok())
}

/// The newest landing of this task in the remote's history that the queue never recorded.
/// A landing the queue recorded (the task was reset and runs again) is history, and so is
/// anything older than it.
fn earlier_landing(
    repo: &Repository,
    remote_tip: Oid,
    ours: &TaskMark,
    fence: &dyn DeliveryFence,
) -> Result<Option<Landed>, WorkspaceError> {
    let e = || WorkspaceError::git("search the remote's base for this task's commits");
    let mut walk = repo.revwalk().map_err(e())?;
    walk.set_sorting(Sort::TOPOLOGICAL).map_err(e())?;
    walk.push(remote_tip).map_err(e())?;
    for oid in walk.take(SEARCH_DEPTH) {
        let oid = oid.map_err(e())?;
        let commit = repo.find_commit(oid).map_err(e())?;
        let Some(mark) = TaskMark::parse(commit.message_raw().unwrap_or_default()) else {
            continue;
        };
        if !mark.same_task(ours) {
            continue;
        }
        if mark.epoch > ours.epoch {
            // A newer attempt of this task landed it: this one lost its lease on the way.
            return Ok(Some(Landed {
                commit: oid.to_string(),
                base_branch: String::new(),
                epoch: mark.epoch,
                queue: NEWER.to_string(),
            }));
        }
        return match fence.recorded(mark.epoch) {
            Ok(true) => Ok(None),
            Ok(false) => Ok(Some(Landed {
                commit: oid.to_string(),
                base_branch: String::new(),
                epoch: mark.epoch,
                queue: fence.queue_mark(),
            })),
            Err(detail) => Err(WorkspaceError::FenceUnanswered { detail }),
        };
    }
    Ok(None)
}

enum Pushed {
    Done,
    /// The remote's branch is no longer at the tip we built on.
    Moved,
}

/// Moves the remote's `branch` from `expected` to `new` (a descendant of it) as one
/// compare-and-swap (see [`super::remote_ref`]).
fn push_from(
    repo: &Repository,
    target: &SharedBase,
    branch: &str,
    expected: Oid,
    new: Oid,
) -> Result<Pushed, WorkspaceError> {
    // The new tip goes out under a private ref name so the push can name it.
    let local = format!("refs/whilly/landing/{branch}");
    repo.reference(&local, new, true, "whilly: landing on the shared base")
        .map_err(WorkspaceError::git("name the landing commit"))?;
    let result = super::remote_ref::compare_and_swap(
        repo,
        &target.remote,
        &target.auth,
        &local,
        branch,
        Some(expected),
    );
    if let Ok(mut reference) = repo.find_reference(&local) {
        let _ = reference.delete();
    }
    Ok(if result? { Pushed::Done } else { Pushed::Moved })
}

/// Brings this clone's own base branch up to `tip` when that is a fast-forward and its
/// checkout (if any) is clean there: the clone's operator sees the landing. Anything else
/// leaves the local branch alone; the landing is on the remote either way.
fn catch_up(repo: &Repository, base_branch: &str, tip: Oid) {
    let base_ref = format!("refs/heads/{base_branch}");
    let Ok(local) = repo.refname_to_id(&base_ref) else {
        return;
    };
    if local == tip || !repo.graph_descendant_of(tip, local).unwrap_or(false) {
        return;
    }
    if super::busy::busy_branches(repo)
        .iter()
        .any(|b| b.branch == base_branch)
    {
        return;
    }
    let msg = format!("whilly: fast-forward {base_branch} to the shared base");
    match update_base(repo, &base_ref, local, tip, &msg, base_branch) {
        Ok(None) => {}
        Ok(Some((dir, files))) => tracing::info!(
            "{base_branch} in {} is not brought up to the shared base: uncommitted changes to {}",
            dir.display(),
            files.join(", ")
        ),
        Err(e) => tracing::info!("{base_branch} is not brought up to the shared base: {e}"),
    }
}
