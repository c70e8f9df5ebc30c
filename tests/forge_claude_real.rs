//! `whilly forge owner/repo#N` with the real Claude Code CLI, end to end: the issue (with a
//! comment) on the GitHub stand-in → the PRD pipeline's read-only plan call → the task run by the
//! CLI in its worktree (a real Bash tool call) → the branch pushed to a bare remote → one draft
//! pull request with the checks' evidence, labels moved, one status comment. A second forge
//! reports the ended plan and changes nothing. The CLI talks to the local scripted model server.

#[path = "support/claude_bin.rs"]
mod claude_bin;
#[path = "support/claude_env.rs"]
mod claude_env;
#[path = "support/engine.rs"]
mod engine;
#[path = "support/github_standin.rs"]
mod github_standin;
#[path = "support/model_server.rs"]
mod model_server;

use claude_env::{claude_bin, claude_repo, run_whilly_with};
use github_standin::{DEFAULT_TOKEN, GitHubStandIn};
use model_server::{ModelServer, Rule, Scenario};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(240);
const REPO: &str = "octo/api";

const PLAN: &str = r#"```json
{"project": "octo/api", "plan_id": "x", "tasks": [
  {"id": "TASK-001", "status": "pending", "priority": "high",
   "description": "Write the weekly report to reports/weekly.txt so the export job can pick it up.",
   "acceptance_criteria": ["reports/weekly.txt exists and is not empty"],
   "test_steps": ["test -s reports/weekly.txt"],
   "key_files": ["reports/weekly.txt"]}
]}
```"#;

#[test]
fn forge_with_the_real_cli_opens_one_draft_pull_request() {
    let Some(bin) = claude_bin() else { return };
    let repo = claude_repo(&engine::plan("unused", vec![]), &bin, 1);
    let (_remote_dir, remote, branch) = repo.bare_origin();
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

    let n = gh.add_issue(
        REPO,
        "Write the weekly report",
        "The export job needs the weekly report in reports/weekly.txt.\n\n\
## Acceptance\n- reports/weekly.txt exists and is not empty\n\n## Test\n- test -s reports/weekly.txt\n",
        &["whilly:ready"],
    );
    gh.add_comment(REPO, n, "octocat", "One line is enough.");
    let server = ModelServer::start(Scenario::Rules(vec![
        Rule::new(&["Turn the product requirements document"], PLAN),
        Rule::bash(
            &["# Whilly task TASK-001"],
            "mkdir -p reports && echo 'weekly: all green' > reports/weekly.txt",
        ),
    ]));
    let env = [("WHILLY_GITHUB_TOKEN", DEFAULT_TOKEN)];
    let issue = format!("{REPO}#{n}");
    let out = run_whilly_with(
        &repo,
        &server,
        &["forge", &issue, "--headless"],
        &env,
        LIMIT,
    );
    assert_eq!(
        out.code,
        Some(0),
        "{}\n{}\n--- server\n{}",
        out.stdout,
        out.stderr,
        server.log()
    );

    // The plan call saw the issue and its comment, fenced as someone else's text.
    let main: Vec<_> = server.requests().into_iter().filter(|r| r.main).collect();
    let plan_call = main
        .iter()
        .map(|r| r.body.as_ref().unwrap().to_string())
        .find(|b| b.contains("Turn the product requirements document"))
        .expect("a plan call");
    assert!(plan_call.contains("One line is enough."));
    assert!(plan_call.contains("written by someone outside this project"));

    let plan = format!("gh-octo-api-{n}");
    let t = repo.task(&plan, "TASK-001");
    assert_eq!(t["status"], "DONE", "{t:#?}");
    let pushed = std::process::Command::new("git")
        .arg("-C")
        .arg(&remote)
        .args([
            "show",
            &format!("whilly/{plan}/TASK-001:reports/weekly.txt"),
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&pushed.stdout),
        "weekly: all green\n",
        "the CLI's work is on the pushed branch"
    );
    let prs = gh.prs(REPO);
    assert_eq!(prs.len(), 1, "{prs:#?}");
    let pr = &prs[0];
    assert!(pr.draft);
    assert_eq!(pr.head, format!("whilly/{plan}/TASK-001"));
    assert!(pr.title.starts_with("TASK-001: "), "{}", pr.title);
    for needle in [
        &format!("Closes #{n}"),
        "## Verification evidence",
        "test -s reports/weekly.txt",
        "Human review required",
    ] {
        assert!(pr.body.contains(needle), "{needle:?} not in\n{}", pr.body);
    }
    let labels = gh.issue(REPO, n).unwrap().labels;
    assert!(
        labels.contains(&"whilly:in-review".to_string()),
        "{labels:?}"
    );
    assert!(!labels.contains(&"whilly:ready".to_string()), "{labels:?}");
    let status: Vec<_> = gh
        .comments(REPO, n)
        .into_iter()
        .filter(|c| c.body.contains("Ready for review"))
        .collect();
    assert_eq!(status.len(), 1, "one status comment, edited in place");

    // Again: the same plan, reported; nothing on GitHub changes.
    gh.clear_requests();
    let again = run_whilly_with(
        &repo,
        &server,
        &["forge", &issue, "--headless"],
        &env,
        LIMIT,
    );
    assert_eq!(again.code, Some(0), "{}\n{}", again.stdout, again.stderr);
    assert!(again.stdout.contains("has ended"), "{}", again.stdout);
    assert!(gh.mutations().is_empty(), "{:#?}", gh.mutations());
    assert_eq!(gh.prs(REPO).len(), 1);
}
