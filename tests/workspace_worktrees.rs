//! Worktrees on real repositories in temp dirs, checked against the git CLI.

#[path = "support/git.rs"]
mod gitcli;
use gitcli::git;

use std::collections::HashSet;
use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use whilly::bench::worktrees::{bench_git_cli, bench_prepare_remove};
use whilly::workspace::{
    Delivery, MergeMode, PruneSelection, WorkspaceConfig, WorkspaceError, Workspaces,
    commit_message,
};

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
        fs::write(r.join("README.md"), "line one\nline two\nline three\n").unwrap();
        fs::write(r.join(".gitignore"), ".env\ntarget/\n").unwrap();
        fs::write(r.join(".env"), "SECRET=1\n").unwrap();
        git(r, &["add", "README.md", ".gitignore"]);
        git(r, &["commit", "-q", "-m", "initial"]);
        Fixture { repo, base }
    }

    fn root(&self) -> PathBuf {
        self.repo.path().canonicalize().unwrap()
    }

    fn cfg(&self) -> WorkspaceConfig {
        WorkspaceConfig {
            base_dir: Some(self.base.path().to_path_buf()),
            include: vec![".env".into()],
            setup_command: None,
            setup_timeout: Duration::from_secs(30),
            merge: MergeMode::Ff,
            ..WorkspaceConfig::default()
        }
    }

    fn ws(&self) -> Workspaces {
        Workspaces::new(self.repo.path(), self.cfg()).unwrap()
    }

    fn head(&self) -> String {
        git(self.repo.path(), &["rev-parse", "main"])
            .trim()
            .to_string()
    }

    fn status(&self) -> String {
        git(self.repo.path(), &["status", "--porcelain"])
    }
}

#[test]
fn ff_merge_lands_in_the_base_branch_and_its_working_tree() {
    let fx = Fixture::new();
    let ws = fx.ws();
    let base = ws.base_commit().unwrap();
    assert_eq!(base, fx.head());
    let wt = ws.prepare("plan-a", "TASK-001", &base).unwrap();
    assert_eq!(wt.branch, "whilly/plan-a/TASK-001");
    assert!(!wt.reused);
    assert!(wt.path.join("README.md").is_file());
    fs::create_dir_all(wt.path.join("src")).unwrap();
    fs::write(wt.path.join("src/new.rs"), "fn main() {}\n").unwrap();
    fs::write(wt.path.join(".hidden"), "dotfile\n").unwrap();
    fs::write(
        wt.path.join("README.md"),
        "line one\nline two changed\nline three\n",
    )
    .unwrap();
    fs::create_dir_all(wt.path.join("target")).unwrap();
    fs::write(wt.path.join("target/junk"), "ignored").unwrap();

    let msg = commit_message("TASK-001", "Add the thing\nwith details", "plan-a", 1);
    let commit = ws.commit(&wt, &msg).unwrap().expect("a commit");
    let files = git(&wt.path, &["show", "--name-only", "--format=", &commit]);
    assert!(
        files.contains("src/new.rs") && files.contains(".hidden") && files.contains("README.md"),
        "{files}"
    );
    assert!(
        !files.contains("target/junk") && !files.contains(".env"),
        "{files}"
    );
    let author = git(
        &wt.path,
        &["log", "-1", "--format=%an <%ae>|%cn|%B", &commit],
    );
    assert!(
        author
            .starts_with("Test User <test@example.com>|Test User|whilly: TASK-001 — Add the thing"),
        "{author}"
    );
    assert!(author.contains("Plan: plan-a\nAttempt: 1"), "{author}");

    let delivery = ws.deliver(&wt, MergeMode::Ff).unwrap();
    assert_eq!(
        delivery,
        Delivery::FastForwarded {
            base_branch: "main".into(),
            commit: commit.clone()
        }
    );
    assert_eq!(fx.head(), commit);
    let root = fx.root();
    assert_eq!(
        fs::read_to_string(root.join("src/new.rs")).unwrap(),
        "fn main() {}\n"
    );
    assert!(
        fs::read_to_string(root.join("README.md"))
            .unwrap()
            .contains("two changed")
    );
    assert_eq!(fx.status(), "", "main working tree and index are clean");

    ws.remove(&wt, true).unwrap();
    assert!(!wt.path.exists());
    assert!(!git(&root, &["worktree", "list"]).contains(&wt.path.to_string_lossy().to_string()));
    assert!(!git(&root, &["branch", "--list", "whilly/*"]).contains("TASK-001"));
    assert!(
        !root.join(".git/worktrees").join(&wt.name).exists(),
        "admin dir removed"
    );
}

#[test]
fn two_tasks_on_different_files_both_merge() {
    let fx = Fixture::new();
    let ws = fx.ws();
    let base = ws.base_commit().unwrap();
    let a = ws.prepare("p", "A", &base).unwrap();
    let b = ws.prepare("p", "B", &base).unwrap();
    fs::write(a.path.join("a.txt"), "a\n").unwrap();
    fs::write(b.path.join("b.txt"), "b\n").unwrap();
    fs::write(
        b.path.join("README.md"),
        "line one\nline two\nline three\nline four\n",
    )
    .unwrap();
    ws.commit(&a, "A").unwrap().unwrap();
    ws.commit(&b, "B").unwrap().unwrap();
    assert!(matches!(
        ws.deliver(&a, MergeMode::Ff).unwrap(),
        Delivery::FastForwarded { .. }
    ));
    match ws.deliver(&b, MergeMode::Ff).unwrap() {
        Delivery::Merged {
            commit, commits, ..
        } => {
            assert_eq!(commits, 1);
            assert_eq!(fx.head(), commit);
        }
        other => panic!("expected a cherry-picked merge, got {other:?}"),
    }
    let root = fx.root();
    assert!(root.join("a.txt").is_file() && root.join("b.txt").is_file());
    assert!(
        fs::read_to_string(root.join("README.md"))
            .unwrap()
            .contains("line four")
    );
    assert_eq!(fx.status(), "");
    // History is linear: A then B on top, no merge commits.
    let log = git(&root, &["log", "--format=%s|%P", "main"]);
    assert!(
        log.lines()
            .all(|l| l.split('|').nth(1).is_some_and(|p| !p.contains(' '))),
        "{log}"
    );
    assert_eq!(log.lines().next().unwrap().split('|').next(), Some("B"));
    // Delivering again finds nothing new.
    assert_eq!(
        ws.deliver(&a, MergeMode::Ff).unwrap(),
        Delivery::NothingToDo
    );
}

#[test]
fn conflicting_tasks_report_the_file_and_leave_the_base_alone() {
    let fx = Fixture::new();
    let ws = fx.ws();
    let base = ws.base_commit().unwrap();
    let a = ws.prepare("p", "A", &base).unwrap();
    let b = ws.prepare("p", "B", &base).unwrap();
    fs::write(a.path.join("README.md"), "line one\nA's line\nline three\n").unwrap();
    fs::write(b.path.join("README.md"), "line one\nB's line\nline three\n").unwrap();
    fs::write(b.path.join("other.txt"), "fine\n").unwrap();
    ws.commit(&a, "A").unwrap().unwrap();
    ws.commit(&b, "B").unwrap().unwrap();
    ws.deliver(&a, MergeMode::CherryPick).unwrap();
    let before = fx.head();
    let readme_before = fs::read_to_string(fx.root().join("README.md")).unwrap();
    match ws.deliver(&b, MergeMode::Ff).unwrap() {
        Delivery::Conflict { branch, files } => {
            assert_eq!(branch, b.branch);
            assert_eq!(files, vec!["README.md".to_string()]);
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(fx.head(), before);
    assert_eq!(
        fs::read_to_string(fx.root().join("README.md")).unwrap(),
        readme_before
    );
    assert!(!fx.root().join("other.txt").exists());
    assert_eq!(fx.status(), "");
    // The branch is still there for review.
    assert!(git(&fx.root(), &["branch", "--list", &b.branch]).contains(&b.branch));
}

#[test]
fn a_dirty_base_file_blocks_only_when_the_task_touches_it() {
    let fx = Fixture::new();
    let ws = fx.ws();
    let root = fx.root();
    let base = ws.base_commit().unwrap();
    let a = ws.prepare("p", "A", &base).unwrap();
    fs::write(a.path.join("README.md"), "changed by the task\n").unwrap();
    ws.commit(&a, "A").unwrap().unwrap();
    fs::write(root.join("README.md"), "user's unsaved work\n").unwrap();
    match ws.deliver(&a, MergeMode::Ff).unwrap() {
        Delivery::BaseDirty {
            files,
            base_branch,
            worktree,
            ..
        } => {
            assert_eq!(files, vec!["README.md".to_string()]);
            assert_eq!(base_branch, "main");
            assert_eq!(worktree.canonicalize().unwrap(), root);
        }
        other => panic!("expected BaseDirty, got {other:?}"),
    }
    assert_eq!(fx.head(), base);
    assert_eq!(
        fs::read_to_string(root.join("README.md")).unwrap(),
        "user's unsaved work\n"
    );

    // An untracked file where the task adds one also blocks.
    let b = ws.prepare("p", "B", &base).unwrap();
    fs::write(b.path.join("new.txt"), "task\n").unwrap();
    ws.commit(&b, "B").unwrap().unwrap();
    fs::write(root.join("new.txt"), "user's\n").unwrap();
    assert!(matches!(
        ws.deliver(&b, MergeMode::Ff).unwrap(),
        Delivery::BaseDirty { .. }
    ));
    fs::remove_file(root.join("new.txt")).unwrap();

    // Unrelated dirty files do not block, and stay as they are.
    match ws.deliver(&b, MergeMode::Ff).unwrap() {
        Delivery::FastForwarded { .. } => {}
        other => panic!("expected a fast-forward, got {other:?}"),
    }
    assert_eq!(fs::read_to_string(root.join("new.txt")).unwrap(), "task\n");
    assert_eq!(
        fs::read_to_string(root.join("README.md")).unwrap(),
        "user's unsaved work\n"
    );
    assert_eq!(fx.status(), " M README.md\n");
}

#[test]
fn base_not_checked_out_moves_only_the_ref() {
    let fx = Fixture::new();
    let ws = fx.ws();
    let base = ws.base_commit().unwrap();
    let a = ws.prepare("p", "A", &base).unwrap();
    fs::write(a.path.join("a.txt"), "a\n").unwrap();
    let c = ws.commit(&a, "A").unwrap().unwrap();
    git(&fx.root(), &["checkout", "-q", "-b", "elsewhere"]);
    assert!(matches!(
        ws.deliver(&a, MergeMode::Ff).unwrap(),
        Delivery::FastForwarded { .. }
    ));
    assert_eq!(fx.head(), c);
    assert!(
        !fx.root().join("a.txt").exists(),
        "the checked-out branch is not main"
    );
    assert_eq!(fx.status(), "");
}

#[test]
fn no_changes_means_no_commit_and_nothing_to_deliver() {
    let fx = Fixture::new();
    let ws = fx.ws();
    let base = ws.base_commit().unwrap();
    let wt = ws.prepare("p", "T", &base).unwrap();
    // Only the copied, ignored .env is there: nothing to commit.
    assert!(wt.path.join(".env").is_file());
    assert_eq!(ws.commit(&wt, "nothing").unwrap(), None);
    assert_eq!(
        ws.deliver(&wt, MergeMode::Ff).unwrap(),
        Delivery::NothingToDo
    );
    assert_eq!(
        ws.deliver(&wt, MergeMode::None).unwrap(),
        Delivery::NothingToDo
    );
    let empty = ws.commit_allow_empty(&wt, "empty on purpose").unwrap();
    assert!(empty.is_some());
    assert_eq!(
        ws.deliver(&wt, MergeMode::None).unwrap(),
        Delivery::LeftForReview {
            branch: wt.branch.clone()
        }
    );
    assert_eq!(fx.head(), base, "mode none leaves the base alone");
}

#[test]
fn include_list_copies_ignored_files_with_permissions_and_never_commits_them() {
    let fx = Fixture::new();
    let root = fx.root();
    fs::create_dir_all(root.join("config")).unwrap();
    fs::write(root.join("config/local.toml"), "x = 1\n").unwrap(); // untracked, not ignored
    fs::write(root.join("tool.sh"), "#!/bin/sh\necho hi\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(root.join("tool.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    }
    fs::write(root.join("README.md"), "uncommitted edit in main\n").unwrap();
    let mut cfg = fx.cfg();
    cfg.include = vec![
        ".env".into(),
        "config/*.toml".into(),
        "tool.sh".into(),
        "README.md".into(),
        "missing".into(),
    ];
    let ws = Workspaces::new(&root, cfg).unwrap();
    let wt = ws.prepare("p", "T", &ws.base_commit().unwrap()).unwrap();
    assert_eq!(
        fs::read_to_string(wt.path.join(".env")).unwrap(),
        "SECRET=1\n"
    );
    assert_eq!(
        fs::read_to_string(wt.path.join("config/local.toml")).unwrap(),
        "x = 1\n"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(wt.path.join("tool.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
    }
    // A tracked file keeps its committed content: the main tree's edit is not smuggled in.
    assert_eq!(
        fs::read_to_string(wt.path.join("README.md")).unwrap(),
        "line one\nline two\nline three\n"
    );
    assert_eq!(wt.included, vec![".env", "config/local.toml", "tool.sh"]);
    fs::write(wt.path.join("work.txt"), "w\n").unwrap();
    let c = ws.commit(&wt, "work").unwrap().unwrap();
    let files = git(&wt.path, &["show", "--name-only", "--format=", &c]);
    assert_eq!(
        files.trim(),
        "work.txt",
        "include copies are not task output"
    );
}

#[test]
fn setup_command_runs_in_the_worktree_and_failure_carries_output() {
    let fx = Fixture::new();
    let mut cfg = fx.cfg();
    cfg.setup_command =
        Some("test -f .env && echo \"$WHILLY_TASK_ID\" > setup-ran.txt && echo done".into());
    let ws = Workspaces::new(fx.repo.path(), cfg.clone()).unwrap();
    let base = ws.base_commit().unwrap();
    let wt = ws.prepare("p", "TASK-9", &base).unwrap();
    assert_eq!(
        fs::read_to_string(wt.path.join("setup-ran.txt")).unwrap(),
        "TASK-9\n"
    );
    assert_eq!(wt.setup_output.as_deref(), Some("done\n"));

    cfg.setup_command = Some("echo 'npm ERR! missing dep' >&2; exit 7".into());
    let ws = Workspaces::new(fx.repo.path(), cfg).unwrap();
    match ws.prepare("p", "TASK-10", &base) {
        Err(WorkspaceError::SetupFailed { output, status, .. }) => {
            assert!(output.contains("npm ERR! missing dep"), "{output}");
            assert!(status.contains('7'), "{status}");
        }
        other => panic!("expected SetupFailed, got {other:?}"),
    }
}

#[test]
fn hostile_ids_never_escape_the_base_dir() {
    let fx = Fixture::new();
    let ws = fx.ws();
    let base_dir = fx.base.path().canonicalize().unwrap();
    let base = ws.base_commit().unwrap();
    for (plan, task) in [("../../etc", "../../etc"), ("a/b", "a/b"), ("..", ".")] {
        let wt = ws.prepare(plan, task, &base).unwrap();
        let p = wt.path.canonicalize().unwrap();
        assert!(
            p.starts_with(&base_dir),
            "{} escaped {}",
            p.display(),
            base_dir.display()
        );
        assert_eq!(p.strip_prefix(&base_dir).unwrap().components().count(), 3);
        ws.remove(&wt, true).unwrap();
    }
    assert!(!base_dir.join("etc").exists());
}

#[test]
fn re_prepare_after_a_crash_reuses_or_recreates() {
    let fx = Fixture::new();
    let ws = fx.ws();
    let root = fx.root();
    let base = ws.base_commit().unwrap();
    let wt = ws.prepare("p", "T", &base).unwrap();
    fs::write(wt.path.join("half-done.txt"), "x").unwrap();
    fs::write(wt.path.join("README.md"), "scribbled").unwrap();
    fs::create_dir_all(wt.path.join("target")).unwrap();
    fs::write(wt.path.join("target/cache"), "keep me").unwrap();

    // Crash: nothing cleaned up. Prepare again reuses and resets.
    let again = ws.prepare("p", "T", &base).unwrap();
    assert!(again.reused);
    assert_eq!(again.path, wt.path);
    assert!(!again.path.join("half-done.txt").exists());
    assert_eq!(
        fs::read_to_string(again.path.join("README.md")).unwrap(),
        "line one\nline two\nline three\n"
    );
    assert_eq!(
        fs::read_to_string(again.path.join("target/cache")).unwrap(),
        "keep me",
        "ignored caches stay"
    );

    // A committed earlier attempt is kept on the branch.
    fs::write(again.path.join("done.txt"), "d").unwrap();
    let c = ws.commit(&again, "attempt 1").unwrap().unwrap();
    let third = ws.prepare("p", "T", &base).unwrap();
    assert_eq!(git(&third.path, &["rev-parse", "HEAD"]).trim(), c);

    // The directory vanished but git still has the entry.
    fs::remove_dir_all(&third.path).unwrap();
    let fourth = ws.prepare("p", "T", &base).unwrap();
    assert!(!fourth.reused);
    assert!(fourth.path.join("README.md").is_file());

    // The entry vanished but the directory is still there.
    fs::remove_dir_all(root.join(".git/worktrees").join(&fourth.name)).unwrap();
    let fifth = ws.prepare("p", "T", &base).unwrap();
    assert!(!fifth.reused);
    let list = git(&root, &["worktree", "list", "--porcelain"]);
    assert_eq!(list.matches("whilly/p/T").count(), 1, "{list}");

    // A stale branch from another base is backed up, and the task restarts from the new base.
    fs::write(root.join("main2.txt"), "m").unwrap();
    git(&root, &["add", "main2.txt"]);
    git(&root, &["commit", "-q", "-m", "moved"]);
    let git_ = fx.head();
    // The branch tip `c` descends from the old base, not the new one.
    let sixth = ws.prepare("p", "T", &git_).unwrap();
    assert_eq!(git(&sixth.path, &["rev-parse", "HEAD"]).trim(), git_);
    let stale = git(&root, &["branch", "--list", "whilly/p/T-stale-*"]);
    assert!(stale.contains(&c[..8]), "{stale}");
}

#[test]
fn list_shows_sizes_and_prune_removes_them_from_git() {
    let fx = Fixture::new();
    let ws = fx.ws();
    let root = fx.root();
    let base = ws.base_commit().unwrap();
    let a = ws.prepare("p", "A", &base).unwrap();
    let b = ws.prepare("p", "B", &base).unwrap();
    let c = ws.prepare("q", "C", &base).unwrap();
    fs::write(a.path.join("big.bin"), vec![7u8; 200_000]).unwrap();
    // Crash debris: a directory in the layout that git does not know.
    let stray = ws.worktrees_dir().join("p").join("stray");
    fs::create_dir_all(&stray).unwrap();

    let infos = ws.list().unwrap();
    assert_eq!(infos.len(), 4, "{infos:#?}");
    let ia = infos
        .iter()
        .find(|i| i.task_id.as_deref() == Some("A"))
        .unwrap();
    let ib = infos
        .iter()
        .find(|i| i.task_id.as_deref() == Some("B"))
        .unwrap();
    assert!(ia.size_bytes >= 200_000, "{}", ia.size_bytes);
    assert!(ib.size_bytes > 0 && ib.size_bytes < ia.size_bytes);
    assert_eq!(ia.branch.as_deref(), Some("whilly/p/A"));
    assert_eq!(ia.plan_id.as_deref(), Some("p"));
    assert!(!ia.prunable && ia.registered);
    assert!(infos.iter().any(|i| !i.registered && i.path == stray));

    // Keep B; A, the stray and C (unless kept) go.
    let keep: HashSet<String> = ["B".to_string(), "C".to_string()].into();
    let report = ws.prune(PruneSelection::KeepTasks(&keep), true).unwrap();
    assert_eq!(report.removed.len(), 2, "{report:#?}");
    assert_eq!(report.kept.len(), 2);
    let cli = git(&root, &["worktree", "list", "--porcelain"]);
    assert!(
        !cli.contains(&a.path.to_string_lossy().to_string()),
        "{cli}"
    );
    assert!(cli.contains(&b.path.to_string_lossy().to_string()), "{cli}");
    assert!(!a.path.exists() && !stray.exists());
    assert!(!git(&root, &["branch", "--list"]).contains("whilly/p/A"));

    // A finished-predicate prune, then --all.
    let finished = |i: &whilly::workspace::WorktreeInfo| i.plan_id.as_deref() == Some("q");
    let report = ws
        .prune(PruneSelection::Finished(&finished), false)
        .unwrap();
    assert_eq!(report.removed.len(), 1);
    assert!(!c.path.exists());
    ws.prune(PruneSelection::All, true).unwrap();
    assert!(ws.list().unwrap().is_empty());
    let cli = git(&root, &["worktree", "list", "--porcelain"]);
    assert_eq!(
        cli.matches("worktree ").count(),
        1,
        "only the main tree: {cli}"
    );
    assert!(!ws.worktrees_dir().exists(), "empty layout dirs are tidied");
}

#[test]
fn prune_also_drops_stale_entries_like_git_worktree_prune() {
    let fx = Fixture::new();
    let ws = fx.ws();
    let root = fx.root();
    let wt = ws.prepare("p", "A", &ws.base_commit().unwrap()).unwrap();
    fs::remove_dir_all(&wt.path).unwrap();
    assert!(ws.list().unwrap()[0].prunable);
    let report = ws
        .prune(PruneSelection::KeepTasks(&["A".to_string()].into()), false)
        .unwrap();
    assert_eq!(report.removed.len(), 1);
    assert!(!git(&root, &["worktree", "list"]).contains("whilly"));
    assert!(!root.join(".git/worktrees").join(&wt.name).exists());
}

#[test]
fn worktrees_live_outside_the_repository_by_default() {
    let fx = Fixture::new();
    let ws = Workspaces::new(fx.repo.path(), WorkspaceConfig::default()).unwrap();
    let dir = ws.worktrees_dir();
    assert!(!dir.starts_with(fx.root()), "{}", dir.display());
    let data = directories::BaseDirs::new()
        .unwrap()
        .data_dir()
        .to_path_buf();
    assert!(
        dir.to_string_lossy().contains("whilly/worktrees"),
        "{}",
        dir.display()
    );
    assert!(
        dir.starts_with(data.canonicalize().unwrap_or(data)),
        "{}",
        dir.display()
    );
    let name = dir.file_name().unwrap().to_string_lossy().to_string();
    let repo_name = fx.root().file_name().unwrap().to_string_lossy().to_string();
    assert!(
        name.len() > 9 && name.ends_with(|c: char| c.is_ascii_hexdigit()),
        "{name}"
    );
    assert!(
        name.starts_with(&whilly::domain::safe_id(&repo_name)),
        "{name}"
    );
}

#[test]
fn a_base_dir_inside_the_repository_is_excluded_from_status() {
    let fx = Fixture::new();
    let mut cfg = fx.cfg();
    cfg.base_dir = Some(".whilly/worktrees".into());
    let ws = Workspaces::new(fx.repo.path(), cfg).unwrap();
    let wt = ws.prepare("p", "T", &ws.base_commit().unwrap()).unwrap();
    assert!(wt.path.starts_with(fx.root()));
    assert_eq!(fx.status(), "");
}

#[test]
fn concurrent_deliveries_are_serialised() {
    let fx = Fixture::new();
    let ws = fx.ws();
    let base = ws.base_commit().unwrap();
    let wts: Vec<_> = (0..4)
        .map(|i| {
            let wt = ws.prepare("p", &format!("T{i}"), &base).unwrap();
            fs::write(wt.path.join(format!("f{i}.txt")), format!("{i}\n")).unwrap();
            ws.commit(&wt, &format!("task {i}")).unwrap().unwrap();
            wt
        })
        .collect();
    let results: Vec<Delivery> = std::thread::scope(|s| {
        let handles: Vec<_> = wts
            .iter()
            .map(|wt| {
                let ws = ws.clone();
                s.spawn(move || ws.deliver(wt, MergeMode::Ff).unwrap())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(
        results
            .iter()
            .filter(|r| matches!(r, Delivery::FastForwarded { .. }))
            .count(),
        1,
        "{results:?}"
    );
    assert_eq!(
        results
            .iter()
            .filter(|r| matches!(r, Delivery::Merged { .. }))
            .count(),
        3
    );
    for i in 0..4 {
        assert!(fx.root().join(format!("f{i}.txt")).is_file());
    }
    assert_eq!(
        git(&fx.root(), &["rev-list", "--count", "main"]).trim(),
        "5"
    );
    assert_eq!(fx.status(), "");
}

#[test]
fn useful_errors_for_non_repos_and_empty_repos() {
    let dir = tempfile::tempdir().unwrap();
    let err = Workspaces::new(dir.path(), WorkspaceConfig::default()).unwrap_err();
    assert!(matches!(err, WorkspaceError::NotARepository { .. }));
    assert!(err.to_string().contains("git init"), "{err}");
    git(dir.path(), &["init", "-q"]);
    let ws = Workspaces::new(dir.path(), WorkspaceConfig::default()).unwrap();
    let err = ws.base_commit().unwrap_err();
    assert!(matches!(err, WorkspaceError::NoCommits { .. }));
    assert!(err.to_string().contains("initial commit"), "{err}");

    let fx = Fixture::new();
    let ws = fx.ws();
    let err = ws.prepare("p", "T", "not-a-commit").unwrap_err();
    assert!(matches!(err, WorkspaceError::BadBaseCommit { .. }), "{err}");
    let mut cfg = fx.cfg();
    cfg.include = vec!["../outside".into()];
    let err = Workspaces::new(fx.repo.path(), cfg).unwrap_err();
    assert!(err.to_string().contains("../outside"), "{err}");
}

#[test]
#[ignore = "benchmark: cargo test --release --test workspace_worktrees -- --ignored --nocapture"]
fn bench_prepare_remove_vs_git_cli() {
    let fx = Fixture::new();
    // A repository of modest size: 300 files in 30 directories.
    for d in 0..30 {
        let dir = fx.root().join(format!("dir{d}"));
        fs::create_dir_all(&dir).unwrap();
        for f in 0..10 {
            fs::write(
                dir.join(format!("file{f}.rs")),
                format!("// {d}/{f}\n").repeat(40),
            )
            .unwrap();
        }
    }
    git(&fx.root(), &["add", "."]);
    git(&fx.root(), &["commit", "-q", "-m", "files"]);
    let n = 20;
    let ours = bench_prepare_remove(&fx.root(), n).unwrap();
    let cli = bench_git_cli(&fx.root(), n).unwrap();
    println!(
        "per worktree (301 files): whilly prepare+remove {:.2} ms, git CLI worktree add+remove+branch -D {:.2} ms",
        ours.as_secs_f64() * 1000.0 / n as f64,
        cli.as_secs_f64() * 1000.0 / n as f64
    );
    assert!(ws_is_clean(&fx));
}

fn ws_is_clean(fx: &Fixture) -> bool {
    git(&fx.root(), &["worktree", "list", "--porcelain"])
        .matches("worktree ")
        .count()
        == 1
}

#[test]
fn find_returns_the_recorded_worktree_and_locked_ones_survive_prune() {
    let fx = Fixture::new();
    let ws = fx.ws();
    let base = ws.base_commit().unwrap();
    assert_eq!(ws.find("p", "A").unwrap(), None);
    let wt = ws.prepare("p", "A", &base).unwrap();
    let found = ws.find("p", "A").unwrap().unwrap();
    assert_eq!(
        (found.path, found.branch, found.base_commit),
        (wt.path.clone(), wt.branch.clone(), base)
    );
    let wt_path = wt.path.to_string_lossy().to_string();
    git(&fx.root(), &["worktree", "lock", &wt_path]);
    let report = ws.prune(PruneSelection::All, true).unwrap();
    assert!(
        report.removed.is_empty() && report.kept.len() == 1,
        "{report:#?}"
    );
    assert!(wt.path.is_dir());
    git(&fx.root(), &["worktree", "unlock", &wt_path]);
    assert_eq!(
        ws.prune(PruneSelection::All, true).unwrap().removed.len(),
        1
    );
}

#[test]
fn started_from_a_linked_worktree_delivers_into_its_branch() {
    let fx = Fixture::new();
    let root = fx.root();
    let side = tempfile::tempdir().unwrap();
    let side_path = side.path().join("feature");
    git(
        &root,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "feature",
            &side_path.to_string_lossy(),
        ],
    );
    let ws = Workspaces::new(&side_path, fx.cfg()).unwrap();
    assert_eq!(ws.repo_root(), root.as_path());
    assert_eq!(ws.current_branch().unwrap().as_deref(), Some("feature"));
    let wt = ws.prepare("p", "A", &ws.base_commit().unwrap()).unwrap();
    assert_eq!(wt.base_branch.as_deref(), Some("feature"));
    fs::write(wt.path.join("feat.txt"), "f\n").unwrap();
    ws.commit(&wt, "feat").unwrap().unwrap();
    assert!(matches!(
        ws.deliver(&wt, MergeMode::Ff).unwrap(),
        Delivery::FastForwarded { .. }
    ));
    assert!(
        side_path.join("feat.txt").is_file(),
        "the linked worktree holding the branch is updated"
    );
    assert_eq!(git(&side_path, &["status", "--porcelain"]), "");
    assert!(!root.join("feat.txt").exists(), "main is untouched");
}

#[test]
fn the_api_can_be_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<Workspaces>();
    assert_send_sync::<whilly::workspace::Worktree>();
    assert_send_sync::<Delivery>();
    fn assert_error<T: std::error::Error + Send + Sync + 'static>() {}
    assert_error::<WorkspaceError>();
}

#[test]
fn caches_and_dependencies_are_never_committed_unless_the_base_tracks_them() {
    let fx = Fixture::new();
    // The base tracks one vendored dependency file; a change to it is work.
    let r = fx.repo.path();
    fs::create_dir_all(r.join("vendor/node_modules/kept")).unwrap();
    fs::write(r.join("vendor/node_modules/kept/index.js"), "v1\n").unwrap();
    git(r, &["add", "vendor"]);
    git(r, &["commit", "-q", "-m", "vendored"]);
    let ws = fx.ws();
    let base = ws.base_commit().unwrap();
    let wt = ws.prepare("p", "T", &base).unwrap();
    let p = &wt.path;
    fs::write(p.join("calc.py"), "def add(a, b):\n    return a + b\n").unwrap();
    fs::create_dir_all(p.join("__pycache__")).unwrap();
    fs::write(p.join("__pycache__/calc.cpython-311.pyc"), b"\x00pyc").unwrap();
    fs::create_dir_all(p.join("node_modules/left-pad")).unwrap();
    fs::write(p.join("node_modules/left-pad/index.js"), "x\n").unwrap();
    fs::write(p.join(".coverage"), "data").unwrap();
    fs::write(p.join("vendor/node_modules/kept/index.js"), "v2\n").unwrap();
    let commit = ws.commit(&wt, "T").unwrap().expect("a commit");
    let files = git(p, &["show", "--name-only", "--format=", &commit]);
    let mut files: Vec<&str> = files.lines().filter(|l| !l.is_empty()).collect();
    files.sort();
    assert_eq!(files, ["calc.py", "vendor/node_modules/kept/index.js"]);
}

/// A whilly killed while git wrote a worktree's index (creating it, resetting it, committing in
/// it) leaves `index.lock` behind. Once nothing runs there any more, the next attempt must not
/// fail on it: every retry would fail the same way and the task would end FAILED.
#[test]
fn re_prepare_after_a_crash_mid_git_write_clears_the_stale_lock() {
    let fx = Fixture::new();
    let ws = fx.ws();
    let root = fx.root();
    let base = ws.base_commit().unwrap();
    let wt = ws.prepare("p", "T", &base).unwrap();
    fs::write(wt.path.join("half-done.txt"), "x").unwrap();
    let lock = root
        .join(".git/worktrees")
        .join(&wt.name)
        .join("index.lock");
    fs::write(&lock, "").unwrap();
    let ref_lock = root
        .join(".git/refs/heads")
        .join(format!("{}.lock", wt.branch));
    fs::create_dir_all(ref_lock.parent().unwrap()).unwrap();
    fs::write(&ref_lock, "").unwrap();
    let again = ws.prepare("p", "T", &base).unwrap();
    assert_eq!(again.path, wt.path);
    assert!(!again.path.join("half-done.txt").exists());
    assert!(!lock.exists(), "the stale lock is gone");
    assert!(!ref_lock.exists(), "the branch's stale lock is gone");
    // The worktree works: a commit in it goes through.
    fs::write(again.path.join("done.txt"), "d").unwrap();
    assert!(ws.commit(&again, "attempt 2").unwrap().is_some());
}
