//! GitHub issues in, draft pull requests out, with the real binary: labelled issues on the local
//! GitHub stand-in → `whilly plan import gh:…` → a run with a command agent → each task branch
//! pushed to a local bare remote, one draft PR per issue with the checks' evidence in its body,
//! labels moved, one status comment per issue (edited, never repeated). Re-runs change nothing.

mod support;
#[path = "support/tmux.rs"]
mod tmux;

use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;
use support::engine::{self, Repo};
use support::github_standin::{
    BadAnswer, DEFAULT_TOKEN, Fault, GitHubStandIn, Matcher, Tried, each_fails_clearly, host_of,
};

const REPO: &str = "octo/api";
const PLAN: &str = "gh-octo-api";
const LIMIT: Duration = Duration::from_secs(120);

struct Forge {
    repo: Repo,
    gh: GitHubStandIn,
    remote: PathBuf,
    _remote_dir: tempfile::TempDir,
}

fn issue_body(n: u32) -> String {
    format!(
        "The export of report {n} must be written to files/report-{n}.txt.\n\n\
## Acceptance\n- files/report-{n}.txt exists\n\n## Test\n- test -f files/report-{n}.txt\n"
    )
}

impl Forge {
    /// A repository with a bare remote, the stand-in knowing both, and an agent that writes the
    /// file its task names.
    fn new() -> Forge {
        // The agent reads the report number from its task id (GH-N → the issue's report).
        let template = r#"sh -c 'n=$(echo "$1" | tr -dc 0-9); mkdir -p files; echo "report $n" > files/report-$(grep -o "report-[0-9]*" "$2" | head -1 | tr -dc 0-9).txt; echo "<promise>COMPLETE</promise>"' agent {task_id} {prompt_file}"#;
        let repo = Repo::new(&engine::plan("unused", vec![]), template);
        let (remote_dir, remote, branch) = repo.bare_origin();
        repo.git(&["push", "-q", "origin", &branch]);
        let gh = GitHubStandIn::start();
        gh.add_repo(REPO, &branch, Some(remote.clone()));
        let mut toml = std::fs::read_to_string(repo.repo.join("whilly.toml")).unwrap();
        toml.push_str(&format!(
            "\n[github]\napi_url = {}\nrepo = \"{REPO}\"\n",
            engine::toml_str(&gh.url())
        ));
        repo.write("whilly.toml", &toml);
        repo.git(&["commit", "-qam", "github config"]);
        repo.git(&["push", "-q", "origin", &branch]);
        Forge {
            repo,
            gh,
            remote,
            _remote_dir: remote_dir,
        }
    }

    fn whilly(&self, args: &[&str]) -> engine::Output {
        self.repo
            .spawn_in(
                &self.repo.repo,
                args,
                &[("WHILLY_GITHUB_TOKEN", DEFAULT_TOKEN)],
            )
            .wait(LIMIT)
    }

    fn remote_branches(&self) -> Vec<String> {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&self.remote)
            .args(["for-each-ref", "--format=%(refname:short)", "refs/heads"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }
}

fn ok(out: &engine::Output, what: &str) {
    assert_eq!(
        out.code,
        Some(0),
        "{what} failed\nstdout:\n{}\nstderr:\n{}",
        out.stdout,
        out.stderr
    );
}

impl Forge {
    /// `[gate] llm = true` with the scripted gate agent (see [`engine::gate_llm_config`]);
    /// returns where it keeps the prompts it got.
    fn with_gate_agent(&self, mode: &str, vague: &str, clear: &str) -> PathBuf {
        let log = self.repo.shared.join("gate-prompts");
        let mut toml = std::fs::read_to_string(self.repo.repo.join("whilly.toml")).unwrap();
        toml.push_str(&engine::gate_llm_config(mode, &log, vague, clear));
        self.repo.write("whilly.toml", &toml);
        self.repo.git(&["commit", "-qam", "gate agent"]);
        log
    }
}

/// The gate's agent pass judges imported issues as it does a plan file's tasks: with
/// `--strict` the vague one is SKIPPED, every verdict is a `gate.llm_verdict` event.
#[test]
fn the_gates_agent_pass_judges_labelled_issues() {
    let f = Forge::new();
    let clear =
        f.gh.add_issue(REPO, "Write report 1", &issue_body(1), &["whilly:ready"]);
    let vague =
        f.gh.add_issue(REPO, "Write report 2", &issue_body(2), &["whilly:ready"]);
    let (clear, vague) = (format!("GH-{clear}"), format!("GH-{vague}"));
    let log = f.with_gate_agent("good", &vague, &clear);
    let out = f.whilly(&["plan", "import", &format!("gh:{REPO}"), "--strict"]);
    ok(&out, "plan import");
    assert_eq!(
        std::fs::read_dir(&log).unwrap().count(),
        1,
        "one agent call"
    );
    assert_eq!(f.repo.task(PLAN, &vague)["status"], "SKIPPED", "{out}");
    assert_eq!(f.repo.task(PLAN, &clear)["status"], "PENDING", "{out}");
    let ev = f.repo.events_of_type("gate.llm_verdict");
    assert_eq!(ev.len(), 2, "{ev:#?}");
    for (id, is_vague) in [(&vague, true), (&clear, false)] {
        let e = ev
            .iter()
            .find(|e| e["task_id"] == id.as_str())
            .unwrap_or_else(|| panic!("no verdict for {id}: {ev:#?}"));
        assert_eq!(e["plan_id"], PLAN, "{e}");
        assert_eq!(e["payload"]["vague"], is_vague, "{e}");
        assert_eq!(e["payload"]["agent"], "gatekeeper", "{e}");
    }
}

/// A board import goes through the same gate, and a gate agent that gives no usable answer
/// lets every card's task through (fail-open), with one event saying so.
#[test]
fn the_gates_agent_pass_fails_open_on_a_board_import() {
    let f = Forge::new();
    f.gh.add_repo("octo/other", "master", None);
    f.with_board();
    let log = f.with_gate_agent("never", "GH-1", "GH-2");
    let out = f.whilly(&["plan", "import", &format!("ghproject:{ORG}/1"), "--strict"]);
    ok(&out, "import from the board");
    // Asked, repaired once, then let through.
    assert_eq!(std::fs::read_dir(&log).unwrap().count(), 2);
    assert!(
        out.stderr
            .contains("decision gate: the agent pass failed, every task goes through"),
        "{}",
        out.stderr
    );
    let tasks = f.repo.tasks(BOARD_PLAN);
    assert_eq!(tasks.len(), 3, "{tasks:#?}");
    assert!(tasks.iter().all(|t| t["status"] == "PENDING"), "{tasks:#?}");
    let ev = f.repo.events_of_type("gate.llm_verdict");
    assert_eq!(ev.len(), 1, "{ev:#?}");
    assert_eq!(ev[0]["plan_id"], BOARD_PLAN);
    assert_eq!(ev[0]["payload"]["fail_open"], true);
}

#[test]
fn three_labelled_issues_become_three_draft_pull_requests() {
    let f = Forge::new();
    let mut numbers = Vec::new();
    for n in 1..=3 {
        numbers.push(f.gh.add_issue(
            REPO,
            &format!("Write report {n}"),
            &issue_body(n),
            &["whilly:ready", if n == 2 { "priority:high" } else { "bug" }],
        ));
    }
    // Not labelled: not imported.
    f.gh.add_issue(REPO, "Someday", &issue_body(9), &[]);

    let out = f.whilly(&["plan", "import", &format!("gh:{REPO}")]);
    ok(&out, "plan import");
    let tasks = f.repo.tasks(PLAN);
    let ids: Vec<&str> = tasks.iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 3, "{ids:?}");
    for n in &numbers {
        assert!(ids.contains(&format!("GH-{n}").as_str()), "{ids:?}");
    }

    let out = f.whilly(&["run", "--plan", PLAN, "--headless"]);
    ok(&out, "run");
    let complete: Value = serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(complete["event"], "complete", "{}", out.stdout);

    // Three branches on the remote, three draft PRs with the evidence.
    let branches = f.remote_branches();
    let prs = f.gh.prs(REPO);
    assert_eq!(prs.len(), 3, "{prs:#?}");
    for n in &numbers {
        let branch = format!("whilly/{PLAN}/GH-{n}");
        assert!(branches.contains(&branch), "{branches:?}");
        let pr = prs
            .iter()
            .find(|p| p.head == branch)
            .expect("a PR per branch");
        assert!(pr.draft, "draft by default");
        assert!(
            pr.title.starts_with(&format!("GH-{n}: Write report")),
            "{}",
            pr.title
        );
        assert!(pr.body.contains(&format!("Closes #{n}")), "{}", pr.body);
        assert!(pr.body.contains("## Verification evidence"));
        assert!(
            pr.body
                .contains(&format!("`test -f files/report-{n}.txt` | 0 |")),
            "{}",
            pr.body
        );
        assert!(pr.body.contains("Human review required"));
        if std::env::var_os("WHILLY_SHOW_PR").is_some() {
            eprintln!("--- {}\n{}\n---", pr.title, pr.body);
        }
        let issue = f.gh.issue(REPO, *n).unwrap();
        assert!(
            issue.labels.contains(&"whilly:in-review".to_string()),
            "{:?}",
            issue.labels
        );
        assert!(!issue.labels.contains(&"whilly:ready".to_string()));
        assert!(!issue.labels.contains(&"whilly:in-progress".to_string()));
        let status: Vec<_> =
            f.gh.comments(REPO, *n)
                .into_iter()
                .filter(|c| c.body.starts_with("<!-- whilly:status"))
                .collect();
        assert_eq!(status.len(), 1, "one status comment: {status:#?}");
        assert!(status[0].edits >= 1, "started, then edited to in review");
        assert!(status[0].body.contains("/pull/"), "{}", status[0].body);
    }
    let tasks = f.repo.tasks(PLAN);
    assert!(tasks.iter().all(|t| t["status"] == "DONE"), "{tasks:#?}");
    // The audit trail names each PR.
    let opened = f.repo.events_of_type("github.pr_opened");
    assert_eq!(opened.len(), 3);
    assert!(
        opened
            .iter()
            .all(|e| e["payload"]["url"].as_str().unwrap().contains("/pull/"))
    );
    // Never more than one change per second.
    let muts = f.gh.mutations();
    for w in muts.windows(2) {
        let gap = w[1].at.duration_since(w[0].at);
        assert!(gap >= Duration::from_millis(950), "mutations {gap:?} apart");
    }

    // Re-running changes nothing on GitHub.
    f.gh.clear_requests();
    ok(
        &f.whilly(&["plan", "import", &format!("gh:{REPO}")]),
        "re-import",
    );
    ok(&f.whilly(&["run", "--plan", PLAN, "--headless"]), "re-run");
    assert!(f.gh.mutations().is_empty(), "{:#?}", f.gh.mutations());
    assert_eq!(f.gh.prs(REPO).len(), 3);
}

#[test]
fn a_closed_issue_skips_its_pending_task_and_a_changed_one_updates_it() {
    let f = Forge::new();
    let a =
        f.gh.add_issue(REPO, "Write report 1", &issue_body(1), &["whilly:ready"]);
    let b =
        f.gh.add_issue(REPO, "Write report 2", &issue_body(2), &["whilly:ready"]);
    ok(
        &f.whilly(&["plan", "import", &format!("gh:{REPO}")]),
        "import",
    );
    f.gh.close_issue(REPO, a);
    f.gh.edit_issue(REPO, b, "Write report 2 twice", &issue_body(2));
    let out = f.whilly(&["plan", "import", &format!("gh:{REPO}"), "--json"]);
    ok(&out, "re-import");
    let t1 = f.repo.task(PLAN, &format!("GH-{a}"));
    assert_eq!(t1["status"], "SKIPPED", "{t1:#?}");
    assert_eq!(t1["reason"], "closed_upstream");
    let t2 = f.repo.task(PLAN, &format!("GH-{b}"));
    assert_eq!(t2["status"], "PENDING");
    assert!(
        t2["spec"]["description"]
            .as_str()
            .unwrap()
            .starts_with("Write report 2 twice"),
        "{t2:#?}"
    );
}

#[test]
fn a_secret_in_an_issue_is_refused_by_number_and_never_imported() {
    let f = Forge::new();
    let token = format!("ghp_{}", "Zx9Q".repeat(9));
    let bad = f.gh.add_issue(
        REPO,
        "Deploy it",
        &format!("{}\nuse {token} for the deploy", issue_body(1)),
        &["whilly:ready"],
    );
    let good =
        f.gh.add_issue(REPO, "Write report 2", &issue_body(2), &["whilly:ready"]);
    let out = f.whilly(&["plan", "import", &format!("gh:{REPO}")]);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(out.stderr.contains(&format!("#{bad}")), "{}", out.stderr);
    assert!(!out.stderr.contains(&token) && !out.stdout.contains(&token));
    let ids: Vec<String> = f
        .repo
        .tasks(PLAN)
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, vec![format!("GH-{good}")]);
    let db = std::fs::read(f.repo.repo.join(".whilly/whilly.db")).unwrap_or_default();
    assert!(!String::from_utf8_lossy(&db).contains(&token));
}

#[test]
fn a_refused_token_and_a_missing_issue_say_what_and_where() {
    let f = Forge::new();
    f.gh.set_token("ghp_anotheraccepted00000000000000000000");
    let out = f.whilly(&["plan", "import", &format!("gh:{REPO}")]);
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    assert!(out.stderr.contains("WHILLY_GITHUB_TOKEN"), "{}", out.stderr);
    assert!(out.stderr.contains("refused"), "{}", out.stderr);
    f.gh.set_token(DEFAULT_TOKEN);
    let out = f.whilly(&["forge", &format!("{REPO}#77"), "--as-task", "--headless"]);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!("{REPO}#77 not found")),
        "{}",
        out.stderr
    );
}

#[test]
fn forge_runs_one_issue_to_a_pull_request_and_a_second_forge_reports_it() {
    let f = Forge::new();
    let n = f.gh.add_issue(REPO, "Write report 5", &issue_body(5), &[]);
    f.gh.add_comment(REPO, n, "octocat", "Keep the file short.");
    let out = f.whilly(&["forge", &format!("{REPO}#{n}"), "--as-task", "--headless"]);
    ok(&out, "forge");
    let plan = format!("gh-octo-api-{n}");
    let prs = f.gh.prs(REPO);
    assert_eq!(prs.len(), 1, "{prs:#?}");
    assert!(prs[0].body.contains(&format!("Closes #{n}")));
    assert!(
        prs[0].body.contains("Keep the file short."),
        "comments are part of the task"
    );
    assert_eq!(f.repo.tasks(&plan).len(), 1);
    f.gh.clear_requests();
    let again = f.whilly(&[
        "forge",
        &format!("https://github.com/{REPO}/issues/{n}"),
        "--as-task",
        "--headless",
    ]);
    ok(&again, "second forge");
    assert!(again.stdout.contains("has ended"), "{}", again.stdout);
    assert!(f.gh.mutations().is_empty());
    assert_eq!(f.gh.prs(REPO).len(), 1);
}

#[test]
fn a_vague_issue_gets_one_comment_and_nothing_runs() {
    let f = Forge::new();
    let n = f.gh.add_issue(REPO, "Fix it", "broken", &[]);
    for _ in 0..2 {
        let out = f.whilly(&["forge", &format!("{REPO}#{n}"), "--as-task", "--headless"]);
        assert_eq!(out.code, Some(1), "{}", out.stderr);
        assert!(out.stderr.contains("too vague"), "{}", out.stderr);
    }
    let comments = f.gh.comments(REPO, n);
    assert_eq!(comments.len(), 1, "{comments:#?}");
    assert!(comments[0].body.contains("needs more"));
    assert!(f.gh.prs(REPO).is_empty());
}

#[test]
fn a_failing_pull_request_keeps_the_work_and_compose_finishes_it() {
    let f = Forge::new();
    let n =
        f.gh.add_issue(REPO, "Write report 3", &issue_body(3), &["whilly:ready"]);
    ok(
        &f.whilly(&["plan", "import", &format!("gh:{REPO}")]),
        "import",
    );
    f.gh.fail_next(
        Matcher::new("POST", &format!("/repos/{REPO}/pulls")),
        Fault::Status(502, "Bad Gateway".into()),
        20,
    );
    let _ = f.whilly(&["run", "--plan", PLAN, "--headless"]);
    let t = f.repo.task(PLAN, &format!("GH-{n}"));
    assert_eq!(t["status"], "HUMAN_LOOP", "{t:#?}");
    assert_eq!(t["reason"], "not_published");
    let branch = format!("whilly/{PLAN}/GH-{n}");
    assert!(
        f.remote_branches().contains(&branch),
        "the branch was pushed"
    );
    assert!(f.gh.prs(REPO).is_empty());
    f.gh.clear_faults();
    let out = f.whilly(&["forge", "--compose", &format!("GH-{n}")]);
    ok(&out, "compose");
    assert_eq!(f.repo.task(PLAN, &format!("GH-{n}"))["status"], "DONE");
    let prs = f.gh.prs(REPO);
    assert_eq!(prs.len(), 1);
    assert!(prs[0].body.contains("## Verification evidence"));
}

#[test]
fn an_import_follows_pages_past_a_hundred_issues() {
    let f = Forge::new();
    for n in 1..=130u32 {
        f.gh.add_issue(
            REPO,
            &format!("Write report {n}"),
            &issue_body(n),
            &["whilly:ready"],
        );
    }
    ok(
        &f.whilly(&["plan", "import", &format!("gh:{REPO}")]),
        "import",
    );
    assert_eq!(f.repo.tasks(PLAN).len(), 130);
    let pages =
        f.gh.requests()
            .iter()
            .filter(|r| r.method == "GET" && r.route == format!("/repos/{REPO}/issues"))
            .count();
    assert!(pages >= 2, "one page cannot hold 130 issues: {pages}");
}

#[test]
fn config_show_names_the_token_source_and_never_the_token() {
    let f = Forge::new();
    let out = f.whilly(&["config", "show", "github"]);
    ok(&out, "config show");
    assert!(
        out.stdout
            .contains("# github token: from WHILLY_GITHUB_TOKEN"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains(DEFAULT_TOKEN));
}

#[test]
fn the_console_shows_each_task_s_pull_request_as_github_has_it_now() {
    let f = Forge::new();
    let a =
        f.gh.add_issue(REPO, "Write report 1", &issue_body(1), &["whilly:ready"]);
    let b =
        f.gh.add_issue(REPO, "Write report 2", &issue_body(2), &["whilly:ready"]);
    ok(
        &f.whilly(&["plan", "import", &format!("gh:{REPO}")]),
        "import",
    );
    ok(&f.whilly(&["run", "--plan", PLAN, "--headless"]), "run");
    let prs = f.gh.prs(REPO);
    assert_eq!(prs.len(), 2);
    let pr_of = |issue: u64| {
        prs.iter()
            .find(|p| p.head == format!("whilly/{PLAN}/GH-{issue}"))
            .map(|p| p.number)
            .unwrap()
    };
    let (merged, draft) = (pr_of(a), pr_of(b));
    // A reviewer merges one while nobody watches.
    f.gh.set_pr_merged(REPO, merged);

    let script = console_script(&f, &format!("tui --plan {PLAN}"));
    let before = f.gh.mutations().len();
    let t = tmux::Tmux::start("pulls", &f.repo.repo);
    t.literal(&format!("sh {}", script.display()));
    t.keys(&["Enter"]);
    let screen = t.wait("both pull requests in the task list", 60, |s| {
        s.contains(&format!("PR#{merged} merged")) && s.contains(&format!("PR#{draft} draft"))
    });
    assert!(screen.contains("Issue/PR"), "{screen}");
    if std::env::var_os("WHILLY_TUI_E2E_SHOW").is_some() {
        eprintln!("{screen}");
    }
    t.literal("q");
    let s = t.wait("shell after quit", 30, |s| s.contains("EXIT="));
    assert!(s.contains("EXIT=0"), "{s}");
    assert_eq!(
        f.gh.mutations().len(),
        before,
        "looking at pull requests changes nothing on GitHub"
    );
}

/// A build box: another clone, another process, one Postgres queue. Its worker delivers to the
/// shared remote and opens the PR; the operator's checkout is not touched.
#[test]
fn a_worker_on_another_clone_delivers_to_the_shared_remote() {
    let f = Forge::new();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let db = rt.block_on(support::pg::fresh_database());
    let url = db.url();
    let n =
        f.gh.add_issue(REPO, "Write report 4", &issue_body(4), &["whilly:ready"]);
    let head_before = f.repo.git(&["rev-parse", "HEAD"]);
    ok(
        &f.whilly(&[
            "--database-url",
            &url,
            "plan",
            "import",
            &format!("gh:{REPO}"),
        ]),
        "import",
    );
    let box_dir = f.repo.home.join("build-box");
    let cloned = std::process::Command::new("git")
        .args(["clone", "-q"])
        .arg(&f.remote)
        .arg(&box_dir)
        .output()
        .unwrap();
    assert!(cloned.status.success(), "{cloned:?}");
    let out = f
        .repo
        .spawn_in(
            &box_dir,
            &["--database-url", &url, "worker", "--until-idle"],
            &[("WHILLY_GITHUB_TOKEN", DEFAULT_TOKEN)],
        )
        .wait(LIMIT);
    ok(&out, "worker on the build box");
    let shown = f.whilly(&["--database-url", &url, "plan", "show", PLAN, "--json"]);
    ok(&shown, "plan show");
    let shown: Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(shown["tasks"][0]["status"], "DONE", "{shown:#?}");
    let branch = format!("whilly/{PLAN}/GH-{n}");
    assert!(f.remote_branches().contains(&branch));
    let prs = f.gh.prs(REPO);
    assert_eq!(prs.len(), 1);
    assert_eq!(prs[0].head, branch);
    assert_eq!(
        f.repo.git(&["rev-parse", "HEAD"]),
        head_before,
        "the operator's checkout is not touched"
    );
    let issue = f.gh.issue(REPO, n).unwrap();
    assert!(issue.labels.contains(&"whilly:in-review".to_string()));
}

/// A script running `whilly ARGS` in the sealed environment, on a terminal, with the token.
fn console_script(f: &Forge, args: &str) -> PathBuf {
    tmux::whilly_script(
        &f.repo,
        &[
            ("WHILLY_GITHUB_TOKEN", DEFAULT_TOKEN.to_string()),
            ("TERM", "xterm-256color".into()),
        ],
        args,
    )
}

#[test]
fn forge_on_a_terminal_runs_in_the_console() {
    let f = Forge::new();
    let n = f.gh.add_issue(REPO, "Write report 6", &issue_body(6), &[]);
    let script = console_script(&f, &format!("forge {REPO}#{n} --as-task"));
    let t = tmux::Tmux::start("forge", &f.repo.repo);
    t.literal(&format!("sh {}", script.display()));
    t.keys(&["Enter"]);
    let plan = format!("gh-octo-api-{n}");
    let screen = t.wait(
        "the console, the run finished, the PR in the list",
        60,
        |s| {
            s.contains(&format!("whilly {plan}")) && s.contains("Run finished") && s.contains("PR#")
        },
    );
    assert!(screen.contains(&format!("GH-{n}")), "{screen}");
    t.literal("q");
    let s = t.wait("shell after quit", 30, |s| s.contains("EXIT="));
    assert!(s.contains("EXIT=0"), "{s}");
    assert_eq!(f.gh.prs(REPO).len(), 1);
}

const ORG: &str = "octo";
const BOARD_PLAN: &str = "ghproject-octo-1";

impl Forge {
    /// A board of 250 cards (so reading it takes three pages) with only some of the columns,
    /// three ready issues of the repository in Todo, and `[github.project]` naming it.
    fn with_board(&self) -> Vec<(u64, String)> {
        self.gh
            .add_project(ORG, true, 1, "Roadmap", &["Todo", "In Progress", "Done"]);
        for n in 0..246 {
            let i = self
                .gh
                .add_issue("octo/other", &format!("old {n}"), "old work", &[]);
            self.gh
                .add_project_item(ORG, 1, "octo/other", i, Some("Done"));
        }
        self.gh.add_redacted_item(ORG, 1);
        let mut ours = Vec::new();
        for n in 1..=3u32 {
            let i = self
                .gh
                .add_issue(REPO, &format!("Write report {n}"), &issue_body(n), &[]);
            let card = self.gh.add_project_item(ORG, 1, REPO, i, Some("Todo"));
            ours.push((i, card));
        }
        let mut toml = std::fs::read_to_string(self.repo.repo.join("whilly.toml")).unwrap();
        toml.push_str(&format!(
            "\n[github.project]\nowner = \"{ORG}\"\nnumber = 1\n"
        ));
        self.repo.write("whilly.toml", &toml);
        self.repo.git(&["commit", "-qam", "board config"]);
        ours
    }

    fn column_of(&self, card: &str) -> (Option<String>, Vec<String>) {
        let item = self
            .gh
            .project_items(ORG, 1)
            .into_iter()
            .find(|i| i.id == card)
            .unwrap();
        (item.status, item.status_changes)
    }
}

#[test]
fn a_board_column_is_taken_in_and_its_cards_follow_the_work() {
    let f = Forge::new();
    f.gh.add_repo("octo/other", "master", None);
    let ours = f.with_board();
    let out = f.whilly(&[
        "plan",
        "import",
        &format!("ghproject:{ORG}/1"),
        "--ensure-board-statuses",
    ]);
    ok(&out, "import from the board");
    assert!(out.stderr.contains("added In Review"), "{}", out.stderr);
    assert!(
        out.stderr.contains("1 card(s)"),
        "the redacted card: {}",
        out.stderr
    );
    let ids: Vec<String> = f
        .repo
        .tasks(BOARD_PLAN)
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 3, "only the Todo column's issues: {ids:?}");
    // The existing columns kept their cards.
    assert!(
        f.gh.project_items(ORG, 1)
            .iter()
            .filter(|i| i.repo.as_deref() == Some("octo/other"))
            .all(|i| i.status.as_deref() == Some("Done"))
    );

    ok(
        &f.whilly(&["run", "--plan", BOARD_PLAN, "--headless"]),
        "run",
    );
    for (_, card) in &ours {
        let (column, changes) = f.column_of(card);
        assert_eq!(column.as_deref(), Some("In Review"), "{changes:?}");
        // Put back in Todo when the columns were added (GitHub cleared it), then moved forward
        // only, each move once (the sync waits for a quiet moment).
        assert_eq!(changes[0], "Todo", "{changes:?}");
        let moves = &changes[1..];
        assert!(moves.len() <= 2, "{changes:?}");
        assert!(moves.windows(2).all(|w| w[0] != w[1]), "{changes:?}");
    }
    let status = f.whilly(&["board", "status"]);
    ok(&status, "board status");
    assert!(
        status.stdout.contains("0 card(s) out of step"),
        "{}",
        status.stdout
    );

    // Someone drags a card back; a reviewer merges another's pull request.
    f.gh.move_project_item(ORG, 1, &ours[0].1, Some("Todo"));
    let merged =
        f.gh.prs(REPO)
            .into_iter()
            .find(|p| p.head == format!("whilly/{BOARD_PLAN}/GH-{}", ours[1].0))
            .unwrap();
    f.gh.set_pr_merged(REPO, merged.number);
    let status = f.whilly(&["board", "status"]);
    assert_eq!(status.code, Some(1), "drift is exit 1: {}", status.stdout);
    assert!(status.stdout.contains("(drift)"), "{}", status.stdout);
    ok(&f.whilly(&["board", "sync"]), "board sync");
    assert_eq!(f.column_of(&ours[0].1).0.as_deref(), Some("In Review"));
    assert_eq!(f.column_of(&ours[1].1).0.as_deref(), Some("Done"));
    assert_eq!(f.column_of(&ours[2].1).0.as_deref(), Some("In Review"));
    let moved = f.repo.events_of_type("board.card_moved");
    assert!(moved.len() >= 5, "{moved:#?}");
    assert!(moved.iter().all(|e| e["payload"]["to"].is_string()));
}

#[test]
fn a_failing_board_never_fails_the_work() {
    let f = Forge::new();
    f.gh.add_repo("octo/other", "master", None);
    let ours = f.with_board();
    ok(
        &f.whilly(&["plan", "import", &format!("ghproject:{ORG}/1")]),
        "import",
    );
    f.gh.fail_next(
        Matcher::graphql("updateProjectV2ItemFieldValue"),
        Fault::Status(502, "Bad Gateway".into()),
        1000,
    );
    let out = f.whilly(&["run", "--plan", BOARD_PLAN, "--headless"]);
    ok(&out, "run with the board down");
    for t in f.repo.tasks(BOARD_PLAN) {
        assert_eq!(t["status"], "DONE", "{t:#?}");
    }
    assert!(!f.repo.events_of_type("board.sync_failed").is_empty());
    f.gh.clear_faults();
    ok(&f.whilly(&["board", "ensure"]), "ensure");
    ok(
        &f.whilly(&["board", "sync"]),
        "a later sync fixes the drift",
    );
    for (_, card) in &ours {
        assert_eq!(f.column_of(card).0.as_deref(), Some("In Review"));
    }
}

impl Forge {
    /// `[github] timeout_secs`: how long one request may take.
    fn with_timeout(&self, secs: u64) {
        let toml = std::fs::read_to_string(self.repo.repo.join("whilly.toml")).unwrap();
        let toml = toml.replacen(
            "\n[github]\n",
            &format!("\n[github]\ntimeout_secs = {secs}\n"),
            1,
        );
        self.repo.write("whilly.toml", &toml);
        self.repo.git(&["commit", "-qam", "github timeout"]);
    }

    fn plan_ids(&self) -> String {
        let out = self.whilly(&["plan", "list"]);
        ok(&out, "plan list");
        out.stdout
    }
}

/// Bad answers to an import's list of issues (issue 26, item 7): a proxy's HTML page, a 200
/// with the wrong shape, 48 MiB of body, a server that never answers. Each ends the import
/// with an error naming GitHub's host and the request, within the request timeout and the
/// answer cap, and no plan is half-made; an answer broken off mid-body is read again.
#[test]
fn bad_answers_to_an_import_name_the_host_and_the_request() {
    let f = Forge::new();
    f.with_timeout(2);
    f.gh.add_issue(REPO, "Write report 1", &issue_body(1), &["whilly:ready"]);
    let issues = Matcher::new("GET", &format!("/repos/{REPO}/issues"));
    let host = host_of(&f.gh.url());
    let cases = [
        (
            BadAnswer::Html(502),
            "an HTML page titled \"502 Bad Gateway\"",
        ),
        (
            BadAnswer::WrongShape(serde_json::json!({"message": "fine"})),
            "expected a list",
        ),
        (BadAnswer::Huge(48 << 20), "larger than 32 MiB"),
        (BadAnswer::Hang, "timed out"),
    ];
    each_fails_clearly(
        &cases,
        &host,
        &format!("GET /repos/{REPO}/issues"),
        |bad| f.gh.fail_next(issues.clone(), Fault::Bad(bad.clone()), 100),
        || f.gh.clear_faults(),
        || {
            let out = f.whilly(&["plan", "import", &format!("gh:{REPO}")]);
            Tried {
                code: out.code,
                stderr: out.stderr,
            }
        },
        || match f.plan_ids().contains(PLAN) {
            false => Ok(()),
            true => Err(format!("a plan was made: {}", f.plan_ids())),
        },
    );
    f.gh.fail_next(issues, Fault::Bad(BadAnswer::CutShort), 1);
    let out = f.whilly(&["plan", "import", &format!("gh:{REPO}")]);
    ok(&out, "an import whose answer broke off once");
    assert_eq!(f.repo.tasks(PLAN).len(), 1);
}

/// The answer to a new pull request breaks off after GitHub opened it: whilly finds that one
/// instead of opening a second, and the task is DONE with it. An HTML page for every try
/// parks the work, which a later compose publishes.
#[test]
fn a_lost_answer_to_a_new_pull_request_opens_no_second_one() {
    let f = Forge::new();
    let a =
        f.gh.add_issue(REPO, "Write report 1", &issue_body(1), &["whilly:ready"]);
    ok(
        &f.whilly(&["plan", "import", &format!("gh:{REPO}")]),
        "import",
    );
    let pulls = Matcher::new("POST", &format!("/repos/{REPO}/pulls"));
    f.gh.fail_next(pulls.clone(), Fault::Bad(BadAnswer::CutShort), 1);
    ok(&f.whilly(&["run", "--plan", PLAN, "--headless"]), "run");
    let t = f.repo.task(PLAN, &format!("GH-{a}"));
    assert_eq!(t["status"], "DONE", "{t:#?}");
    let prs = f.gh.prs(REPO);
    assert_eq!(prs.len(), 1, "one pull request: {prs:#?}");
    let b =
        f.gh.add_issue(REPO, "Write report 2", &issue_body(2), &["whilly:ready"]);
    ok(
        &f.whilly(&["plan", "import", &format!("gh:{REPO}")]),
        "import",
    );
    f.gh.fail_next(pulls, Fault::Bad(BadAnswer::Html(502)), 100);
    let _ = f.whilly(&["run", "--plan", PLAN, "--headless"]);
    let t = f.repo.task(PLAN, &format!("GH-{b}"));
    assert_eq!(t["status"], "HUMAN_LOOP", "{t:#?}");
    let parked = f.repo.events_of_type("task.human_loop");
    assert!(
        parked.iter().any(|e| e["payload"]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("502 Bad Gateway"))),
        "{parked:#?}"
    );
    f.gh.clear_faults();
    ok(
        &f.whilly(&["forge", "--compose", &format!("GH-{b}")]),
        "compose",
    );
    assert_eq!(f.repo.task(PLAN, &format!("GH-{b}"))["status"], "DONE");
    assert_eq!(f.gh.prs(REPO).len(), 2);
}

/// Whilly's client on the stand-in's GitHub (no pacing between changes).
fn client(gh: &GitHubStandIn) -> whilly::forge::github::GitHub {
    whilly::forge::github::GitHub::new(whilly::forge::github::GitHubOptions {
        api_url: gh.url(),
        token: whilly::config::SecretString::new(DEFAULT_TOKEN),
        token_source: whilly::forge::github::TokenSource::WhillyEnv("WHILLY_GITHUB_TOKEN".into()),
        max_wait: Duration::from_secs(5),
        mutation_interval: Duration::ZERO,
        timeout: Duration::from_secs(60),
    })
    .unwrap()
}

/// Each card's column, in board order.
fn columns(gh: &GitHubStandIn) -> Vec<Option<String>> {
    gh.project_items(ORG, 1)
        .into_iter()
        .map(|i| i.status)
        .collect()
}

/// A board with `cards` issues over three columns (every fourth in none) and a redacted card.
fn board_of_cards(gh: &GitHubStandIn, cards: u64) {
    gh.add_repo("octo/other", "master", None);
    gh.add_project(ORG, true, 1, "Roadmap", &["Todo", "In Progress", "Done"]);
    let columns = [Some("Todo"), Some("In Progress"), Some("Done"), None];
    for n in 0..cards {
        let i = gh.add_issue("octo/other", &format!("card {n}"), "", &[]);
        gh.add_project_item(ORG, 1, "octo/other", i, columns[(n % 4) as usize]);
    }
    gh.add_redacted_item(ORG, 1);
    gh.move_project_item(
        ORG,
        1,
        &gh.project_items(ORG, 1).last().unwrap().id,
        Some("Done"),
    );
}

/// GitHub replaces a field's whole option list (every option gets a new id, every card loses
/// its column): adding columns reads the cards' columns first, then puts each card back, many
/// to a request, and keeps the columns' colors and descriptions.
#[tokio::test]
async fn adding_columns_puts_every_card_back_in_its_column() {
    let gh = GitHubStandIn::start();
    board_of_cards(&gh, 60);
    let gh_client = client(&gh);
    let board = gh_client.board(ORG, 1, "Status").await.unwrap();
    let before = columns(&gh);
    let options_before = gh_client.column_options(&board).await.unwrap();
    gh.clear_requests();

    let missing = ["In Review".to_string(), "todo".into(), "In Review".into()];
    let done = gh_client
        .add_columns_keeping_cards(&board, &missing)
        .await
        .unwrap();
    assert_eq!(done.added, ["In Review"]);
    assert_eq!(
        gh.project_options(ORG, 1),
        ["Todo", "In Progress", "Done", "In Review"]
    );
    assert_eq!(columns(&gh), before, "every card is back in its column");
    let had_one = before.iter().filter(|c| c.is_some()).count();
    assert_eq!(done.cards_reset, had_one);
    assert!(had_one > 25, "more than one request's worth: {had_one}");
    // New option ids, which the board returned has.
    for (id, name) in &done.board.columns {
        assert_ne!(board.column_id(name), Some(id.as_str()), "{name}");
    }
    let options_after = gh_client.column_options(&done.board).await.unwrap();
    assert_eq!(options_after[..3], options_before[..]);
    // One change of the field, then the cards 25 to a request, one per card at most.
    let mutations = gh.mutations();
    assert_eq!(mutations.len(), 1 + had_one.div_ceil(25), "{}", gh.log());
    for item in gh.project_items(ORG, 1) {
        assert!(item.status_changes.len() <= 1, "{:?}", item.status_changes);
    }

    // Nothing is missing any more: nothing is sent.
    gh.clear_requests();
    let again = gh_client
        .add_columns_keeping_cards(&done.board, &missing)
        .await
        .unwrap();
    assert!(again.added.is_empty());
    assert_eq!(again.cards_reset, 0);
    assert!(gh.mutations().is_empty(), "{}", gh.log());
}

#[tokio::test]
async fn cards_that_cannot_be_put_back_are_named_in_the_error() {
    let gh = GitHubStandIn::start();
    board_of_cards(&gh, 3);
    let gh_client = client(&gh);
    let board = gh_client.board(ORG, 1, "Status").await.unwrap();
    gh.fail_next(
        Matcher::graphql("updateProjectV2ItemFieldValue"),
        Fault::Status(422, "Unprocessable".into()),
        1,
    );
    let e = gh_client
        .add_columns(&board, &["In Review".to_string()])
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("added the column(s) In Review"), "{e}");
    assert!(e.contains("0 card(s) were put back, 4 could not be"), "{e}");
    assert!(e.contains("octo/other#1 → Todo"), "{e}");
    assert!(e.contains("Set those by hand"), "{e}");
    assert_eq!(
        gh.project_options(ORG, 1),
        ["Todo", "In Progress", "Done", "In Review"]
    );
}

/// `whilly board ensure` on a board whose cards are not Whilly's: every card keeps its column.
#[test]
fn board_ensure_keeps_every_card_in_its_column() {
    let f = Forge::new();
    board_of_cards(&f.gh, 40);
    let mut toml = std::fs::read_to_string(f.repo.repo.join("whilly.toml")).unwrap();
    toml.push_str(&format!(
        "\n[github.project]\nowner = \"{ORG}\"\nnumber = 1\n"
    ));
    f.repo.write("whilly.toml", &toml);
    f.repo.git(&["commit", "-qam", "board config"]);
    let before = columns(&f.gh);
    let out = f.whilly(&["board", "ensure"]);
    ok(&out, "board ensure");
    assert!(out.stdout.contains("added In Review"), "{}", out.stdout);
    let had_one = before.iter().filter(|c| c.is_some()).count();
    assert!(
        out.stdout
            .contains(&format!("{had_one} card(s) put back in their column")),
        "{}",
        out.stdout
    );
    assert_eq!(columns(&f.gh), before);
    let out = f.whilly(&["board", "ensure"]);
    ok(&out, "board ensure again");
    assert!(out.stdout.contains("has every column"), "{}", out.stdout);
    assert_eq!(columns(&f.gh), before);
}
