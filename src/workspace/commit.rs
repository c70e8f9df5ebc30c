//! Committing the agent's work on the task branch.

use std::path::Path;

use git2::{IndexAddOption, Repository, Signature};

use super::error::WorkspaceError;
use super::{Workspaces, Worktree, meta};

/// What the agent left in its worktree, written as a tree object before any check runs: the
/// checks' own leftovers (caches, reports, reformatted files) can then never reach the commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The tree, as hex.
    pub tree: String,
    /// Whether it differs from the tree of the commit the task started from (the agent's own
    /// commits count as changes).
    pub changed: bool,
    /// The paths that differ from that tree (added, changed, deleted), repository-relative.
    pub files: Vec<String>,
}

/// Stages the agent's work in memory (the worktree's index on disk is not touched) and writes
/// its tree.
pub(super) fn snapshot(ws: &Workspaces, wt: &Worktree) -> Result<Snapshot, WorkspaceError> {
    let repo = open_worktree(wt)?;
    let (mut index, head) = stage(ws, wt, &repo)?;
    let tree = index
        .write_tree()
        .map_err(WorkspaceError::git("write the snapshot's tree"))?;
    let base_tree = git2::Oid::from_str(&wt.base_commit)
        .ok()
        .and_then(|c| repo.find_commit(c).ok())
        .map(|c| c.tree_id());
    let from = base_tree.unwrap_or_else(|| head.tree_id());
    let changed = from != tree;
    let mut files = Vec::new();
    if changed {
        let (a, b) = (
            repo.find_tree(from)
                .map_err(WorkspaceError::git("find the base tree"))?,
            repo.find_tree(tree)
                .map_err(WorkspaceError::git("find the snapshot's tree"))?,
        );
        let diff = repo
            .diff_tree_to_tree(Some(&a), Some(&b), None)
            .map_err(WorkspaceError::git("compare the snapshot with the base"))?;
        for d in diff.deltas() {
            if let Some(p) = d.new_file().path().or_else(|| d.old_file().path()) {
                files.push(p.to_string_lossy().into_owned());
            }
        }
    }
    Ok(Snapshot {
        tree: tree.to_string(),
        changed,
        files,
    })
}

/// The changed files of `snapshot` that may not land (secrets, size past the limit), judged
/// from the blobs the snapshot wrote: nothing is committed before this says the tree is safe.
pub(super) fn unsafe_files(
    wt: &Worktree,
    snapshot: &Snapshot,
    limits: crate::domain::landing_lint::LandingLimits,
) -> Result<Vec<crate::domain::landing_lint::UnsafeFile>, WorkspaceError> {
    use crate::domain::landing_lint::judge_file;
    if !snapshot.changed {
        return Ok(Vec::new());
    }
    let repo = open_worktree(wt)?;
    let tree = git2::Oid::from_str(&snapshot.tree)
        .and_then(|oid| repo.find_tree(oid))
        .map_err(WorkspaceError::git("find the snapshot's tree"))?;
    let base = git2::Oid::from_str(&wt.base_commit)
        .ok()
        .and_then(|c| repo.find_commit(c).ok())
        .and_then(|c| c.tree().ok());
    let diff = repo
        .diff_tree_to_tree(base.as_ref(), Some(&tree), None)
        .map_err(WorkspaceError::git("compare the snapshot with the base"))?;
    let odb = repo
        .odb()
        .map_err(WorkspaceError::git("open the object database"))?;
    let mut out = Vec::new();
    for d in diff.deltas() {
        let file = d.new_file();
        if file.id().is_zero()
            || !matches!(
                d.status(),
                git2::Delta::Added
                    | git2::Delta::Modified
                    | git2::Delta::Renamed
                    | git2::Delta::Copied
                    | git2::Delta::Typechange
            )
        {
            continue;
        }
        let path = file
            .path()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (size, _) = odb
            .read_header(file.id())
            .map_err(WorkspaceError::git(format!("read the size of {path}")))?;
        let size = size as u64;
        let within = limits.max_file_bytes == 0 || size <= limits.max_file_bytes;
        let blob = if within && limits.secret_lint {
            Some(
                repo.find_blob(file.id())
                    .map_err(WorkspaceError::git(format!("read {path}")))?,
            )
        } else {
            None
        };
        out.extend(judge_file(
            &path,
            size,
            blob.as_ref().map(|b| b.content()),
            limits,
        ));
    }
    Ok(out)
}

/// Commits on the task branch: the `snapshot` tree when given (what the agent left before the
/// checks ran), else the worktree as it is now.
pub(super) fn commit(
    ws: &Workspaces,
    wt: &Worktree,
    message: &str,
    allow_empty: bool,
    snapshot: Option<&Snapshot>,
) -> Result<Option<String>, WorkspaceError> {
    let repo = open_worktree(wt)?;
    // An agent may have switched branch (`git checkout -b other`) or detached HEAD: its work
    // still belongs on the task branch, so that branch is moved here, never whatever HEAD is.
    adopt_head(&repo, wt)?;
    let (mut index, head, tree_id) = match snapshot {
        // The agent's work was staged when the snapshot was taken; staging the worktree again
        // would only walk what the checks left behind.
        Some(s) => {
            let head = head_commit(&repo, wt)?;
            let tree = git2::Oid::from_str(&s.tree)
                .and_then(|oid| repo.find_tree(oid))
                .map_err(WorkspaceError::git("find the snapshot's tree"))?;
            let mut index = repo
                .index()
                .map_err(WorkspaceError::git("read the worktree's index"))?;
            // The index follows the commit, so `git status` in a kept worktree shows only what
            // the checks left behind.
            index
                .read_tree(&tree)
                .map_err(WorkspaceError::git("read the snapshot into the index"))?;
            let id = tree.id();
            (index, head, id)
        }
        None => {
            let (mut index, head) = stage(ws, wt, &repo)?;
            let id = index
                .write_tree()
                .map_err(WorkspaceError::git("write the commit's tree"))?;
            (index, head, id)
        }
    };
    index
        .write()
        .map_err(WorkspaceError::git("write the worktree's index"))?;
    if tree_id == head.tree_id() && !allow_empty {
        return Ok(None);
    }
    let tree = repo
        .find_tree(tree_id)
        .map_err(WorkspaceError::git("find the new tree"))?;
    let sig = signature(&repo)?;
    let branch_ref = format!("refs/heads/{}", wt.branch);
    let oid = repo
        .commit(Some(&branch_ref), &sig, &sig, message, &tree, &[&head])
        .map_err(WorkspaceError::git(format!("commit on {}", wt.branch)))?;
    Ok(Some(oid.to_string()))
}

/// Gives every commit of the task branch since `fork` this attempt's `mark` (see
/// [`super::trailer`]): whilly's own commit and the agent's alike, and commits an earlier
/// attempt left. Trees, authors and order stay; only messages (and so ids) change. Returns the
/// branch's tip afterwards.
pub(super) fn stamp(
    repo: &Repository,
    branch: &str,
    fork: git2::Oid,
    mark: &super::trailer::TaskMark,
) -> Result<git2::Oid, WorkspaceError> {
    let e = |what: &str| WorkspaceError::git(format!("mark the task's commits: {what}"));
    let branch_ref = format!("refs/heads/{branch}");
    let tip = repo
        .refname_to_id(&branch_ref)
        .map_err(e("find the task branch"))?;
    let mut walk = repo.revwalk().map_err(e("walk"))?;
    walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)
        .map_err(e("walk"))?;
    walk.push(tip).map_err(e("walk"))?;
    walk.hide(fork).map_err(e("walk"))?;
    let mut rewritten: std::collections::HashMap<git2::Oid, git2::Oid> = Default::default();
    let mut new_tip = tip;
    for oid in walk {
        let oid = oid.map_err(e("walk"))?;
        let c = repo.find_commit(oid).map_err(e("read a commit"))?;
        let message = c.message_raw().unwrap_or_default();
        let stamped = mark.stamp(message);
        let parents: Vec<git2::Oid> = c
            .parent_ids()
            .map(|p| rewritten.get(&p).copied().unwrap_or(p))
            .collect();
        let unchanged =
            stamped == message && parents.iter().eq(c.parent_ids().collect::<Vec<_>>().iter());
        let id = if unchanged {
            oid
        } else {
            let parents = parents
                .iter()
                .map(|p| repo.find_commit(*p))
                .collect::<Result<Vec<_>, _>>()
                .map_err(e("read a parent"))?;
            let refs: Vec<&git2::Commit<'_>> = parents.iter().collect();
            let tree = c.tree().map_err(e("read a tree"))?;
            repo.commit(None, &c.author(), &c.committer(), &stamped, &tree, &refs)
                .map_err(e("write a commit"))?
        };
        rewritten.insert(oid, id);
        new_tip = id;
    }
    if new_tip != tip {
        repo.reference_matching(
            &branch_ref,
            new_tip,
            true,
            tip,
            "whilly: mark the task's commits",
        )
        .map_err(e("move the task branch"))?;
    }
    Ok(new_tip)
}

/// Puts the worktree's HEAD back on its task branch, keeping the agent's commits: when HEAD
/// (another branch, or detached) descends from the task branch, the task branch is moved up to
/// it; otherwise the task branch stays, and the work is committed on it from the worktree's
/// files.
fn adopt_head(repo: &Repository, wt: &Worktree) -> Result<(), WorkspaceError> {
    let branch_ref = format!("refs/heads/{}", wt.branch);
    let head = repo.head().ok();
    if head.as_ref().and_then(|h| h.name().ok()) == Some(branch_ref.as_str()) {
        return Ok(());
    }
    let tip = repo
        .refname_to_id(&branch_ref)
        .map_err(WorkspaceError::git(format!(
            "find the task branch {}",
            wt.branch
        )))?;
    let head_commit = head
        .as_ref()
        .and_then(|h| h.peel_to_commit().ok())
        .map(|c| c.id());
    let descends =
        head_commit.is_some_and(|h| h == tip || repo.graph_descendant_of(h, tip).unwrap_or(false));
    if let Some(h) = head_commit
        && descends
    {
        repo.reference(
            &branch_ref,
            h,
            true,
            "whilly: the agent's commits, from its branch",
        )
        .map_err(WorkspaceError::git(format!(
            "move {} to the agent's commits",
            wt.branch
        )))?;
    }
    // Only HEAD moves: the files stay as the agent left them, and are committed from there.
    repo.set_head(&branch_ref)
        .map_err(WorkspaceError::git(format!(
            "put HEAD back on {}",
            wt.branch
        )))?;
    tracing::info!(
        "the agent left HEAD off {} ({}); its work is committed on the task branch",
        wt.branch,
        head.as_ref()
            .and_then(|h| h.shorthand().ok())
            .unwrap_or("detached")
    );
    Ok(())
}

fn open_worktree(wt: &Worktree) -> Result<Repository, WorkspaceError> {
    Repository::open(&wt.path).map_err(WorkspaceError::git(format!(
        "open worktree {}",
        wt.path.display()
    )))
}

fn head_commit<'r>(
    repo: &'r Repository,
    wt: &Worktree,
) -> Result<git2::Commit<'r>, WorkspaceError> {
    repo.head()
        .and_then(|h| h.peel_to_commit())
        .map_err(WorkspaceError::git(format!(
            "read HEAD of {}",
            wt.path.display()
        )))
}

/// The worktree's changes staged in an in-memory index, and HEAD's commit.
fn stage<'r>(
    ws: &Workspaces,
    wt: &Worktree,
    repo: &'r Repository,
) -> Result<(git2::Index, git2::Commit<'r>), WorkspaceError> {
    let head = head_commit(repo, wt)?;
    let head_tree = head
        .tree()
        .map_err(WorkspaceError::git("read HEAD's tree"))?;
    let mut index = repo
        .index()
        .map_err(WorkspaceError::git("read the worktree's index"))?;
    let all = std::iter::empty::<&str>();
    // add_all picks up new and modified files and honours .gitignore; update_all stages deletions.
    // What checks and setup commands leave behind (caches, dependencies, coverage) is never
    // committed, even in a repository whose .gitignore does not name it — unless the base
    // already tracks it.
    index
        .add_all(all.clone(), IndexAddOption::DEFAULT, None)
        .map_err(WorkspaceError::git("stage the agent's changes"))?;
    let outputs: Vec<std::path::PathBuf> = index
        .iter()
        .filter_map(|e| String::from_utf8(e.path).ok())
        .map(std::path::PathBuf::from)
        .filter(|p| is_build_output(p) && head_tree.get_path(p).is_err())
        .collect();
    for p in &outputs {
        if let Err(e) = index.remove_path(p) {
            tracing::warn!(
                "leaving build output {} out of the commit: {e}",
                p.display()
            );
        }
    }
    index
        .update_all(all, None)
        .map_err(WorkspaceError::git("stage deleted files"))?;
    let admin = meta::admin_dir(&ws.common_dir, &wt.name);
    for rel in meta::read_included(&admin) {
        // Include files (secrets like .env) are copies from the main tree, never task output.
        if head_tree.get_path(Path::new(&rel)).is_err() {
            // A secret that cannot be taken out of the commit stops the commit.
            index
                .remove_path(Path::new(&rel))
                .map_err(WorkspaceError::git(format!(
                    "leave included file {rel} out"
                )))?;
        }
    }
    Ok((index, head))
}

/// Directories that only ever hold what tools produce: caches, installed dependencies, coverage.
const OUTPUT_DIRS: &[&str] = &[
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".tox",
    ".nox",
    "node_modules",
    ".nyc_output",
    "htmlcov",
    ".gradle",
    ".cache",
];

/// A well-known build or cache output: inside one of [`OUTPUT_DIRS`], a compiled Python file,
/// or a coverage data file.
pub(super) fn is_build_output(path: &Path) -> bool {
    let in_output_dir = path
        .components()
        .any(|c| OUTPUT_DIRS.iter().any(|d| c.as_os_str() == *d));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    in_output_dir
        || name.ends_with(".pyc")
        || name.ends_with(".pyo")
        || name == ".coverage"
        || name.starts_with(".coverage.")
}

/// The repository's configured identity, or Whilly's own when none is set.
pub(super) fn signature(repo: &Repository) -> Result<Signature<'static>, WorkspaceError> {
    repo.signature()
        .or_else(|_| Signature::now("Whilly", "whilly@localhost"))
        .map_err(WorkspaceError::git("make a commit signature"))
}

#[cfg(test)]
mod tests {
    use super::is_build_output;
    use std::path::Path;

    #[test]
    fn build_outputs_are_known_by_name() {
        for p in [
            "__pycache__/calc.cpython-311.pyc",
            "pkg/__pycache__/x.pyc",
            "node_modules/left-pad/index.js",
            "web/node_modules/a/b.js",
            ".coverage",
            ".coverage.host.123",
            "mod.pyc",
            ".pytest_cache/v/cache/nodeids",
        ] {
            assert!(is_build_output(Path::new(p)), "{p}");
        }
        for p in [
            "calc.py",
            "src/node_modules.rs",
            "docs/cache.md",
            "coverage.md",
        ] {
            assert!(!is_build_output(Path::new(p)), "{p}");
        }
    }
}
