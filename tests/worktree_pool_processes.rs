//! The worktree pool with the real binary: two `whilly worker` processes share one clone's pool
//! (the default `[worktrees]` settings), every agent checks at its start that nothing of a
//! task before is in its worktree (an ignored scratch file, worktree config, a change, HEAD)
//! and leaves all of that behind for the next; every task ends DONE with no leak seen, the
//! directories are reused, the build cache is found warm, and the operator's repository keeps
//! none of the agents' stashes or config.

#[path = "support/git.rs"]
mod gitcli;
use gitcli::{git, whilly_in as whilly};

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

const TASKS: usize = 8;

#[test]
fn two_workers_share_one_pool_and_no_task_sees_the_one_before() {
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let p = dir.path();
    git(p, &["init", "-q", "-b", "main"]);
    git(p, &["config", "user.name", "Operator"]);
    git(p, &["config", "user.email", "op@example.com"]);
    // The operator allows per-worktree config, so an agent can write some.
    git(p, &["config", "extensions.worktreeConfig", "true"]);
    std::fs::write(
        p.join(".gitignore"),
        "target/\n*.log\n.agent.sh\nplan.json\nwhilly.toml\n.xdg/\n.local/\n",
    )
    .unwrap();
    std::fs::write(p.join("README.md"), "base\n").unwrap();
    git(p, &["add", "-A"]);
    git(p, &["commit", "-qm", "base"]);

    let log = logs.path().join("agents.log");
    let agent = p.join(".agent.sh");
    std::fs::write(
        &agent,
        format!(
            r#"#!/bin/sh
task="$1"
log="{log}"
leak=""
[ -e scratch.log ] && leak="$leak scratch.log"
# (No stash check here: git keeps one stash per repository, so agents running at once see each
# other's entries; the end of this test checks that every task's entries were dropped.)
[ -n "$(git config --get whilly.leak)" ] && leak="$leak config"
[ -n "$(git status --porcelain)" ] && leak="$leak changes"
git symbolic-ref -q HEAD >/dev/null || leak="$leak detached"
if [ -n "$leak" ]; then echo "$task LEAK:$leak" >> "$log"; exit 1; fi
[ -e target/stamp ] && echo "$task warm" >> "$log"
echo "$task dir $(pwd)" >> "$log"
mkdir -p target && touch target/stamp
echo scratch > scratch.log
git config --worktree whilly.leak "$task"
echo draft > draft.txt && git add draft.txt && git stash push -q -m "draft of $task"
echo "$task" > "$task.txt"
sleep 0.2
echo '<promise>COMPLETE</promise>'
"#,
            log = log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        p.join("whilly.toml"),
        format!(
            "[run]\nagent = \"command\"\n[agents.command]\ntemplate = \"{} {{task_id}}\"\n\
             [sandbox]\nallow_write = [\"{}\"]\n",
            agent.display(),
            logs.path().display()
        ),
    )
    .unwrap();
    let tasks: Vec<serde_json::Value> = (1..=TASKS)
        .map(|i| {
            serde_json::json!({"id": format!("P-{i}"), "priority": "high",
                "description": format!("Write P-{i}.txt holding the task's id"),
                "acceptance_criteria": ["the file exists"],
                "test_steps": [format!("test -f P-{i}.txt")]})
        })
        .collect();
    std::fs::write(
        p.join("plan.json"),
        serde_json::json!({"plan_id": "pool", "project": "pool", "tasks": tasks}).to_string(),
    )
    .unwrap();
    let imported = whilly(p)
        .args(["plan", "import", "plan.json"])
        .output()
        .unwrap();
    assert!(imported.status.success(), "{imported:?}");

    let workers: Vec<_> = (0..2)
        .map(|_| {
            whilly(p)
                .args(["worker", "--until-idle", "--plan", "pool", "--slots", "2"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for w in workers {
        let out = w.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let seen = std::fs::read_to_string(&log).unwrap();
    assert!(!seen.contains("LEAK"), "{seen}");
    for i in 1..=TASKS {
        assert_eq!(
            std::fs::read_to_string(p.join(format!("P-{i}.txt"))).unwrap(),
            format!("P-{i}\n"),
            "P-{i} landed"
        );
    }
    let dirs: std::collections::BTreeSet<&str> = seen
        .lines()
        .filter_map(|l| l.split_once(" dir ").map(|(_, d)| d))
        .collect();
    assert!(
        dirs.len() < TASKS && dirs.iter().all(|d| d.contains("/.pool/")),
        "directories are reused from the pool: {dirs:?}"
    );
    assert!(
        seen.contains(" warm"),
        "a later task found a build cache: {seen}"
    );
    // The operator's repository keeps none of it.
    assert_eq!(
        git(p, &["stash", "list"]),
        "",
        "the agents' stashes are dropped"
    );
    let cfg = Command::new("git")
        .args(["config", "--get", "whilly.leak"])
        .current_dir(p)
        .output()
        .unwrap();
    assert!(
        !cfg.status.success(),
        "no config in the operator's checkout"
    );
    assert_eq!(git(p, &["status", "--porcelain"]), "");
    // What is left is the idle pool, at most its default size, all listed as such.
    let listed = whilly(p)
        .args(["worktrees", "list", "--json"])
        .output()
        .unwrap();
    let list: Vec<serde_json::Value> = serde_json::from_slice(&listed.stdout).unwrap();
    assert!(
        !list.is_empty() && list.len() <= 4 && list.iter().all(|w| w["pooled"] == true),
        "{list:?}"
    );
    let text = whilly(p).args(["worktrees", "list"]).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("pooled (idle)") && text.contains("idle in the pool of 4"),
        "{text}"
    );
    let doctor = whilly(p).args(["doctor"]).output().unwrap();
    let doctor = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        doctor.contains("idle in the pool") && !doctor.contains("orphan worktree"),
        "{doctor}"
    );
}
