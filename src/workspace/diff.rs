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
}
