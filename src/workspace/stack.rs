//! Where a task starts when what it depends on was delivered for review but not merged
//! (delivery `branch` or `pr`): from that work, not from the base branch that lacks it.
//!
//! A dependency counts as merged when the base already holds its work: its commit is in the
//! base's history, or merging it into the base changes nothing (a squash or rebase merge wrote
//! the same content under other commits). One unmerged dependency: the task starts from its
//! commit (its pull request goes on top of that branch). Several: from their merge, made here as
//! a commit object no branch points at yet; when they conflict the task cannot start, and says
//! which two. A dependency's commit that this clone lacks (another machine ran it) is fetched
//! from the remote branch it was pushed to.

use git2::{Oid, Repository, Signature};

use super::credentials::PushAuth;
use super::error::WorkspaceError;
use super::{Workspaces, push};

/// A dependency's delivered work, as its attempt recorded the push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveredDep {
    pub task_id: String,
    /// The branch on the remote.
    pub branch: String,
    pub commit: String,
}

/// Where the task starts, and on which dependencies' unmerged work (in the order given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackStart {
    pub commit: String,
    pub stacked_on: Vec<String>,
}

impl StackStart {
    /// Starting from the base itself: stacked on nothing.
    fn on_base(base: &str) -> StackStart {
        StackStart {
            commit: base.to_string(),
            stacked_on: Vec::new(),
        }
    }
}

impl Workspaces {
    /// The commit a task starts from, given its base and its delivered dependencies (see the
    /// module comment).
    pub fn stack_start(
        &self,
        base: &str,
        deps: &[DeliveredDep],
        remote: &str,
        auth: &PushAuth,
    ) -> Result<StackStart, WorkspaceError> {
        if deps.is_empty() {
            // The common case, on every task's start: no repository to open.
            return Ok(StackStart::on_base(base));
        }
        let repo = self.open()?;
        let base_oid = super::prepare::resolve_commit(&repo, base)?;
        let mut unmerged: Vec<(&DeliveredDep, Oid)> = Vec::new();
        for d in deps {
            let oid = dep_commit(&repo, d, remote, auth)?;
            if !holds(&repo, base_oid, oid)? {
                unmerged.push((d, oid));
            }
        }
        let Some(((first, first_oid), rest)) = unmerged.split_first() else {
            return Ok(StackStart::on_base(base));
        };
        let mut start = *first_oid;
        let mut names = vec![first.task_id.clone()];
        for (d, oid) in rest {
            start = merge(&repo, start, *oid, &names, d)?;
            names.push(d.task_id.clone());
        }
        Ok(StackStart {
            commit: start.to_string(),
            stacked_on: names,
        })
    }
}

/// The dependency's commit in this clone, fetched from its remote branch when missing.
fn dep_commit(
    repo: &Repository,
    d: &DeliveredDep,
    remote: &str,
    auth: &PushAuth,
) -> Result<Oid, WorkspaceError> {
    let unavailable = |detail: String| WorkspaceError::StackUnavailable {
        task: d.task_id.clone(),
        branch: d.branch.clone(),
        detail,
    };
    let oid = Oid::from_str(&d.commit).map_err(|e| unavailable(e.to_string()))?;
    if repo.find_commit(oid).is_ok() {
        return Ok(oid);
    }
    push::fetch_tip(repo, remote, &d.branch, auth).map_err(|e| unavailable(e.to_string()))?;
    repo.find_commit(oid).map(|_| oid).map_err(|_| {
        unavailable(format!(
            "{remote}/{} does not hold commit {} any more (rewritten or deleted)",
            d.branch, d.commit
        ))
    })
}

/// Whether `base` already holds the work of `dep`.
fn holds(repo: &Repository, base: Oid, dep: Oid) -> Result<bool, WorkspaceError> {
    if dep == base
        || repo
            .graph_descendant_of(base, dep)
            .map_err(WorkspaceError::git("compare a dependency with the base"))?
    {
        return Ok(true);
    }
    let (b, d) = (find(repo, base)?, find(repo, dep)?);
    let mut index = repo
        .merge_commits(&b, &d, None)
        .map_err(WorkspaceError::git(
            "merge a dependency into the base (in memory)",
        ))?;
    if index.has_conflicts() {
        return Ok(false);
    }
    let tree = index
        .write_tree_to(repo)
        .map_err(WorkspaceError::git("write the merged tree"))?;
    Ok(tree == b.tree_id())
}

fn find(repo: &Repository, oid: Oid) -> Result<git2::Commit<'_>, WorkspaceError> {
    repo.find_commit(oid)
        .map_err(WorkspaceError::git(format!("find commit {oid}")))
}

/// A merge commit of `ours` (the dependencies in `names`) and `theirs` (`d`'s).
fn merge(
    repo: &Repository,
    ours: Oid,
    theirs: Oid,
    names: &[String],
    d: &DeliveredDep,
) -> Result<Oid, WorkspaceError> {
    let (o, t) = (find(repo, ours)?, find(repo, theirs)?);
    let mut index = repo
        .merge_commits(&o, &t, None)
        .map_err(WorkspaceError::git("merge the dependencies' work"))?;
    if index.has_conflicts() {
        let files: Vec<String> = index
            .conflicts()
            .map(|c| {
                c.filter_map(|c| c.ok())
                    .filter_map(|c| c.our.or(c.their).or(c.ancestor))
                    .map(|e| String::from_utf8_lossy(&e.path).into_owned())
                    .collect()
            })
            .unwrap_or_default();
        return Err(WorkspaceError::StackConflict {
            ours: names.join(", "),
            theirs: d.task_id.clone(),
            files,
        });
    }
    let tree_id = index
        .write_tree_to(repo)
        .map_err(WorkspaceError::git("write the dependencies' merged tree"))?;
    let tree = repo
        .find_tree(tree_id)
        .map_err(WorkspaceError::git("find the merged tree"))?;
    let sig = Signature::now("whilly", "whilly@localhost")
        .map_err(WorkspaceError::git("make a signature"))?;
    let message = format!(
        "whilly: start from the unmerged work of {} and {}",
        names.join(", "),
        d.task_id
    );
    repo.commit(None, &sig, &sig, &message, &tree, &[&o, &t])
        .map_err(WorkspaceError::git("commit the dependencies' merge"))
}
