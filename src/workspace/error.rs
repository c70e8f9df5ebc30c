//! What can go wrong with worktrees, each error saying what to do about it.

use std::path::PathBuf;
use std::time::Duration;

/// Errors of the workspace module. Outcomes a caller is expected to handle (a merge conflict, a
/// dirty base working tree) are not errors: they are [`super::Delivery`] variants.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error(
        "{path} is not a git repository: run `git init` there, or run whilly from the repository"
    )]
    NotARepository { path: PathBuf },
    #[error(
        "{path} is a bare repository: whilly needs a repository with a working tree (clone it without --bare)"
    )]
    BareRepository { path: PathBuf },
    #[error(
        "repository {path} has no commits yet: make an initial commit (e.g. `git commit --allow-empty -m init`)"
    )]
    NoCommits { path: PathBuf },
    #[error(
        "base commit {commit:?} is not a commit of this repository ({reason}): pass a commit id from `base_commit()`"
    )]
    BadBaseCommit { commit: String, reason: String },
    #[error(
        "nothing is left to show: no worktree, no branch {branch} and no landed commit (the work may have been cleaned up)"
    )]
    NothingToDiff { branch: String },
    #[error(
        "could not find the user's data directory (is $HOME set?): set the worktrees directory in the config"
    )]
    NoDataDir,
    #[error(
        "the task branch {branch} is gone (deleted or pruned): send the task back to run it again"
    )]
    NoTaskBranch { branch: String },
    #[error("invalid include pattern {pattern:?}: {reason}")]
    BadInclude { pattern: String, reason: String },
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("git: {context}: {source}")]
    Git {
        context: String,
        #[source]
        source: git2::Error,
    },
    #[error("setup command `{command}` failed ({status}) in {dir}; its output:\n{output}")]
    SetupFailed {
        command: String,
        status: String,
        dir: PathBuf,
        output: String,
    },
    #[error(
        "setup command `{command}` did not finish within {timeout:?} in {dir} and was killed; its output so far:\n{output}"
    )]
    SetupTimedOut {
        command: String,
        timeout: Duration,
        dir: PathBuf,
        output: String,
    },
    #[error(
        "HEAD of {path} is detached, so there is no base branch to merge into: check out a branch, or use merge mode `none`"
    )]
    DetachedBase { path: PathBuf },
    #[error(
        "branch {branch} is already checked out in {path}, which is not whilly's worktree for this task: remove that worktree (`git worktree remove {path}`) or switch it to another branch"
    )]
    BranchCheckedOut { branch: String, path: PathBuf },
    #[error(
        "base branch {branch} moved while whilly was merging into it (someone committed meanwhile): deliver again"
    )]
    BaseMoved { branch: String },
    #[error(
        "could not take the {what} lock {path} within {waited:?}: another whilly process holds it; if none is running, try again"
    )]
    LockTimeout {
        what: &'static str,
        path: PathBuf,
        waited: Duration,
    },
    #[error("not pushing {branch}: {detail}; the task is another attempt's now")]
    Superseded { branch: String, detail: String },
    #[error("the queue did not answer whether this attempt may still deliver: {detail}")]
    FenceUnanswered { detail: String },
    #[error(
        "an earlier agent (process group {pgid}, pids {pids:?}) still runs in {path}; the task is tried again once it has ended"
    )]
    StillOccupied {
        path: PathBuf,
        pgid: i32,
        pids: Vec<i32>,
    },
    #[error(
        "the task starts from {task}'s unmerged work on {branch}, which cannot be had: {detail}; push that branch again (`whilly forge --compose {task}`) or merge it"
    )]
    StackUnavailable {
        task: String,
        branch: String,
        detail: String,
    },
    #[error(
        "the unmerged work of {ours} and of {theirs}, which this task depends on, conflict (in {}): merge one of their pull requests first, then send this task back", files.join(", ")
    )]
    StackConflict {
        ours: String,
        theirs: String,
        files: Vec<String>,
    },
}

impl WorkspaceError {
    /// A fault that may pass if the attempt is tried again: a lock another process held too
    /// long, an I/O error, a git lock file left by a concurrent writer. Conflicts with the
    /// repository's state (a branch checked out elsewhere, a bad base commit) are not.
    pub fn is_transient(&self) -> bool {
        match self {
            WorkspaceError::LockTimeout { .. }
            | WorkspaceError::Io { .. }
            | WorkspaceError::FenceUnanswered { .. }
            | WorkspaceError::StillOccupied { .. }
            // A fetch of a dependency's branch may fail for the network's sake.
            | WorkspaceError::StackUnavailable { .. } => true,
            WorkspaceError::Git { source, .. } => matches!(
                source.code(),
                git2::ErrorCode::Locked | git2::ErrorCode::Modified | git2::ErrorCode::Exists
            ),
            _ => false,
        }
    }

    /// Whether the system ran out of descriptors, processes or memory (see
    /// [`crate::domain::resources`]): nothing the task did.
    pub fn lack_of_resources(&self) -> bool {
        use crate::domain::resources::{is_resource_io, is_resource_text};
        match self {
            WorkspaceError::Io { source, .. } => is_resource_io(source),
            WorkspaceError::Git { source, .. } => is_resource_text(source.message()),
            other => is_resource_text(&other.to_string()),
        }
    }

    pub(crate) fn git(context: impl Into<String>) -> impl FnOnce(git2::Error) -> WorkspaceError {
        let context = context.into();
        move |source| WorkspaceError::Git { context, source }
    }

    pub(crate) fn io(
        what: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> WorkspaceError {
        let path = path.into();
        move |source| WorkspaceError::Io { what, path, source }
    }
}
