//! Dependencies in `branch` and `pr` delivery: a task whose dependency was delivered for review
//! but not merged starts from that dependency's branch, and its pull request goes on top of it
//! ("stacked on #N"). With the real binary, a local bare remote and the GitHub stand-in (which
//! refuses a pull request whose base branch is not on the remote). Also: a plan's
//! `repo_targets` names the repository the pull requests open in.

#[path = "support/git.rs"]
mod gitcli;
mod support;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::engine::{self, Repo};
use support::github_standin::{DEFAULT_TOKEN, GitHubStandIn, PrState};
use whilly::workspace::{DeliveredDep, PushAuth, WorkspaceConfig, Workspaces};

const REPO: &str = "octo/api";
const PLAN: &str = "stack";
const LIMIT: Duration = Duration::from_secs(180);

/// Each task's agent writes `files/<task>.txt`: its id, then every file it found in `files/`
/// (so a task's file shows what of the others' work its worktree held).
const AGENT: &str = r#"sh -c 'mkdir -p files; (echo "$1"; cat files/*.txt 2>/dev/null) > files/.new; mv files/.new "files/$1.txt"; echo "<promise>COMPLETE</promise>"' agent {task_id}"#;

/// A task whose check needs the files of `needs` (its dependencies' work).
fn task(id: &str, deps: &[&str]) -> Value {
    let mut t = engine::task(id);
    let mut check = format!("test -f files/{id}.txt");
    for d in deps {
        check.push_str(&format!(" && test -f files/{d}.txt"));
    }
    t["test_steps"] = json!([check]);
    t["dependencies"] = json!(deps);
    t
}

struct Stack {
    repo: Repo,
    gh: GitHubStandIn,
    remote: PathBuf,
    default_branch: String,
    _remote_dir: tempfile::TempDir,
}

impl Stack {
    /// `plan` in a repository with a bare remote the stand-in knows as `octo/api`, delivered as
    /// pull requests. `config_repo`: whether whilly.toml names the repository.
    fn new(plan: Value, config_repo: bool) -> Stack {
        let repo = Repo::new(&plan, AGENT);
        let (remote_dir, remote, default_branch) = repo.bare_origin();
        let gh = GitHubStandIn::start();
        gh.add_repo(REPO, &default_branch, Some(remote.clone()));
        let mut toml = std::fs::read_to_string(repo.repo.join("whilly.toml")).unwrap();
        toml.push_str(&format!(
            "\n[delivery]\nmode = \"pr\"\n\n[github]\napi_url = {}\n{}",
            engine::toml_str(&gh.url()),
            if config_repo {
                format!("repo = \"{REPO}\"\n")
            } else {
                String::new()
            }
        ));
        repo.write("whilly.toml", &toml);
        repo.git(&["commit", "-qam", "pull requests"]);
        repo.git(&["push", "-q", "origin", &default_branch]);
        Stack {
            repo,
            gh,
            remote,
            default_branch,
            _remote_dir: remote_dir,
        }
    }

    fn run(&self) -> engine::Output {
        self.repo
            .spawn_in(
                &self.repo.repo,
                &["run", "plan.json", "--headless"],
                &[("WHILLY_GITHUB_TOKEN", DEFAULT_TOKEN)],
            )
            .wait(LIMIT)
    }

    fn pr_of(&self, task: &str) -> PrState {
        let head = format!("whilly/{PLAN}/{task}");
        self.gh
            .prs(REPO)
            .into_iter()
            .find(|p| p.head == head)
            .unwrap_or_else(|| panic!("no pull request for {head}: {:#?}", self.gh.prs(REPO)))
    }

    /// The files `files/` holds on the remote's branch of `task`.
    fn files_on_branch(&self, task: &str) -> Vec<String> {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&self.remote)
            .args([
                "ls-tree",
                "--name-only",
                &format!("whilly/{PLAN}/{task}"),
                "files/",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.trim_start_matches("files/").to_string())
            .collect()
    }
}

fn done(s: &Stack, out: &engine::Output) {
    for t in s.repo.tasks(PLAN) {
        assert_eq!(
            t["status"], "DONE",
            "{t:#}\nstdout:\n{}\nstderr:\n{}",
            out.stdout, out.stderr
        );
    }
}

/// T-1 ← T-2 ← T-3: each starts from the one below, each pull request targets the branch
/// below ("stacked on #N"), each branch holds the work of every task under it; the operator's
/// checkout is not touched.
#[test]
fn a_chain_of_dependencies_becomes_a_stack_of_pull_requests() {
    let plan = engine::plan(
        PLAN,
        vec![
            task("T-1", &[]),
            task("T-2", &["T-1"]),
            task("T-3", &["T-2"]),
        ],
    );
    let s = Stack::new(plan, true);
    let head_before = s.repo.git(&["rev-parse", "HEAD"]);
    let out = s.run();
    done(&s, &out);
    let (p1, p2, p3) = (s.pr_of("T-1"), s.pr_of("T-2"), s.pr_of("T-3"));
    assert_eq!(p1.base, s.default_branch);
    assert_eq!(p2.base, format!("whilly/{PLAN}/T-1"));
    assert_eq!(p3.base, format!("whilly/{PLAN}/T-2"));
    assert!(
        !p1.body.contains("Stacked on"),
        "T-1 is on the base: {}",
        p1.body
    );
    assert!(
        p2.body
            .contains(&format!("Stacked on #{} (T-1)", p1.number)),
        "{}",
        p2.body
    );
    assert!(
        p3.body
            .contains(&format!("Stacked on #{} (T-2)", p2.number)),
        "{}",
        p3.body
    );
    assert_eq!(s.files_on_branch("T-1"), ["T-1.txt"]);
    assert_eq!(s.files_on_branch("T-2"), ["T-1.txt", "T-2.txt"]);
    assert_eq!(s.files_on_branch("T-3"), ["T-1.txt", "T-2.txt", "T-3.txt"]);
    // Each task's evidence names what it was stacked on.
    let done_events = s.repo.events_of_type("task.done");
    let t3 = done_events
        .iter()
        .find(|e| e["task_id"] == "T-3")
        .expect("T-3 done");
    assert_eq!(t3["payload"]["stacked_on"][0]["task"], "T-2");
    assert_eq!(
        t3["payload"]["stacked_on"][0]["pull_request"]["number"],
        p2.number
    );
    assert_eq!(s.repo.git(&["rev-parse", "HEAD"]), head_before);
    assert_eq!(s.repo.git(&["status", "--porcelain"]), "");
}

/// T-3 depends on T-1 and T-2 (independent): it starts from their merge, its pull request goes
/// to the base branch and names both.
#[test]
fn two_unmerged_dependencies_are_merged_for_the_task_that_needs_both() {
    let plan = engine::plan(
        PLAN,
        vec![
            task("T-1", &[]),
            task("T-2", &[]),
            task("T-3", &["T-1", "T-2"]),
        ],
    );
    let s = Stack::new(plan, true);
    let out = s.run();
    done(&s, &out);
    let (p1, p2, p3) = (s.pr_of("T-1"), s.pr_of("T-2"), s.pr_of("T-3"));
    assert_eq!(p3.base, s.default_branch);
    assert!(
        p3.body.contains(&format!(
            "Stacked on #{} (T-1), #{} (T-2)",
            p1.number, p2.number
        )),
        "{}",
        p3.body
    );
    assert_eq!(s.files_on_branch("T-3"), ["T-1.txt", "T-2.txt", "T-3.txt"]);
}

/// A v4 plan's `repo_targets` entry names the repository: no `[github] repo` needed.
#[test]
fn a_plans_repo_target_names_the_repository_of_its_pull_requests() {
    let mut plan = engine::plan(PLAN, vec![task("T-1", &[])]);
    plan["repo_targets"] = json!([{"id": "api", "provider": "github", "repo_full_name": REPO}]);
    plan["tasks"][0]["repo_target_id"] = json!("api");
    let s = Stack::new(plan, false);
    let out = s.run();
    done(&s, &out);
    assert_eq!(s.pr_of("T-1").base, s.default_branch);
}

/// `git -C DIR ARGS`'s output, trimmed (a commit id, say).
fn git(dir: &Path, args: &[&str]) -> String {
    gitcli::git(dir, args).trim().to_string()
}

/// A new repository at `dir` on `main`, with an identity for its commits.
fn scratch_repo(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.name", "T"]);
    git(dir, &["config", "user.email", "t@t.invalid"]);
}

/// The workspaces of `repo`, their worktrees under `wt`.
fn workspaces(repo: &Path, wt: PathBuf) -> Workspaces {
    Workspaces::new(
        repo,
        WorkspaceConfig {
            base_dir: Some(wt),
            ..Default::default()
        },
    )
    .unwrap()
}

/// Which dependencies the base already holds: merged by a merge commit, or squashed (other
/// commits, the same content) are not stacked on; one the base lacks is.
#[test]
fn merged_and_squashed_dependencies_are_not_stacked_on() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repo");
    scratch_repo(&dir);
    git(&dir, &["commit", "-q", "--allow-empty", "-m", "init"]);
    let branch_with = |name: &str, file: &str| {
        git(&dir, &["checkout", "-q", "-b", name, "main"]);
        std::fs::write(dir.join(file), name).unwrap();
        git(&dir, &["add", file]);
        git(&dir, &["commit", "-q", "-m", name]);
        let c = git(&dir, &["rev-parse", "HEAD"]);
        git(&dir, &["checkout", "-q", "main"]);
        c
    };
    let squashed = branch_with("a", "a.txt");
    let merged = branch_with("b", "b.txt");
    let open = branch_with("c", "c.txt");
    git(&dir, &["merge", "-q", "--squash", "a"]);
    git(&dir, &["commit", "-q", "-m", "squash a"]);
    git(&dir, &["merge", "-q", "--no-ff", "-m", "merge b", "b"]);
    let base = git(&dir, &["rev-parse", "HEAD"]);
    let ws = workspaces(&dir, tmp.path().join("wt"));
    let dep = |task: &str, branch: &str, commit: &str| DeliveredDep {
        task_id: task.into(),
        branch: branch.into(),
        commit: commit.into(),
    };
    let start = ws
        .stack_start(
            &base,
            &[dep("A", "a", &squashed), dep("B", "b", &merged)],
            "origin",
            &PushAuth::default(),
        )
        .unwrap();
    assert_eq!(start.commit, base);
    assert!(start.stacked_on.is_empty());
    let start = ws
        .stack_start(
            &base,
            &[
                dep("A", "a", &squashed),
                dep("C", "c", &open),
                dep("B", "b", &merged),
            ],
            "origin",
            &PushAuth::default(),
        )
        .unwrap();
    assert_eq!(start.commit, open);
    assert_eq!(start.stacked_on, ["C"]);
}

/// A dependency delivered from another clone (another machine): its commit is fetched from the
/// branch it was pushed to; a commit the remote no longer holds is a clear error.
#[test]
fn a_dependency_pushed_from_another_clone_is_fetched() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = tmp.path().join("remote.git");
    git(
        tmp.path(),
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            remote.to_str().unwrap(),
        ],
    );
    let here = tmp.path().join("here");
    let there = tmp.path().join("there");
    for d in [&here, &there] {
        scratch_repo(d);
        git(d, &["remote", "add", "origin", remote.to_str().unwrap()]);
    }
    git(&here, &["commit", "-q", "--allow-empty", "-m", "init"]);
    git(&here, &["push", "-q", "origin", "main"]);
    git(&there, &["fetch", "-q", "origin"]);
    git(
        &there,
        &["checkout", "-q", "-b", "whilly/p/T-1", "origin/main"],
    );
    std::fs::write(there.join("a.txt"), "a").unwrap();
    git(&there, &["add", "a.txt"]);
    git(&there, &["commit", "-q", "-m", "T-1"]);
    let commit = git(&there, &["rev-parse", "HEAD"]);
    git(&there, &["push", "-q", "origin", "whilly/p/T-1"]);
    let base = git(&here, &["rev-parse", "HEAD"]);
    let ws = workspaces(&here, tmp.path().join("wt"));
    let dep = DeliveredDep {
        task_id: "T-1".into(),
        branch: "whilly/p/T-1".into(),
        commit: commit.clone(),
    };
    let start = ws
        .stack_start(
            &base,
            std::slice::from_ref(&dep),
            "origin",
            &PushAuth::default(),
        )
        .unwrap();
    assert_eq!(start.commit, commit);
    assert_eq!(start.stacked_on, ["T-1"]);
    // Rewritten on the remote: the recorded commit cannot be had.
    let gone = DeliveredDep {
        commit: "1111111111111111111111111111111111111111".into(),
        ..dep
    };
    let err = ws
        .stack_start(&base, &[gone], "origin", &PushAuth::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("T-1") && err.contains("whilly/p/T-1"), "{err}");
    assert!(err.contains("forge --compose T-1"), "{err}");
}

/// Two unmerged dependencies that change the same lines cannot be merged for the task: the
/// error names both tasks and the file, and says what to do.
#[test]
fn conflicting_dependencies_name_each_other_and_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repo");
    scratch_repo(&dir);
    std::fs::write(dir.join("shared.txt"), "base\n").unwrap();
    git(&dir, &["add", "shared.txt"]);
    git(&dir, &["commit", "-q", "-m", "init"]);
    let mut tips = Vec::new();
    for name in ["one", "two"] {
        git(&dir, &["checkout", "-q", "-b", name, "main"]);
        std::fs::write(dir.join("shared.txt"), format!("{name}\n")).unwrap();
        git(&dir, &["commit", "-qam", name]);
        tips.push(git(&dir, &["rev-parse", "HEAD"]));
        git(&dir, &["checkout", "-q", "main"]);
    }
    let base = git(&dir, &["rev-parse", "HEAD"]);
    let ws = workspaces(&dir, tmp.path().join("wt"));
    let deps: Vec<DeliveredDep> = ["T-1", "T-2"]
        .iter()
        .zip(&tips)
        .map(|(t, c)| DeliveredDep {
            task_id: t.to_string(),
            branch: format!("whilly/p/{t}"),
            commit: c.clone(),
        })
        .collect();
    let err = ws
        .stack_start(&base, &deps, "origin", &PushAuth::default())
        .unwrap_err()
        .to_string();
    for needle in [
        "T-1",
        "T-2",
        "shared.txt",
        "merge one of their pull requests first",
    ] {
        assert!(err.contains(needle), "{needle:?} missing from: {err}");
    }
}

/// Two workers in separate clones on one Postgres queue: T-1 (tag `a`) runs on the first box,
/// T-2 (tag `b`, depending on T-1) on the second, cloned before T-1 ran, so it never had T-1's
/// commit: it fetches it from the remote, starts from it, and its pull request goes on top.
#[test]
fn a_stacked_task_on_another_clone_fetches_its_dependency() {
    let mut t1 = task("T-1", &[]);
    t1["tags"] = json!(["a"]);
    let mut t2 = task("T-2", &["T-1"]);
    t2["tags"] = json!(["b"]);
    let s = Stack::new(engine::plan(PLAN, vec![t1, t2]), true);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let db = rt.block_on(support::pg::fresh_database());
    let url = db.url();
    let token = [("WHILLY_GITHUB_TOKEN", DEFAULT_TOKEN)];
    let import = s
        .repo
        .spawn_in(
            &s.repo.repo,
            &["--database-url", &url, "plan", "import", "plan.json"],
            &token,
        )
        .wait(LIMIT);
    assert_eq!(import.code, Some(0), "{}", import.stderr);
    let boxes: Vec<PathBuf> = ["box-a", "box-b"]
        .iter()
        .map(|name| {
            let dir = s.repo.home.join(name);
            git(
                s.repo.home.as_path(),
                &[
                    "clone",
                    "-q",
                    s.remote.to_str().unwrap(),
                    dir.to_str().unwrap(),
                ],
            );
            dir
        })
        .collect();
    for (dir, tag) in boxes.iter().zip(["a", "b"]) {
        let out = s
            .repo
            .spawn_in(
                dir,
                &[
                    "--database-url",
                    &url,
                    "worker",
                    "--plan",
                    PLAN,
                    "--tags",
                    tag,
                    "--until-idle",
                ],
                &token,
            )
            .wait(LIMIT);
        assert!(
            matches!(out.code, Some(0 | 2)),
            "worker {tag}: {}\n{}",
            out.stdout,
            out.stderr
        );
    }
    let shown = s
        .repo
        .spawn_in(
            &s.repo.repo,
            &["--database-url", &url, "plan", "show", PLAN, "--json"],
            &token,
        )
        .wait(LIMIT);
    let shown: Value = serde_json::from_str(&shown.stdout).unwrap();
    for t in shown["tasks"].as_array().unwrap() {
        assert_eq!(t["status"], "DONE", "{t:#}");
    }
    assert_eq!(s.pr_of("T-2").base, format!("whilly/{PLAN}/T-1"));
    assert_eq!(s.files_on_branch("T-2"), ["T-1.txt", "T-2.txt"]);
}
