//! Worktree timing (the ignored `bench_prepare_remove_vs_git_cli` in
//! `tests/workspace_worktrees.rs`): our prepare + remove versus the git CLI's bare
//! `git worktree add` + `git worktree remove` on the same repository.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::workspace::{WorkspaceConfig, WorkspaceError, Workspaces};

/// Total time of `n` rounds of `prepare` + `remove` (branch deleted too), in a temporary base
/// directory, without include files or a setup command.
pub fn bench_prepare_remove(repo: &Path, n: usize) -> Result<Duration, WorkspaceError> {
    let base = tempfile::tempdir().map_err(WorkspaceError::io(
        "could not create a temp dir in",
        std::env::temp_dir(),
    ))?;
    let ws = Workspaces::new(
        repo,
        WorkspaceConfig {
            base_dir: Some(base.path().to_path_buf()),
            include: Vec::new(),
            setup_command: None,
            ..WorkspaceConfig::default()
        },
    )?;
    let commit = ws.base_commit()?;
    let start = Instant::now();
    for i in 0..n {
        let wt = ws.prepare("bench", &format!("BENCH-{i}"), &commit)?;
        ws.remove(&wt, true)?;
    }
    Ok(start.elapsed())
}

/// Total time of `n` rounds of `git worktree add -b` + `git worktree remove` + `git branch -D`
/// through the git CLI: the same work as [`bench_prepare_remove`].
pub fn bench_git_cli(repo: &Path, n: usize) -> Result<Duration, WorkspaceError> {
    let base = tempfile::tempdir().map_err(WorkspaceError::io(
        "could not create a temp dir in",
        std::env::temp_dir(),
    ))?;
    let start = Instant::now();
    for i in 0..n {
        let dir = base.path().join(format!("cli-{i}"));
        let branch = format!("whilly-bench-cli-{i}");
        let dir_s = dir.to_string_lossy().into_owned();
        git(
            repo,
            &["worktree", "add", "-q", "-b", &branch, &dir_s, "HEAD"],
        )?;
        git(repo, &["worktree", "remove", "--force", &dir_s])?;
        git(repo, &["branch", "-q", "-D", &branch])?;
    }
    Ok(start.elapsed())
}

fn git(repo: &Path, args: &[&str]) -> Result<(), WorkspaceError> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .output()
        .map_err(WorkspaceError::io("could not run git in", repo))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(WorkspaceError::Io {
            what: "git command failed in",
            path: repo.to_path_buf(),
            source: std::io::Error::other(format!(
                "git {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )),
        })
    }
}
