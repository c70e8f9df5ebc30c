//! `whilly bench engine` on a real repository and on a generated one, with the real binary:
//! the report names where it ran and how many files the tree holds, every task ends DONE, and
//! the repository given with `--repo` is not touched (the bench works in a clone).

#[path = "support/git.rs"]
mod gitcli;
use gitcli::git;

use std::process::Command;

fn bench(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_whilly"))
        .args(["bench", "engine"])
        .args(args)
        .env_remove("WHILLY_DATABASE_URL")
        .output()
        .expect("run whilly");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    text
}

#[test]
fn measures_on_a_clone_of_a_real_repository_and_leaves_it_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    git(repo, &["init", "-q"]);
    for i in 0..37 {
        std::fs::create_dir_all(repo.join("lib")).unwrap();
        std::fs::write(repo.join(format!("lib/m{i}.rs")), format!("// {i}\n")).unwrap();
    }
    std::fs::write(repo.join(".gitignore"), "target/\n").unwrap();
    git(repo, &["add", "-A"]);
    git(
        repo,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e",
            "commit",
            "-qm",
            "base",
        ],
    );
    let head = git(repo, &["rev-parse", "HEAD"]);
    // Each task's check says whether the build cache of a task before is there, then makes it.
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("checks.log");
    let check = format!(
        "test -e target/stamp && echo warm >> {0} || echo cold >> {0}; mkdir -p target && touch target/stamp",
        log.display()
    );
    let text = bench(&[
        "--tasks",
        "3",
        "--slots",
        "1",
        "--check",
        &check,
        "--repo",
        &repo.to_string_lossy(),
    ]);
    assert!(
        text.contains("a clone of") && text.contains("(38 files)"),
        "{text}"
    );
    assert!(text.contains("pooled / fresh"), "{text}");
    assert!(
        text.contains("DONE: fresh 3, pooled 3, of 3 tasks"),
        "{text}"
    );
    // Fresh worktrees build from cold every time; the pool's second and third tasks find the
    // first one's build outputs.
    let seen = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        seen.lines().collect::<Vec<_>>(),
        ["cold", "cold", "cold", "cold", "warm", "warm"],
        "{text}"
    );
    assert_eq!(git(repo, &["rev-parse", "HEAD"]), head, "no commit added");
    assert_eq!(git(repo, &["status", "--porcelain"]), "", "nothing changed");
    assert_eq!(
        git(repo, &["worktree", "list"]).lines().count(),
        1,
        "no worktree"
    );
    assert!(!repo.join(".whilly").exists());

    let text = bench(&["--tasks", "2", "--slots", "1", "--files", "2500"]);
    assert!(
        text.contains("a generated repository of 2500 files") && text.contains("(2500 files)"),
        "{text}"
    );
}
