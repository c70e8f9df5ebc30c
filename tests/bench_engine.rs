//! `whilly bench engine` on a real repository and on a generated one, with the real binary:
//! the report names where it ran and how many files the tree holds, every task ends DONE, and
//! the repository given with `--repo` is not touched (the bench works in a clone).

use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

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
    let text = bench(&[
        "--tasks",
        "3",
        "--slots",
        "1",
        "--repo",
        &repo.to_string_lossy(),
    ]);
    assert!(
        text.contains("a clone of") && text.contains("(37 files)"),
        "{text}"
    );
    assert!(text.contains("engine / bare"), "{text}");
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
