//! How worktrees are made and delivered.

use std::path::PathBuf;
use std::time::Duration;

/// How a finished task's commits get back into the base branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MergeMode {
    /// Fast-forward the base branch to the task branch; if the base moved meanwhile, replay the
    /// task's commits onto the new base (a rebase done with cherry-picks) and move the base there.
    #[default]
    Ff,
    /// Always replay the task's commits onto the base branch as new commits.
    CherryPick,
    /// Leave the task branch alone (for a pull request or a human).
    None,
}

/// Settings of [`super::Workspaces`].
#[derive(Debug, Clone, PartialEq)]
pub struct WorkspaceConfig {
    /// Directory holding `<repo>-<hash>/<plan>/<task>` worktrees. `None`: the user's data
    /// directory (`~/.local/share/whilly/worktrees` on Linux). A relative path is taken relative
    /// to the repository root.
    pub base_dir: Option<PathBuf>,
    /// Glob-ish patterns (relative to the repository root) of untracked or ignored files copied
    /// into each worktree, e.g. `.env`, `config/*.local.toml`, `**/.env`.
    pub include: Vec<String>,
    /// Run with `sh -c` in each fresh worktree, after the include files are copied.
    pub setup_command: Option<String>,
    pub setup_timeout: Duration,
    pub merge: MergeMode,
    /// How long [`super::Workspaces::deliver`] waits for another process's merge to finish.
    pub merge_lock_timeout: Duration,
    /// `merge` lands on this remote's base branch (clones sharing one queue share it there);
    /// `None`: on this clone's base branch only.
    pub shared_base: Option<super::SharedBase>,
    /// How many finished worktrees are kept for reuse by later tasks (see [`super::pool`]);
    /// 0: every task gets a fresh checkout and it is removed when the task ends.
    pub pool: usize,
    /// When a pooled worktree is reused, keep the ignored directories named in `cache_dirs`
    /// (build outputs), so the next task's checks build incrementally.
    pub keep_build_cache: bool,
    /// Names of ignored directories that hold build outputs (`target`, `node_modules`, …),
    /// matched at any depth.
    pub cache_dirs: Vec<String>,
    /// Pooling stops while this repository's worktrees take more bytes than this.
    pub max_disk: Option<u64>,
}

/// Ignored directories that hold build outputs in the common toolchains.
pub const DEFAULT_CACHE_DIRS: &[&str] = &[
    "target",
    "node_modules",
    ".venv",
    "venv",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".tox",
    ".gradle",
    "build",
    "dist",
    ".next",
    ".turbo",
    ".cache",
    "zig-cache",
    ".zig-cache",
    "_build",
    "deps",
    ".stack-work",
    "dist-newstyle",
];

impl Default for WorkspaceConfig {
    fn default() -> Self {
        WorkspaceConfig {
            base_dir: None,
            include: vec![".env".into(), ".env.local".into()],
            setup_command: None,
            setup_timeout: Duration::from_secs(600),
            merge: MergeMode::Ff,
            merge_lock_timeout: Duration::from_secs(120),
            shared_base: None,
            pool: 0,
            keep_build_cache: true,
            cache_dirs: DEFAULT_CACHE_DIRS.iter().map(|s| s.to_string()).collect(),
            max_disk: None,
        }
    }
}
