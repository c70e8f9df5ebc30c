//! What a task changed in its worktree, against the commit it started from: the operator reads it
//! before approving a handoff or a held task. Committed, staged, unstaged and untracked changes
//! all count, because a human working a handoff rarely commits.

use super::error::WorkspaceError;
use git2::{DiffFormat, DiffOptions, Oid, Repository};
use std::path::Path;

/// A worktree's changes as a patch, with its size in files and lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorktreeDiff {
    pub files: usize,
    pub insertions: usize,
    pub deletions: usize,
    /// Unified diff text, cut at the byte limit the caller gave.
    pub patch: String,
    /// True when `patch` was cut.
    pub truncated: bool,
}

/// The changes in the worktree at `path` since `base_commit`, the patch cut after `max_bytes`.
pub fn diff_worktree(
    path: &Path,
    base_commit: &str,
    max_bytes: usize,
) -> Result<WorktreeDiff, WorkspaceError> {
    let repo = Repository::open(path).map_err(|_| WorkspaceError::NotARepository {
        path: path.to_path_buf(),
    })?;
    let oid = Oid::from_str(base_commit).map_err(|e| WorkspaceError::BadBaseCommit {
        commit: base_commit.to_string(),
        reason: e.message().to_string(),
    })?;
    let base = repo.find_commit(oid).and_then(|c| c.tree()).map_err(|e| {
        WorkspaceError::BadBaseCommit {
            commit: base_commit.to_string(),
            reason: e.message().to_string(),
        }
    })?;
    let mut opts = DiffOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .show_untracked_content(true);
    let diff = repo
        .diff_tree_to_workdir_with_index(Some(&base), Some(&mut opts))
        .map_err(WorkspaceError::git("diffing the worktree"))?;
    render(&diff, max_bytes)
}

/// Which side of a task's work a diff shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiffSource {
    /// The task's worktree (committed or not) against the commit it started from.
    Worktree(std::path::PathBuf),
    /// The task's branch against where it forked from the repository's HEAD.
    Branch(String),
    /// The commit that landed the work, against its first parent.
    Landed(String),
}

/// What a task changed, from the first of its worktree, its branch, or the commit that landed
/// it that still exists: the diff view works on running, parked and finished tasks alike.
pub fn diff_task(
    repo_root: &Path,
    worktree: Option<(&Path, &str)>,
    branch: &str,
    landed_commit: Option<&str>,
    max_bytes: usize,
) -> Result<(DiffSource, WorktreeDiff), WorkspaceError> {
    if let Some((path, base)) = worktree {
        let d = diff_worktree(path, base, max_bytes)?;
        return Ok((DiffSource::Worktree(path.to_path_buf()), d));
    }
    let repo = Repository::open(repo_root).map_err(|_| WorkspaceError::NotARepository {
        path: repo_root.to_path_buf(),
    })?;
    if let Ok(tip) = repo
        .find_branch(branch, git2::BranchType::Local)
        .and_then(|b| b.get().peel_to_commit())
    {
        let head = repo
            .head()
            .and_then(|h| h.peel_to_commit())
            .map_err(WorkspaceError::git("reading HEAD"))?;
        let fork = repo
            .merge_base(head.id(), tip.id())
            .and_then(|o| repo.find_commit(o))
            .map_err(WorkspaceError::git("finding where the branch forked"))?;
        let diff = tree_diff(&repo, &fork, &tip)?;
        return Ok((
            DiffSource::Branch(branch.to_string()),
            render(&diff, max_bytes)?,
        ));
    }
    if let Some(commit) = landed_commit {
        let c = Oid::from_str(commit)
            .and_then(|o| repo.find_commit(o))
            .map_err(|e| WorkspaceError::BadBaseCommit {
                commit: commit.to_string(),
                reason: e.message().to_string(),
            })?;
        let parent = c
            .parent(0)
            .map_err(WorkspaceError::git("reading the landed commit's parent"))?;
        let diff = tree_diff(&repo, &parent, &c)?;
        return Ok((
            DiffSource::Landed(commit.to_string()),
            render(&diff, max_bytes)?,
        ));
    }
    Err(WorkspaceError::NothingToDiff {
        branch: branch.to_string(),
    })
}

fn tree_diff<'r>(
    repo: &'r Repository,
    from: &git2::Commit,
    to: &git2::Commit,
) -> Result<git2::Diff<'r>, WorkspaceError> {
    let (a, b) = (
        from.tree().map_err(WorkspaceError::git("reading a tree"))?,
        to.tree().map_err(WorkspaceError::git("reading a tree"))?,
    );
    repo.diff_tree_to_tree(Some(&a), Some(&b), None)
        .map_err(WorkspaceError::git("diffing two commits"))
}

/// A diff as a patch with its size, cut after `max_bytes`.
fn render(diff: &git2::Diff, max_bytes: usize) -> Result<WorktreeDiff, WorkspaceError> {
    let stats = diff
        .stats()
        .map_err(WorkspaceError::git("counting the worktree's changes"))?;
    let mut out = WorktreeDiff {
        files: stats.files_changed(),
        insertions: stats.insertions(),
        deletions: stats.deletions(),
        ..WorktreeDiff::default()
    };
    diff.print(DiffFormat::Patch, |_, _, line| {
        if out.patch.len() >= max_bytes {
            out.truncated = true;
            return false;
        }
        let text = String::from_utf8_lossy(line.content());
        if let c @ ('+' | '-' | ' ') = line.origin() {
            out.patch.push(c);
        }
        out.patch.push_str(&text);
        true
    })
    .or_else(|e| {
        // Stopping the walk at the limit reports as a user error; that is not a failure.
        if out.truncated { Ok(()) } else { Err(e) }
    })
    .map_err(WorkspaceError::git("printing the worktree's diff"))?;
    if out.patch.len() > max_bytes {
        let mut cut = max_bytes;
        while !out.patch.is_char_boundary(cut) {
            cut -= 1;
        }
        out.patch.truncate(cut);
        out.truncated = true;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }

    fn head(dir: &Path) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["rev-parse", "HEAD"])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    #[test]
    fn committed_modified_and_untracked_changes_all_show() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        git(dir, &["init", "-q"]);
        std::fs::write(dir.join("a.txt"), "one\ntwo\n").unwrap();
        git(dir, &["add", "."]);
        git(dir, &["commit", "-qm", "base"]);
        let base = head(dir);
        std::fs::write(dir.join("b.txt"), "committed\n").unwrap();
        git(dir, &["add", "."]);
        git(dir, &["commit", "-qm", "work"]);
        std::fs::write(dir.join("a.txt"), "one\nTWO\n").unwrap();
        std::fs::create_dir(dir.join("new")).unwrap();
        std::fs::write(dir.join("new/c.txt"), "untracked\n").unwrap();

        let d = diff_worktree(dir, &base, 1 << 20).unwrap();
        assert_eq!(d.files, 3, "{}", d.patch);
        assert_eq!((d.insertions, d.deletions), (3, 1));
        assert!(d.patch.contains("+TWO"), "{}", d.patch);
        assert!(d.patch.contains("-two"), "{}", d.patch);
        assert!(d.patch.contains("+committed"), "{}", d.patch);
        assert!(d.patch.contains("+untracked"), "{}", d.patch);
        assert!(!d.truncated);

        let small = diff_worktree(dir, &base, 40).unwrap();
        assert!(small.truncated);
        assert!(small.patch.len() <= 40);
        assert_eq!(small.files, 3);
    }

    #[test]
    fn a_bad_base_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        git(tmp.path(), &["init", "-q"]);
        let err = diff_worktree(tmp.path(), "not-a-sha", 100).unwrap_err();
        assert!(err.to_string().contains("not-a-sha"), "{err}");
        let err = diff_worktree(&tmp.path().join("nope"), "abc", 100).unwrap_err();
        assert!(err.to_string().contains("not a git repository"), "{err}");
    }

    #[test]
    fn a_task_without_worktree_shows_its_branch_then_its_landed_commit() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        git(dir, &["init", "-q", "-b", "main"]);
        std::fs::write(dir.join("a.txt"), "one\n").unwrap();
        git(dir, &["add", "."]);
        git(dir, &["commit", "-qm", "base"]);
        git(dir, &["checkout", "-qb", "whilly/p/T-1"]);
        std::fs::write(dir.join("a.txt"), "one\ntwo\n").unwrap();
        git(dir, &["commit", "-qam", "task work"]);
        let landed = head(dir);
        git(dir, &["checkout", "-q", "main"]);
        // The branch is still there: its changes against where it forked.
        let (source, d) = diff_task(dir, None, "whilly/p/T-1", None, 1 << 20).unwrap();
        assert_eq!(source, DiffSource::Branch("whilly/p/T-1".into()));
        assert_eq!((d.files, d.insertions, d.deletions), (1, 1, 0));
        assert!(d.patch.contains("+two"), "{}", d.patch);
        // Landed and cleaned up: the commit that landed it.
        git(dir, &["merge", "-q", "--ff-only", "whilly/p/T-1"]);
        git(dir, &["branch", "-qD", "whilly/p/T-1"]);
        let (source, d) = diff_task(dir, None, "whilly/p/T-1", Some(&landed), 1 << 20).unwrap();
        assert_eq!(source, DiffSource::Landed(landed.clone()));
        assert!(d.patch.contains("+two"), "{}", d.patch);
        // Nothing left: a clear error, not an empty diff.
        let e = diff_task(dir, None, "whilly/p/T-1", None, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("nothing is left to show"), "{e}");
    }
}
