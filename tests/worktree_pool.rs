//! The worktree pool on real repositories: a pooled worktree handed to the next task carries
//! nothing of the task before (checked with the git CLI), keeps the build caches, stays within
//! its bounds, and one left in an unknown state is dropped, never handed out.

#[path = "support/git.rs"]
mod gitcli;
use gitcli::{git, run_git};

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use whilly::workspace::{MergeMode, WorkspaceConfig, Workspaces};

struct Fixture {
    repo: tempfile::TempDir,
    base: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let repo = tempfile::tempdir().unwrap();
        let base = tempfile::tempdir().unwrap();
        let r = repo.path();
        git(r, &["init", "-q", "-b", "main"]);
        git(r, &["config", "user.name", "Test User"]);
        git(r, &["config", "user.email", "test@example.com"]);
        fs::write(r.join("README.md"), "one\ntwo\n").unwrap();
        fs::write(r.join("lib.txt"), "library\n").unwrap();
        fs::write(r.join(".gitignore"), ".env\ntarget/\n*.log\n").unwrap();
        fs::write(r.join(".env"), "SECRET=operator\n").unwrap();
        git(r, &["add", "README.md", "lib.txt", ".gitignore"]);
        git(r, &["commit", "-q", "-m", "initial"]);
        Fixture { repo, base }
    }

    fn root(&self) -> &Path {
        self.repo.path()
    }

    fn ws(&self, pool: usize, keep_build_cache: bool) -> Workspaces {
        let cfg = WorkspaceConfig {
            base_dir: Some(self.base.path().to_path_buf()),
            include: vec![".env".into()],
            setup_timeout: Duration::from_secs(30),
            merge: MergeMode::Ff,
            pool,
            keep_build_cache,
            ..WorkspaceConfig::default()
        };
        Workspaces::new(self.repo.path(), cfg).unwrap()
    }
}

/// Everything an agent might leave behind in its worktree and the repository's shared state.
fn leave_a_mess(wt: &Path) {
    // A stash on the task branch, then another on a detached HEAD.
    fs::write(wt.join("README.md"), "stashed edit\n").unwrap();
    git(wt, &["stash", "push", "-q", "-m", "agent stash"]);
    // A commit on the branch (the work), then a detached HEAD with a commit of its own.
    fs::write(wt.join("feature.txt"), "feature\n").unwrap();
    git(wt, &["add", "feature.txt"]);
    git(wt, &["commit", "-q", "-m", "the task's work"]);
    git(wt, &["checkout", "-q", "--detach"]);
    fs::write(wt.join("detached.txt"), "detached\n").unwrap();
    git(wt, &["add", "detached.txt"]);
    git(wt, &["commit", "-q", "-m", "a detached commit"]);
    fs::write(wt.join("lib.txt"), "detached stash\n").unwrap();
    git(wt, &["stash", "push", "-q"]);
    // A modified index, an unstaged edit, untracked files and directories.
    fs::write(wt.join("README.md"), "staged edit\n").unwrap();
    git(wt, &["add", "README.md"]);
    fs::write(wt.join("lib.txt"), "unstaged edit\n").unwrap();
    fs::write(wt.join("notes.txt"), "untracked\n").unwrap();
    fs::create_dir_all(wt.join("scratch/deep")).unwrap();
    fs::write(wt.join("scratch/deep/x"), "untracked\n").unwrap();
    // Worktree config, an operation in progress, ignored files: a build cache and others.
    git(wt, &["config", "--worktree", "whilly.leak", "yes"]);
    git(wt, &["bisect", "start"]);
    fs::create_dir_all(wt.join("target/debug")).unwrap();
    fs::write(wt.join("target/debug/cache.bin"), "warm").unwrap();
    fs::write(wt.join("debug.log"), "ignored, not a cache\n").unwrap();
    fs::write(wt.join(".env"), "SECRET=agent-edited\n").unwrap();
}

#[test]
fn a_pooled_worktree_carries_nothing_of_the_task_before() {
    let fx = Fixture::new();
    let root = fx.root();
    // The operator's own stash and a per-worktree config extension they enabled.
    git(root, &["config", "extensions.worktreeConfig", "true"]);
    fs::write(root.join("lib.txt"), "operator's edit\n").unwrap();
    git(root, &["stash", "push", "-q", "-m", "operator stash"]);
    let ws = fx.ws(2, true);
    let base = ws.base_commit().unwrap();

    let a = ws.prepare("plan", "TASK-A", &base).unwrap();
    assert!(!a.pooled && !a.reused);
    let mtime = |p: &Path| fs::metadata(p).unwrap().modified().unwrap();
    let untouched = mtime(&a.path.join(".gitignore"));
    leave_a_mess(&a.path);
    let a_commit = git(&a.path, &["rev-parse", "whilly/plan/TASK-A"]);
    ws.release(&a, true).unwrap();
    assert!(a.path.is_dir(), "kept in the pool");
    let listed = ws.list().unwrap();
    assert!(
        listed
            .iter()
            .any(|w| w.pooled && w.path == a.path && w.task_id.is_none()),
        "{listed:?}"
    );
    let stashes = git(root, &["stash", "list"]);
    assert_eq!(
        stashes.lines().count(),
        1,
        "only the operator's stash is left: {stashes}"
    );
    assert!(stashes.contains("operator stash"), "{stashes}");

    let b = ws.prepare("plan", "TASK-B", &base).unwrap();
    assert!(b.pooled && !b.reused, "{b:?}");
    assert_eq!(b.path, a.path, "the same directory, reused");
    let p = &b.path;
    assert_eq!(
        git(p, &["status", "--porcelain", "--untracked-files=all"]),
        ""
    );
    assert_eq!(
        mtime(&p.join(".gitignore")),
        untouched,
        "a file no task changed is not written again"
    );
    assert_eq!(
        git(p, &["symbolic-ref", "HEAD"]).trim(),
        "refs/heads/whilly/plan/TASK-B"
    );
    assert_eq!(git(p, &["rev-parse", "HEAD"]).trim(), base);
    assert_eq!(
        fs::read_to_string(p.join("README.md")).unwrap(),
        "one\ntwo\n"
    );
    assert_eq!(fs::read_to_string(p.join("lib.txt")).unwrap(), "library\n");
    for gone in [
        "feature.txt",
        "detached.txt",
        "notes.txt",
        "scratch",
        "debug.log",
    ] {
        assert!(!p.join(gone).exists(), "{gone} leaked into the next task");
    }
    assert_eq!(
        fs::read_to_string(p.join(".env")).unwrap(),
        "SECRET=operator\n",
        "include files are copied afresh"
    );
    assert_eq!(
        fs::read_to_string(p.join("target/debug/cache.bin")).unwrap(),
        "warm",
        "the build cache is kept"
    );
    let cfg = run_git(p, &["config", "--get", "whilly.leak"]);
    assert!(!cfg.status.success(), "worktree config leaked");
    let bisect = run_git(p, &["bisect", "log"]);
    assert!(!bisect.status.success(), "the bisect leaked");
    let reflog = git(p, &["reflog", "HEAD"]);
    assert!(
        !reflog.contains("the task's work") && !reflog.contains("detached"),
        "the reflog leaked: {reflog}"
    );
    assert_eq!(git(p, &["stash", "list"]).lines().count(), 1);
    // Task A's work is still on its branch? It was deleted on release (landed), but the commit
    // is an object git keeps.
    assert!(
        run_git(root, &["cat-file", "-e", a_commit.trim()])
            .status
            .success()
    );
}

#[test]
fn without_keep_build_cache_every_ignored_file_goes() {
    let fx = Fixture::new();
    let ws = fx.ws(1, false);
    let base = ws.base_commit().unwrap();
    let a = ws.prepare("plan", "A", &base).unwrap();
    fs::create_dir_all(a.path.join("target")).unwrap();
    fs::write(a.path.join("target/x"), "x").unwrap();
    ws.release(&a, true).unwrap();
    let b = ws.prepare("plan", "B", &base).unwrap();
    assert!(b.pooled);
    assert!(!b.path.join("target").exists());
}

#[test]
fn the_pool_keeps_at_most_its_size_and_a_retry_keeps_its_own() {
    let fx = Fixture::new();
    let ws = fx.ws(1, true);
    let base = ws.base_commit().unwrap();
    let a = ws.prepare("plan", "A", &base).unwrap();
    let b = ws.prepare("plan", "B", &base).unwrap();
    assert_ne!(a.path, b.path);
    // A retry of B finds B's own worktree, ignored files and all.
    fs::write(b.path.join("run.log"), "mine").unwrap();
    let b2 = ws.prepare("plan", "B", &base).unwrap();
    assert!(b2.reused && !b2.pooled && b2.path == b.path);
    assert!(b2.path.join("run.log").exists());

    ws.release(&a, true).unwrap();
    ws.release(&b2, true).unwrap();
    assert!(a.path.is_dir(), "the first fills the pool");
    assert!(!b.path.exists(), "the pool is full: the second is removed");
    let pooled = ws.list().unwrap().into_iter().filter(|w| w.pooled).count();
    assert_eq!(pooled, 1);
}

#[test]
fn a_pooled_worktree_in_an_unknown_state_is_dropped() {
    let fx = Fixture::new();
    let ws = fx.ws(2, true);
    let base = ws.base_commit().unwrap();
    let a = ws.prepare("plan", "A", &base).unwrap();
    let b = ws.prepare("plan", "B", &base).unwrap();
    ws.release(&a, true).unwrap();
    ws.release(&b, true).unwrap();
    // A crash while handing out the most recent one: its `.git` file names an entry that
    // does not exist yet. The other is fine.
    fs::write(
        b.path.join(".git"),
        "gitdir: /nonexistent/.git/worktrees/whilly-x\n",
    )
    .unwrap();
    let c = ws.prepare("plan", "C", &base).unwrap();
    assert!(c.pooled);
    assert_eq!(c.path, a.path, "the consistent one is handed out");
    assert!(!b.path.exists(), "the broken one is dropped");
    assert_eq!(git(&c.path, &["status", "--porcelain"]), "");
    let listed = ws.list().unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
}

#[test]
fn a_pooled_worktree_leaves_its_branch_free() {
    let fx = Fixture::new();
    let ws = fx.ws(2, true);
    let base = ws.base_commit().unwrap();
    let a = ws.prepare("plan", "A", &base).unwrap();
    fs::write(a.path.join("work.txt"), "work\n").unwrap();
    ws.commit(&a, "work").unwrap();
    // Not landed: the branch stays, and it can be checked out elsewhere.
    ws.release(&a, false).unwrap();
    let branch: PathBuf = fx.root().to_path_buf();
    git(&branch, &["checkout", "-q", "whilly/plan/A"]);
    assert!(fx.root().join("work.txt").is_file());
}
