//! Jira issues in and in lock-step, with the real binary against the local Jira stand-in:
//! a JQL import of 30 issues read over 3 pages → a run with a command agent → every issue
//! walked To Do → In Progress → In Review → Done in order, one Whilly comment each (edited,
//! never repeated); a move the workflow does not have is reported once; re-imports merge.

#[path = "support/engine.rs"]
mod engine;
#[path = "support/github_standin.rs"]
mod github_standin;
#[path = "support/jira_standin.rs"]
mod jira_standin;

use engine::{Repo, toml_str};
use jira_standin::{
    BadAnswer, DEFAULT_TOKEN, DEFAULT_USER, Fault, JiraStandIn, Matcher, Tried, each_fails_clearly,
    host_of,
};
use serde_json::Value;
use std::time::Duration;
use whilly::forge::jira::adf::from_markdown;

const LIMIT: Duration = Duration::from_secs(180);
const AGENT: &str = r#"sh -c 'mkdir -p files; echo done > "files/$WHILLY_TASK_ID.txt"; echo "<promise>COMPLETE</promise>"'"#;

fn description(n: usize) -> Value {
    from_markdown(&format!(
        "The weekly export number {n} must be written to its own file for the finance team.\n\n\
## Acceptance\n- the file of this task exists\n\n## Test\n- test -f files/JIRA-ABC-{n}.txt\n"
    ))
}

struct Site {
    repo: Repo,
    jira: JiraStandIn,
}

impl Site {
    fn new(page_size: u32) -> Site {
        let repo = Repo::new(&engine::plan("unused", vec![]), AGENT);
        let jira = JiraStandIn::start();
        jira.add_project("ABC");
        let mut toml = std::fs::read_to_string(repo.repo.join("whilly.toml")).unwrap();
        toml.push_str(&format!(
            "\n[jira]\nurl = {}\nuser = \"{DEFAULT_USER}\"\npage_size = {page_size}\n",
            toml_str(&jira.url())
        ));
        repo.write("whilly.toml", &toml);
        repo.git(&["commit", "-qam", "jira config"]);
        Site { repo, jira }
    }

    fn whilly(&self, args: &[&str]) -> engine::Output {
        self.repo
            .spawn_in(
                &self.repo.repo,
                args,
                &[("WHILLY_JIRA_TOKEN", DEFAULT_TOKEN)],
            )
            .wait(LIMIT)
    }
}

fn ok(out: &engine::Output, what: &str) {
    assert_eq!(
        out.code,
        Some(0),
        "{what}\nstdout:\n{}\nstderr:\n{}",
        out.stdout,
        out.stderr
    );
}

#[test]
fn thirty_issues_over_three_pages_move_in_lock_step_with_their_tasks() {
    let s = Site::new(10);
    let keys: Vec<String> = (1..=30)
        .map(|n| {
            s.jira.add_issue(
                "ABC",
                &format!("Export week {n}"),
                description(n),
                "To Do",
                if n == 1 { "Highest" } else { "Medium" },
                &[],
                "software",
            )
        })
        .collect();
    let query = "jira:project = ABC AND statusCategory != Done ORDER BY key ASC";
    let out = s.whilly(&["plan", "import", query, "--json"]);
    ok(&out, "import");
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    let plan = report["report"]["plan_id"].as_str().unwrap().to_string();
    let searches = s
        .jira
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/search/jql"))
        .count();
    assert_eq!(searches, 3, "30 issues, 10 a page");
    let tasks = s.repo.tasks(&plan);
    assert_eq!(tasks.len(), 30);
    let first = s.repo.task(&plan, "JIRA-ABC-1");
    assert_eq!(first["spec"]["priority"], "critical");
    assert_eq!(
        first["spec"]["acceptance_criteria"][0],
        "the file of this task exists"
    );

    // Done upstream before it ran: the re-import skips its task.
    s.jira.set_status(&keys[29], "Done");
    ok(&s.whilly(&["plan", "import", query]), "re-import");
    let closed = s.repo.task(&plan, "JIRA-ABC-30");
    assert_eq!(closed["status"], "SKIPPED", "{closed:#?}");
    assert_eq!(closed["reason"], "closed_upstream");

    let run = s.whilly(&["run", "--plan", &plan, "--headless"]);
    ok(&run, "run");
    assert!(s.jira.transitions_made(&keys[29]).is_empty());
    for key in &keys[..29] {
        let task = s.repo.task(&plan, &format!("JIRA-{key}"));
        assert_eq!(task["status"], "DONE", "{task:#?}");
        assert_eq!(
            s.jira.transitions_made(key),
            vec!["In Progress", "In Review", "Done"],
            "{key} moved in order"
        );
        let comments = s.jira.comments(key);
        assert_eq!(comments.len(), 1, "{key}: one comment: {comments:#?}");
        let text = comments[0].text();
        assert!(
            text.contains(&format!("Whilly status for JIRA-{key}")),
            "{text}"
        );
        assert!(text.contains("passed"), "the checks are in it: {text}");
    }

    // A re-import with nothing changed changes nothing upstream; an issue done meanwhile stays.
    s.jira.clear_requests();
    ok(&s.whilly(&["plan", "import", query]), "re-import");
    assert!(s.jira.mutations().is_empty(), "{:#?}", s.jira.mutations());
}

#[test]
fn a_move_the_workflow_lacks_is_reported_once_and_the_work_is_kept() {
    let s = Site::new(50);
    let key = s.jira.add_issue(
        "ABC",
        "Export week 1",
        from_markdown(
            "The weekly export number 1 must be written to its own file for the finance team.\n\n\
## Acceptance\n- the file exists\n\n## Test\n- test -f files/never-written.txt\n",
        ),
        "To Do",
        "Medium",
        &[],
        "simple",
    );
    let query = format!("jira:{key}");
    ok(&s.whilly(&["plan", "import", &query]), "import");
    let plan = format!("jira-{}", key.to_ascii_lowercase());
    let _ = s.whilly(&["run", "--plan", &plan, "--headless"]);
    let task = s.repo.task(&plan, &format!("JIRA-{key}"));
    assert_eq!(task["status"], "FAILED", "{task:#?}");
    // The simple workflow has no Failed status: said once, with what it allows.
    let refused = s.repo.events_of_type("jira.transition_refused");
    assert_eq!(refused.len(), 1, "{refused:#?}");
    assert_eq!(refused[0]["payload"]["to"], "Failed");
    assert!(
        refused[0]["payload"]["allowed"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
    );
    // Whether In Progress was seen depends on how fast the attempt failed (moves are synced
    // after a quiet moment); nothing else was tried.
    let made = s.jira.transitions_made(&key);
    assert!(made.is_empty() || made == vec!["In Progress"], "{made:?}");
    assert!(s.repo.events_of_type("jira.sync_failed").is_empty());
}

#[test]
fn a_refused_token_and_a_busy_site_say_what_to_do() {
    let s = Site::new(50);
    s.jira.add_issue(
        "ABC",
        "Export",
        description(1),
        "To Do",
        "Medium",
        &[],
        "software",
    );
    s.jira.set_credentials(DEFAULT_USER, "another-token");
    let out = s.whilly(&["plan", "import", "jira:project = ABC"]);
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    assert!(
        out.stderr.contains("refused the credentials"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains(DEFAULT_TOKEN));
    s.jira.set_credentials(DEFAULT_USER, DEFAULT_TOKEN);
    s.jira.fail_next(
        Matcher::new("POST", "/rest/api/3/search/jql"),
        Fault::TooManyRequests { retry_after: 1 },
        1,
    );
    ok(
        &s.whilly(&["plan", "import", "jira:project = ABC"]),
        "after one 429 with Retry-After",
    );
    let missing = s.whilly(&["plan", "import", "jira:ABC-99"]);
    assert_eq!(missing.code, Some(1), "{}", missing.stderr);
    assert!(missing.stderr.contains("ABC-99"), "{}", missing.stderr);
}

/// The decision gate's agent pass runs on a Jira import as on a plan file: verdicts recorded as
/// `gate.llm_verdict` events, the vague issue's task SKIPPED with `--strict`; an agent without a
/// usable answer lets every task through (fail-open) on the re-import.
#[test]
fn the_gates_agent_pass_judges_jira_issues_and_fails_open() {
    let s = Site::new(50);
    for n in 1..=2 {
        s.jira.add_issue(
            "ABC",
            &format!("Export week {n}"),
            description(n),
            "To Do",
            "Medium",
            &[],
            "software",
        );
    }
    let toml = std::fs::read_to_string(s.repo.repo.join("whilly.toml")).unwrap();
    let log = s.repo.shared.join("gate-prompts");
    let gate = |mode: &str| {
        s.repo.write(
            "whilly.toml",
            &format!(
                "{toml}{}",
                engine::gate_llm_config(mode, &log, "JIRA-ABC-2", "JIRA-ABC-1")
            ),
        );
    };
    gate("good");
    let query = "jira:project = ABC ORDER BY key ASC";
    let out = s.whilly(&["plan", "import", query, "--strict", "--json"]);
    ok(&out, "import");
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    let plan = report["report"]["plan_id"].as_str().unwrap().to_string();
    assert_eq!(s.repo.task(&plan, "JIRA-ABC-2")["status"], "SKIPPED");
    assert_eq!(s.repo.task(&plan, "JIRA-ABC-1")["status"], "PENDING");
    let ev = s.repo.events_of_type("gate.llm_verdict");
    assert_eq!(ev.len(), 2, "{ev:#?}");
    for (id, vague) in [("JIRA-ABC-2", true), ("JIRA-ABC-1", false)] {
        let e = ev.iter().find(|e| e["task_id"] == id).unwrap();
        assert_eq!(e["plan_id"], plan.as_str(), "{e}");
        assert_eq!(e["payload"]["vague"], vague, "{e}");
        assert_eq!(e["payload"]["agent"], "gatekeeper", "{e}");
    }

    // A third issue, and a gate agent that never answers usably: it goes through.
    s.jira.add_issue(
        "ABC",
        "Export week 3",
        description(3),
        "To Do",
        "Medium",
        &[],
        "software",
    );
    gate("never");
    let out = s.whilly(&["plan", "import", query, "--strict"]);
    ok(&out, "re-import with a failing gate agent");
    assert!(
        out.stderr
            .contains("decision gate: the agent pass failed, every task goes through"),
        "{}",
        out.stderr
    );
    assert_eq!(s.repo.task(&plan, "JIRA-ABC-3")["status"], "PENDING");
    let ev = s.repo.events_of_type("gate.llm_verdict");
    assert_eq!(ev.len(), 3, "{ev:#?}");
    assert!(
        ev.iter().any(|e| e["payload"]["fail_open"] == true),
        "{ev:#?}"
    );
}

/// With GitHub access the work of a Jira issue goes to review as a pull request that links the
/// key, and the issue waits In Review until it is merged.
#[test]
fn a_jira_issue_s_work_goes_to_review_as_a_pull_request() {
    let s = Site::new(50);
    let (_remote_dir, remote, branch) = s.repo.bare_origin();
    let gh = github_standin::GitHubStandIn::start();
    gh.add_repo("octo/api", &branch, Some(remote.clone()));
    let mut toml = std::fs::read_to_string(s.repo.repo.join("whilly.toml")).unwrap();
    toml.push_str(&format!(
        "\n[github]\napi_url = {}\nrepo = \"octo/api\"\n",
        toml_str(&gh.url())
    ));
    s.repo.write("whilly.toml", &toml);
    s.repo.git(&["commit", "-qam", "github config"]);
    s.repo.git(&["push", "-q", "origin", &branch]);
    let key = s.jira.add_issue(
        "ABC",
        "Export week 1",
        description(1),
        "To Do",
        "Medium",
        &[],
        "software",
    );
    let env = [
        ("WHILLY_JIRA_TOKEN", DEFAULT_TOKEN),
        ("WHILLY_GITHUB_TOKEN", github_standin::DEFAULT_TOKEN),
    ];
    let run = |args: &[&str]| s.repo.spawn_in(&s.repo.repo, args, &env).wait(LIMIT);
    ok(&run(&["plan", "import", &format!("jira:{key}")]), "import");
    let plan = format!("jira-{}", key.to_ascii_lowercase());
    ok(&run(&["run", "--plan", &plan, "--headless"]), "run");
    let prs = gh.prs("octo/api");
    assert_eq!(prs.len(), 1, "{prs:#?}");
    assert!(
        prs[0].body.contains(&format!("Jira: [{key}](")),
        "{}",
        prs[0].body
    );
    assert_eq!(
        s.jira.transitions_made(&key),
        vec!["In Progress", "In Review"]
    );
    let comments = s.jira.comments(&key);
    assert_eq!(comments.len(), 1);
    assert!(
        comments[0].text().contains("/pull/"),
        "{}",
        comments[0].text()
    );
}

/// Bad answers from Jira (issue 26, item 7): a proxy's HTML page, a 200 with the wrong shape
/// (no list, an issue without its key), 48 MiB of body, a server that never answers. An import
/// ends with an error naming the host and the request and makes no plan; an answer broken off
/// mid-body is read again. During a run, answers of the wrong shape fail the Jira sync (an
/// event says so), never the work.
#[test]
fn bad_answers_from_jira_name_the_host_and_the_request_and_never_fail_the_work() {
    let s = Site::new(50);
    let toml = std::fs::read_to_string(s.repo.repo.join("whilly.toml")).unwrap();
    s.repo.write(
        "whilly.toml",
        &toml.replacen("\n[jira]\n", "\n[jira]\ntimeout_secs = 2\n", 1),
    );
    s.repo.git(&["commit", "-qam", "jira timeout"]);
    s.jira.add_issue(
        "ABC",
        "Export week 1",
        description(1),
        "To Do",
        "Medium",
        &[],
        "software",
    );
    let host = host_of(&s.jira.url());
    let search = Matcher::new("POST", "/rest/api/3/search/jql");
    let query = "jira:project = ABC";
    let plans = || {
        let out = s.whilly(&["plan", "list"]);
        ok(&out, "plan list");
        out.stdout
    };
    let cases = [
        (
            BadAnswer::Html(502),
            "an HTML page titled \"502 Bad Gateway\"",
        ),
        (
            BadAnswer::WrongShape(serde_json::json!({"total": 1})),
            "no issues array",
        ),
        (
            BadAnswer::WrongShape(serde_json::json!({"issues": [{"id": "10001"}], "isLast": true})),
            "an issue without a key",
        ),
        (BadAnswer::Huge(48 << 20), "larger than 32 MiB"),
        (BadAnswer::Hang, "timed out"),
    ];
    each_fails_clearly(
        &cases,
        &host,
        "POST /rest/api/3/search/jql",
        |bad| {
            s.jira
                .fail_next(search.clone(), Fault::Bad(bad.clone()), 100)
        },
        || s.jira.clear_faults(),
        || {
            let out = s.whilly(&["plan", "import", query]);
            Tried {
                code: out.code,
                stderr: out.stderr,
            }
        },
        || match plans().contains("jira") {
            false => Ok(()),
            true => Err(format!("a plan was made: {}", plans())),
        },
    );
    s.jira.fail_next(search, Fault::Bad(BadAnswer::CutShort), 1);
    let out = s.whilly(&["plan", "import", query, "--json"]);
    ok(&out, "an import whose answer broke off once");
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    let plan = report["report"]["plan_id"].as_str().unwrap().to_string();
    assert_eq!(s.repo.tasks(&plan).len(), 1);

    s.jira.fail_next(
        Matcher::path("/rest/api/3/issue/"),
        Fault::Bad(BadAnswer::WrongShape(
            serde_json::json!({"unexpected": true}),
        )),
        10_000,
    );
    let out = s.whilly(&["run", "--plan", &plan, "--headless"]);
    ok(&out, "a run while Jira answers nonsense");
    assert_eq!(s.repo.task(&plan, "JIRA-ABC-1")["status"], "DONE");
    let failed = s.repo.events_of_type("jira.sync_failed");
    assert!(
        failed.iter().any(|e| e["payload"]["error"]
            .as_str()
            .is_some_and(|m| m.contains("expected shape"))),
        "{failed:#?}"
    );
}
