//! Pushing task branches to a real (local bare) remote: an ordinary push, an update of the
//! task's own earlier branch, and a branch someone else committed to, which is never
//! overwritten.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use std::sync::atomic::{AtomicBool, Ordering};
use whilly::workspace::{
    DeliveryFence, MergeMode, PushAuth, TaskMark, WorkspaceConfig, WorkspaceError, Workspaces,
    commit_message, queue_tag,
};

/// The queue's answers for one attempt: its epoch, and whether it still holds the lease.
struct Fence {
    epoch: i64,
    ours: AtomicBool,
}

fn fence(epoch: i64) -> Fence {
    Fence {
        epoch,
        ours: AtomicBool::new(true),
    }
}

const QUEUE: &str = "postgres:test:1";

impl DeliveryFence for Fence {
    fn epoch(&self) -> i64 {
        self.epoch
    }
    fn queue_mark(&self) -> String {
        QUEUE.into()
    }
    fn still_ours(&self) -> Result<bool, String> {
        Ok(self.ours.load(Ordering::SeqCst))
    }
    fn recorded(&self, _epoch: i64) -> Result<bool, String> {
        Ok(false)
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

struct Fixture {
    repo: tempfile::TempDir,
    remote: tempfile::TempDir,
    base: tempfile::TempDir,
}

const PLAN: &str = "gh-o-r";
const TASK: &str = "GH-7";
const BRANCH: &str = "whilly/gh-o-r/GH-7";

impl Fixture {
    fn new() -> Fixture {
        let repo = tempfile::tempdir().unwrap();
        let remote = tempfile::tempdir().unwrap();
        let base = tempfile::tempdir().unwrap();
        git(remote.path(), &["init", "-q", "--bare", "-b", "main"]);
        let r = repo.path();
        git(r, &["init", "-q", "-b", "main"]);
        git(r, &["config", "user.name", "Test User"]);
        git(r, &["config", "user.email", "test@example.com"]);
        fs::write(r.join("README.md"), "hello\n").unwrap();
        git(r, &["add", "README.md"]);
        git(r, &["commit", "-q", "-m", "initial"]);
        git(
            r,
            &["remote", "add", "origin", remote.path().to_str().unwrap()],
        );
        git(r, &["push", "-q", "origin", "main"]);
        Fixture { repo, remote, base }
    }

    fn ws(&self) -> Workspaces {
        let cfg = WorkspaceConfig {
            base_dir: Some(self.base.path().to_path_buf()),
            include: vec![],
            setup_command: None,
            setup_timeout: Duration::from_secs(30),
            merge: MergeMode::None,
            ..WorkspaceConfig::default()
        };
        Workspaces::new(self.repo.path(), cfg).unwrap()
    }

    /// A commit of the task on its branch (made from main), as an attempt makes it.
    fn task_commit(&self, file: &str, attempt: u32) -> String {
        self.marked_commit(file, attempt, None)
    }

    /// A task commit carrying the mark of the attempt at `epoch`, as delivery writes it.
    fn marked_commit(&self, file: &str, attempt: u32, epoch: Option<i64>) -> String {
        let r = self.repo.path();
        git(r, &["checkout", "-q", "-B", BRANCH, "main"]);
        fs::write(r.join(file), format!("attempt {attempt}\n")).unwrap();
        git(r, &["add", file]);
        let mut msg = commit_message(TASK, "Fix the export", PLAN, attempt);
        if let Some(epoch) = epoch {
            msg = TaskMark {
                plan_id: PLAN.into(),
                task_id: TASK.into(),
                epoch,
                queue: queue_tag(QUEUE),
            }
            .stamp(&msg);
        }
        git(r, &["commit", "-q", "-m", &msg]);
        let tip = git(r, &["rev-parse", "HEAD"]);
        git(r, &["checkout", "-q", "main"]);
        tip
    }

    fn remote_tip(&self, branch: &str) -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(self.remote.path())
            .args(["rev-parse", "--verify", "-q", branch])
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    fn clone_dir(&self) -> PathBuf {
        let dir = self.base.path().join("someone-else");
        git(
            self.base.path(),
            &[
                "clone",
                "-q",
                self.remote.path().to_str().unwrap(),
                dir.to_str().unwrap(),
            ],
        );
        git(&dir, &["config", "user.name", "Someone Else"]);
        git(&dir, &["config", "user.email", "else@example.com"]);
        dir
    }
}

#[test]
fn a_first_push_creates_the_branch_and_a_second_changes_nothing() {
    let f = Fixture::new();
    let tip = f.task_commit("a.txt", 1);
    let ws = f.ws();
    let p = ws
        .push_branch(
            "origin",
            BRANCH,
            PLAN,
            TASK,
            &fence(1),
            &PushAuth::default(),
        )
        .unwrap();
    assert_eq!(p.branch, BRANCH);
    assert_eq!(p.commit, tip);
    assert!(!p.unchanged && !p.replaced_own);
    assert_eq!(f.remote_tip(BRANCH).as_deref(), Some(tip.as_str()));
    let again = ws
        .push_branch(
            "origin",
            BRANCH,
            PLAN,
            TASK,
            &fence(1),
            &PushAuth::default(),
        )
        .unwrap();
    assert!(again.unchanged, "{again:?}");
}

#[test]
fn a_retry_replaces_its_own_earlier_branch() {
    let f = Fixture::new();
    let first = f.task_commit("a.txt", 1);
    let ws = f.ws();
    ws.push_branch(
        "origin",
        BRANCH,
        PLAN,
        TASK,
        &fence(1),
        &PushAuth::default(),
    )
    .unwrap();
    // The second attempt starts again from main: its branch does not contain the first.
    let second = f.task_commit("b.txt", 2);
    assert_ne!(first, second);
    let p = ws
        .push_branch(
            "origin",
            BRANCH,
            PLAN,
            TASK,
            &fence(1),
            &PushAuth::default(),
        )
        .unwrap();
    assert_eq!(p.branch, BRANCH);
    assert!(p.replaced_own, "{p:?}");
    assert_eq!(f.remote_tip(BRANCH).as_deref(), Some(second.as_str()));
}

#[test]
fn someone_elses_commits_are_never_pushed_over() {
    let f = Fixture::new();
    f.task_commit("a.txt", 1);
    let ws = f.ws();
    ws.push_branch(
        "origin",
        BRANCH,
        PLAN,
        TASK,
        &fence(1),
        &PushAuth::default(),
    )
    .unwrap();
    // A reviewer adds a commit to the task's branch on the remote.
    let other = f.clone_dir();
    git(&other, &["checkout", "-q", BRANCH]);
    fs::write(other.join("review.txt"), "a reviewer's fix\n").unwrap();
    git(&other, &["add", "review.txt"]);
    git(
        &other,
        &["commit", "-q", "-m", "review: tighten the export"],
    );
    git(&other, &["push", "-q", "origin", BRANCH]);
    let theirs = f.remote_tip(BRANCH).unwrap();

    let retry = f.task_commit("c.txt", 2);
    let p = ws
        .push_branch(
            "origin",
            BRANCH,
            PLAN,
            TASK,
            &fence(1),
            &PushAuth::default(),
        )
        .unwrap();
    assert_eq!(p.branch, format!("{BRANCH}-try2"));
    assert_eq!(
        f.remote_tip(BRANCH).as_deref(),
        Some(theirs.as_str()),
        "the reviewer's commit is still there"
    );
    assert_eq!(
        f.remote_tip(&format!("{BRANCH}-try2")).as_deref(),
        Some(retry.as_str())
    );
    // No probe refs are left behind in the operator's clone.
    let refs = git(f.repo.path(), &["for-each-ref", "refs/whilly"]);
    assert!(refs.is_empty(), "{refs}");
}

#[test]
fn a_missing_remote_is_an_error_naming_it() {
    let f = Fixture::new();
    f.task_commit("a.txt", 1);
    let e = f
        .ws()
        .push_branch(
            "upstream",
            BRANCH,
            PLAN,
            TASK,
            &fence(1),
            &PushAuth::default(),
        )
        .unwrap_err();
    assert!(e.to_string().contains("upstream"), "{e}");
}

/// Worker A, frozen between its commit and its push, wakes after B took the task over (a
/// higher epoch) and pushed: A's push is refused and B's branch stays.
#[test]
fn a_stale_attempt_never_pushes_over_a_newer_ones_branch() {
    let f = Fixture::new();
    let ws = f.ws();
    let newer = f.marked_commit("b.txt", 2, Some(2));
    ws.push_branch(
        "origin",
        BRANCH,
        PLAN,
        TASK,
        &fence(2),
        &PushAuth::default(),
    )
    .unwrap();
    f.marked_commit("a.txt", 1, Some(1));
    // A still believes it holds the lease (it checked before it froze).
    let e = ws
        .push_branch(
            "origin",
            BRANCH,
            PLAN,
            TASK,
            &fence(1),
            &PushAuth::default(),
        )
        .unwrap_err();
    assert!(matches!(e, WorkspaceError::Superseded { .. }), "{e}");
    assert!(e.to_string().contains("newer attempt"), "{e}");
    assert_eq!(f.remote_tip(BRANCH).as_deref(), Some(newer.as_str()));
    // The newer attempt replaces an older one's branch as before.
    let f = Fixture::new();
    let ws = f.ws();
    f.marked_commit("a.txt", 1, Some(1));
    ws.push_branch(
        "origin",
        BRANCH,
        PLAN,
        TASK,
        &fence(1),
        &PushAuth::default(),
    )
    .unwrap();
    let newer = f.marked_commit("b.txt", 2, Some(2));
    let p = ws
        .push_branch(
            "origin",
            BRANCH,
            PLAN,
            TASK,
            &fence(2),
            &PushAuth::default(),
        )
        .unwrap();
    assert!(p.replaced_own, "{p:?}");
    assert_eq!(f.remote_tip(BRANCH).as_deref(), Some(newer.as_str()));
}

/// A lease lost before the push: nothing reaches the remote.
#[test]
fn an_attempt_without_its_lease_pushes_nothing() {
    let f = Fixture::new();
    f.marked_commit("a.txt", 1, Some(1));
    let lost = fence(1);
    lost.ours.store(false, Ordering::SeqCst);
    let e = f
        .ws()
        .push_branch("origin", BRANCH, PLAN, TASK, &lost, &PushAuth::default())
        .unwrap_err();
    assert!(matches!(e, WorkspaceError::Superseded { .. }), "{e}");
    assert_eq!(f.remote_tip(BRANCH), None);
}
