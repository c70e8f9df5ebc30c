//! A DONE an operator can believe (issue 25), with the real binary: a check whose program is
//! missing is found before any agent runs and never turns into prose; a misspelled plan key
//! refuses the file instead of dropping what it names; key files that leave the repository are
//! refused with their location.

#[path = "support/engine.rs"]
mod engine;

use engine::{Output, Repo, plan, task};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// A PATH of its own: the programs whilly and the fake agent need, and nothing else, so
/// `pytest` is missing whatever the machine has installed.
fn bare_path(repo: &Repo) -> PathBuf {
    let bin = repo.home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in [
        "git", "sh", "bash", "env", "cat", "true", "false", "mkdir", "rm",
    ] {
        let found = std::env::var("PATH")
            .unwrap()
            .split(':')
            .map(|d| Path::new(d).join(tool))
            .find(|p| p.is_file())
            .unwrap_or_else(|| panic!("{tool} is not on PATH"));
        let _ = std::os::unix::fs::symlink(found, bin.join(tool));
    }
    bin
}

fn script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn run_with_path(repo: &Repo, path: &Path, args: &[&str]) -> Output {
    repo.spawn_in(&repo.repo, args, &[("PATH", path.to_str().unwrap())])
        .wait(LIMIT)
}

#[test]
fn a_check_whose_program_is_missing_is_found_before_any_agent_runs() {
    // The agent leaves a note that it ran; a Python repository, pytest nowhere on PATH.
    let mut t = task("T-1");
    t["test_steps"] = json!(["pytest -q tests/test_stats.py"]);
    let repo = Repo::new(&plan("p", vec![t]), "true");
    let ran = repo.shared_file("ran");
    let template = format!(
        "bash -c 'echo ran >> {}; echo \"<promise>COMPLETE</promise>\"'",
        ran.display()
    );
    repo.write("whilly.toml", &engine::config(&template, &repo.wt_dir));
    repo.write("pyproject.toml", "[project]\nname = \"stats\"\n");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "python"]);
    let path = bare_path(&repo);

    // plan check: the step stays a command, and the missing program is said with its place.
    let o = run_with_path(&repo, &path, &["plan", "check", "plan.json"]);
    let all = format!("{}{}", o.stdout, o.stderr);
    assert!(!all.contains("prose"), "{o}");
    assert!(all.contains("$ pytest -q tests/test_stats.py"), "{o}");
    assert!(
        all.contains("warning[check_program_missing]") && all.contains("`pytest` is not on PATH"),
        "{o}"
    );
    assert!(all.contains("plan.json:"), "no line:col: {o}");

    // The run refuses before any agent is paid: exit 2, naming the program, task and fix.
    let o = run_with_path(&repo, &path, &["run", "plan.json", "--headless"]);
    assert_eq!(o.code, Some(4), "{o}");
    assert!(
        o.stderr.contains("program `pytest` is not on PATH")
            && o.stderr.contains("T-1 test_steps[0]")
            && o.stderr.contains("T-1 profile: pytest")
            && o.stderr.contains("install pytest"),
        "{o}"
    );
    assert!(!ran.exists(), "the agent ran although its check could not");
    assert_eq!(repo.task("p", "T-1")["status"], "PENDING");

    // doctor names it as a problem.
    let o = run_with_path(&repo, &path, &["doctor"]);
    assert!(
        o.stdout
            .contains("[PROBLEM] plan p: program `pytest` is not on PATH"),
        "{o}"
    );

    // With a pytest that finds a failing test, the check runs and the task is not DONE.
    script(&path.join("pytest"), "echo '1 failed'; exit 1");
    let o = run_with_path(&repo, &path, &["run", "plan.json", "--headless"]);
    assert_eq!(o.code, Some(1), "{o}");
    assert_eq!(repo.task("p", "T-1")["status"], "FAILED", "{o}");
    assert!(ran.exists(), "the agent ran once pytest was there");
}

#[test]
fn a_misspelled_plan_key_refuses_the_file_everywhere_it_is_read() {
    let mut a = task("A-1");
    a["budjet_usd"] = json!(3);
    let mut b = task("A-2");
    b["dependncies"] = json!(["A-1"]);
    b["my_note"] = json!("kept");
    let repo = Repo::new(&plan("typo", vec![a, b]), "true");
    for args in [
        &["plan", "check", "plan.json"][..],
        &["plan", "import", "plan.json"][..],
        &["run", "plan.json", "--headless"][..],
    ] {
        let o = repo.run(args, LIMIT);
        assert_eq!(o.code, Some(1), "{args:?}: {o}");
        let all = format!("{}{}", o.stdout, o.stderr);
        for (key, meant) in [
            ("dependncies", "dependencies"),
            ("budjet_usd", "budget_usd"),
        ] {
            let line = all
                .lines()
                .find(|l| l.contains(&format!("\"{key}\"")))
                .unwrap_or_else(|| panic!("{args:?} never names {key}: {o}"));
            assert!(
                line.contains("error[misspelled_field]")
                    && line.contains(&format!("rename it to \"{meant}\""))
                    && line.starts_with("plan.json:"),
                "{args:?}: {line}"
            );
        }
        assert!(
            all.contains("warning[unknown_field]") && all.contains("my_note"),
            "{o}"
        );
    }
    // Nothing was imported.
    let o = repo.run(&["plan", "list", "--json"], LIMIT);
    assert!(!o.stdout.contains("typo"), "{o}");

    // Fixed, the plan imports, and the other unknown key is still said (on import too).
    let mut a = task("A-1");
    a["budget_usd"] = json!(3);
    let mut b = task("A-2");
    b["dependencies"] = json!(["A-1"]);
    b["my_note"] = json!("kept");
    repo.write(
        "plan.json",
        &serde_json::to_string_pretty(&plan("typo", vec![a, b])).unwrap(),
    );
    let o = repo.run(&["plan", "import", "plan.json"], LIMIT);
    assert_eq!(o.code, Some(0), "{o}");
    assert!(
        o.stderr
            .contains("unknown key \"my_note\" is kept but not used"),
        "{o}"
    );
}

#[test]
fn key_files_outside_the_repository_are_refused_with_their_place() {
    let mut a = task("A-1");
    a["key_files"] = json!(["/etc/passwd"]);
    let mut b = task("A-2");
    b["key_files"] = json!(["src/../../other/x.rs"]);
    let mut c = task("A-3");
    c["key_files"] = json!(["lib/../src/a.rs"]);
    let repo = Repo::new(&plan("keys", vec![a, b, c]), "true");
    let o = repo.run(&["plan", "import", "plan.json"], LIMIT);
    assert_eq!(o.code, Some(1), "{o}");
    assert!(
        o.stderr.contains("/tasks/0/key_files/0") && o.stderr.contains("absolute"),
        "{o}"
    );
    assert!(
        o.stderr.contains("/tasks/1/key_files/0") && o.stderr.contains("climbs out"),
        "{o}"
    );
    assert!(!o.stderr.contains("/tasks/2/key_files"), "{o}");
}

#[test]
fn an_agent_that_switches_branch_still_lands_its_work_on_the_base() {
    // One agent commits on a branch of its own; another detaches HEAD and leaves its file
    // uncommitted. Both tasks' files must be on main, and the task DONE.
    let agent = "bash -c 'mkdir -p files; case $WHILLY_TASK_ID in \
        T-1) git checkout -q -b other && echo one > files/T-1.txt && git add -A && git commit -qm agent ;; \
        T-2) git checkout -q --detach && echo two > files/T-2.txt ;; esac; \
        echo \"<promise>COMPLETE</promise>\"'";
    let repo = Repo::new(&plan("br", vec![task("T-1"), task("T-2")]), agent);
    let o = repo.run(&["run", "plan.json", "--headless"], LIMIT);
    assert_eq!(o.code, Some(0), "{o}");
    for (id, text) in [("T-1", "one"), ("T-2", "two")] {
        assert_eq!(repo.task("br", id)["status"], "DONE", "{o}");
        let on_main = repo.git(&["show", &format!("HEAD:files/{id}.txt")]);
        assert_eq!(on_main.trim(), text, "{id}'s work is not on main: {o}");
    }
}

#[test]
fn secrets_and_huge_files_are_never_committed() {
    // T-1 writes an AWS key into creds.ini; T-2 a 2 MiB file with the limit at 1 MiB; T-3 is
    // clean. Only T-3 lands; the others wait in the inbox naming file, line and kind.
    let agent = "bash -c 'mkdir -p files; case $WHILLY_TASK_ID in \
        T-1) printf \"[default]\\naws_access_key_id = AKIA%s\\n\" IOSFODNN7EXAMPLQ > creds.ini ;; \
        T-2) head -c 2097152 /dev/zero | tr \"\\0\" x > files/big.txt ;; \
        T-3) echo fine > files/T-3.txt ;; esac; \
        echo \"<promise>COMPLETE</promise>\"'";
    let repo = Repo::new(
        &plan("sec", vec![task("T-1"), task("T-2"), task("T-3")]),
        agent,
    );
    let o = repo.run_plan(&["delivery.max_file_mb=1"], &[]).wait(LIMIT);
    assert_eq!(repo.task("sec", "T-3")["status"], "DONE", "{o}");
    for (id, file, said) in [
        (
            "T-1",
            "creds.ini",
            "creds.ini:2 holds what looks like a secret (aws_access_key)",
        ),
        (
            "T-2",
            "files/big.txt",
            "files/big.txt is 2 MB, over [delivery] max_file_mb = 1",
        ),
    ] {
        let t = repo.task("sec", id);
        assert_eq!(t["status"], "HUMAN_LOOP", "{id}: {o}");
        assert_eq!(t["reason"], "unsafe_files", "{id}: {o}");
        let tree = repo.git(&["log", "--all", "--name-only", "--format="]);
        assert!(
            !tree.lines().any(|l| l == file),
            "{file} was committed:\n{tree}"
        );
        let events = serde_json::to_string(&repo.events(Some(id))).unwrap();
        assert!(events.contains(said), "{id}: {events}");
    }
    let everything = format!(
        "{}{}{}",
        serde_json::to_string(&repo.events(None)).unwrap(),
        o.stdout,
        o.stderr
    );
    assert!(
        !everything.contains("AKIAIOSFODNN7EXAMPLQ"),
        "the key was written out"
    );
}

/// Starts `git rebase -i` of the checked-out branch that stops at its last commit for editing:
/// a rebase in progress, HEAD detached, as an operator's would be.
fn start_rebase(repo: &Repo) {
    let out = std::process::Command::new("git")
        .args(["rebase", "-i", "HEAD~1"])
        .current_dir(&repo.repo)
        .env("HOME", &repo.home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_SEQUENCE_EDITOR", "sed -i 1s/^pick/edit/")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(repo.repo.join(".git/rebase-merge").is_dir());
}

#[test]
fn a_branch_being_rebased_is_never_moved_and_the_work_lands_after() {
    // The agent waits until the operator has started a rebase of the base branch.
    let repo = Repo::new(&plan("rb", vec![task("T-1")]), "true");
    let go = repo.shared_file("go");
    let agent = format!(
        "bash -c 'mkdir -p files; echo started > {go}.started; while [ ! -e {go} ]; do sleep 0.1; done; \
         echo work > files/T-1.txt; echo \"<promise>COMPLETE</promise>\"'",
        go = go.display()
    );
    repo.write("whilly.toml", &engine::config(&agent, &repo.wt_dir));
    repo.git(&["commit", "-qam", "agent"]);
    let branch = repo.git(&["branch", "--show-current"]).trim().to_string();
    let run = repo.spawn(&["run", "plan.json", "--headless"]);
    engine::wait_for(LIMIT, "the agent to start", || {
        go.with_extension("started").exists().then_some(())
    });
    start_rebase(&repo);
    std::fs::write(&go, "go").unwrap();
    let o = run.wait(LIMIT);
    let t = repo.task("rb", "T-1");
    assert_eq!(t["status"], "HUMAN_LOOP", "{o}");
    assert_eq!(t["reason"], "ready_to_merge", "{o}");
    let events = serde_json::to_string(&repo.events(Some("T-1"))).unwrap();
    assert!(
        events.contains(&format!("a rebase of {branch} is in progress")),
        "{events}"
    );
    // The rebase is abandoned: nothing whilly did is lost with it.
    repo.git(&["rebase", "--abort"]);
    // A run cannot start while a rebase holds the branch; after it, `whilly merge` lands it.
    start_rebase(&repo);
    let o = repo.run(&["run", "plan.json", "--headless"], LIMIT);
    assert_eq!(o.code, Some(4), "{o}");
    assert!(
        o.stderr
            .contains(&format!("a rebase of {branch} is in progress")),
        "{o}"
    );
    repo.git(&["rebase", "--abort"]);
    let o = repo.run(&["merge", "T-1"], LIMIT);
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(repo.task("rb", "T-1")["status"], "DONE");
    assert_eq!(repo.git(&["show", "HEAD:files/T-1.txt"]).trim(), "work");

    // A detached HEAD is said before any agent runs.
    repo.git(&["checkout", "-q", "--detach"]);
    let o = repo.run(&["run", "plan.json", "--headless"], LIMIT);
    assert_eq!(o.code, Some(4), "{o}");
    assert!(o.stderr.contains("HEAD is detached"), "{o}");
}

/// An agent that also writes into the operator's checkout (found from its worktree's git
/// directory, as OpenCode finds its project root) besides doing its task.
const ESCAPING_AGENT: &str = "bash -c 'R=$(dirname \"$(git rev-parse --path-format=absolute --git-common-dir)\"); \
    echo escaped >> \"$R/README.md\"; mkdir -p files; echo ok > files/$WHILLY_TASK_ID.txt; \
    echo \"<promise>COMPLETE</promise>\"'";

#[test]
fn the_sandbox_refuses_a_write_into_the_operators_checkout_and_says_where() {
    let repo = Repo::new(&plan("sb", vec![task("T-1")]), ESCAPING_AGENT);
    let o = repo.run(&["run", "plan.json", "--headless"], LIMIT);
    assert_eq!(repo.task("sb", "T-1")["status"], "DONE", "{o}");
    assert!(
        !repo.repo.join("README.md").exists(),
        "the agent wrote into the operator's checkout"
    );
    let events = serde_json::to_string(&repo.events(Some("T-1"))).unwrap();
    let readme = repo.repo.join("README.md").display().to_string();
    assert!(
        events.contains("sandbox_refused") && events.contains(&readme),
        "{events}"
    );
    assert_eq!(repo.git(&["show", "HEAD:files/T-1.txt"]).trim(), "ok");
}

#[test]
fn without_the_sandbox_a_write_into_the_checkout_is_still_reported() {
    let repo = Repo::new(&plan("nosb", vec![task("T-1")]), ESCAPING_AGENT);
    let o = repo.run_plan(&["sandbox.mode=off"], &[]).wait(LIMIT);
    assert_eq!(repo.task("nosb", "T-1")["status"], "DONE", "{o}");
    assert!(repo.repo.join("README.md").exists());
    let events = serde_json::to_string(&repo.events(Some("T-1"))).unwrap();
    assert!(
        events.contains("checkout_changed")
            && events.contains("README.md")
            && events.contains("changed in your checkout while the task ran"),
        "{events}"
    );
}
