//! The git CLI in tests, and whilly in a scratch repository: run in a directory, the test fails
//! with the program's stderr when git does.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// `git -C DIR ARGS`, whatever it answers (system config ignored).
pub fn run_git(dir: &Path, args: &[&str]) -> Output {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("run git")
}

/// `git -C DIR ARGS`'s stdout; the test fails when git does.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = run_git(dir, args);
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The real binary, run in `dir` with its HOME and config there and no shared queue.
pub fn whilly_in(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_whilly"));
    c.current_dir(dir)
        .env_remove("WHILLY_DATABASE_URL")
        .env("XDG_CONFIG_HOME", dir.join(".xdg"))
        .env("HOME", dir);
    c
}
