//! Replaying a task's commits onto its base in memory and moving the base branch, its checked-out
//! working tree updated with care. Shared by the local delivery and the shared-base one.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use git2::{Oid, Repository, Sort, StatusOptions, build::CheckoutBuilder};

use super::commit::signature;
use super::error::WorkspaceError;
use super::prepare::checked_out_in;

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
