//! Benchmarks behind `whilly bench`: each measures its own baseline in the same run and reports the ratio.

pub mod console;
pub(crate) mod engine;
pub(crate) mod panes;
pub mod pty_drain;
pub(crate) mod queue;
pub(crate) mod sse;
pub mod worktrees;

use anyhow::{Context as _, bail};
use std::path::Path;
use std::process::Command;

/// `git -C repo ARGS…` for the benches' scratch repositories; its stderr in the error.
pub(crate) fn git(repo: &Path, args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .output()
        .with_context(|| format!("cannot run git in {}", repo.display()))?;
    if !out.status.success() {
        bail!(
            "git {} failed in {}: {}",
            args.join(" "),
            repo.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}
