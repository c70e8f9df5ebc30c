//! What a newcomer meets on the command line (issue 11, "what a newcomer hit"): choosing a plan
//! by file or id, commands run outside a repository, plans that end, headless runs that always
//! say how they ended, an unreachable Postgres said at once. Each runs the real binary.

#[path = "support/engine.rs"]
mod engine;

use engine::{Output, Repo, plan, task};
use std::time::{Duration, Instant};

/// An agent that changes nothing and says it is done; the task's check (`true`) passes.
const DONE_AGENT: &str = "bash -c 'echo \"<promise>COMPLETE</promise>\"'";
const LIMIT: Duration = Duration::from_secs(60);

fn run(repo: &Repo, args: &[&str]) -> Output {
    repo.run(args, LIMIT)
}

fn run_in(repo: &Repo, dir: &std::path::Path, args: &[&str]) -> Output {
    repo.spawn_in(dir, args, &[]).wait(LIMIT)
}

/// A repository with plans `p` (imported from plan.json) and `q`.
fn two_plans() -> Repo {
    let repo = Repo::new(&plan("p", vec![task("T-1")]), DONE_AGENT);
    repo.write(
        "q.json",
        &serde_json::to_string(&plan("q", vec![task("Q-1")])).unwrap(),
    );
    for file in ["plan.json", "q.json"] {
        let o = run(&repo, &["plan", "import", file]);
        assert_eq!(o.code, Some(0), "{o}");
    }
    repo
}

// ---- choosing a plan -------------------------------------------------------------------------

#[test]
fn a_fresh_repository_suggests_the_demo_and_plan_import() {
    let repo = Repo::new(&plan("p", vec![task("T-1")]), DONE_AGENT);
    let o = run(&repo, &["run", "--headless"]);
    assert_eq!(o.code, Some(1), "{o}");
    assert!(o.stderr.contains("whilly demo"), "{o}");
    assert!(o.stderr.contains("whilly plan import FILE"), "{o}");
}

#[test]
fn a_plan_id_is_accepted_wherever_a_plan_is_wanted() {
    let repo = two_plans();
    // `run ID`: no file of that name, so the imported plan.
    let o = run(&repo, &["run", "p", "--headless"]);
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(o.complete()["done"], 1, "{o}");
    assert_eq!(repo.task("p", "T-1")["status"], "DONE");
    assert_eq!(repo.task("q", "Q-1")["status"], "PENDING");
    // `whilly --plan ID` and `whilly ID` are the console, headless without a terminal; so is
    // `whilly tui ID`.
    for args in [
        &["--plan", "q"][..],
        &["q"][..],
        &["tui", "q"][..],
        &["tui", "--plan", "q"][..],
    ] {
        let o = run(&repo, args);
        assert_eq!(o.code, Some(0), "whilly {args:?}: {o}");
        assert_eq!(o.complete()["end"], "all_done", "whilly {args:?}: {o}");
    }
    assert_eq!(repo.task("q", "Q-1")["status"], "DONE");
}

#[test]
fn a_file_of_that_name_is_imported_first() {
    let repo = two_plans();
    // A file named like nothing imported: imported, then run.
    repo.write(
        "r.json",
        &serde_json::to_string(&plan("r", vec![task("R-1")])).unwrap(),
    );
    let o = run(&repo, &["run", "r.json", "--headless"]);
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(repo.task("r", "R-1")["status"], "DONE");
}

#[test]
fn a_name_that_is_neither_file_nor_id_lists_the_plans() {
    let repo = two_plans();
    for args in [
        &["run", "nope", "--headless"][..],
        &["run", "--plan", "nope", "--headless"][..],
        &["nope"][..],
    ] {
        let o = run(&repo, args);
        assert_eq!(o.code, Some(1), "whilly {args:?}: {o}");
        assert!(o.stderr.contains("\"nope\""), "whilly {args:?}: {o}");
        assert!(
            o.stderr.contains("imported plans: p, q"),
            "whilly {args:?}: {o}"
        );
    }
    // Several plans and none named: how to name one.
    let o = run(&repo, &["run", "--headless"]);
    assert_eq!(o.code, Some(1), "{o}");
    assert!(o.stderr.contains("`whilly PLAN_ID`"), "{o}");
}

// ---- outside a git repository ----------------------------------------------------------------

#[test]
fn commands_that_need_a_repository_refuse_outside_one() {
    let repo = Repo::new(&plan("p", vec![task("T-1")]), DONE_AGENT);
    let outside = repo.home.join("not-a-repo");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::copy(repo.repo.join("plan.json"), outside.join("plan.json")).unwrap();
    for args in [
        &["plan", "import", "plan.json"][..],
        &["plan", "list"][..],
        &["events"][..],
        &["handoff", "list"][..],
        &["worktrees", "list"][..],
        &["run", "plan.json", "--headless"][..],
        &["worker", "--until-idle"][..],
    ] {
        let o = run_in(&repo, &outside, args);
        assert_eq!(o.code, Some(4), "whilly {args:?}: {o}");
        assert!(
            o.stderr.contains("not inside a git repository: ")
                && o.stderr.contains("give --repo DIR"),
            "whilly {args:?}: {o}"
        );
    }
    assert!(
        !outside.join(".whilly").exists(),
        "a refused command left .whilly/ behind"
    );
    // What needs no repository still works there.
    for args in [
        &["config", "show"][..],
        &["--help"][..],
        &["completions", "bash"][..],
        &["plan", "check", "plan.json"][..],
    ] {
        let o = run_in(&repo, &outside, args);
        assert_eq!(o.code, Some(0), "whilly {args:?}: {o}");
    }
    assert!(!outside.join(".whilly").exists(), "{:?}", outside);
    // And --repo makes the repository's commands work from anywhere (what the console's detach
    // message prints).
    let root = repo.repo.to_str().unwrap();
    let o = run_in(
        &repo,
        &outside,
        &["--repo", root, "plan", "import", "plan.json"],
    );
    assert_eq!(o.code, Some(0), "{o}");
    assert!(repo.repo.join(".whilly/whilly.db").is_file());
    let o = run_in(&repo, &outside, &["--repo", root, "events", "--plan", "p"]);
    assert_eq!(o.code, Some(0), "{o}");
    assert!(o.stdout.contains("T-1"), "{o}");
}

// ---- Postgres unreachable --------------------------------------------------------------------

#[test]
fn an_unreachable_postgres_is_said_at_once_with_its_address() {
    let repo = Repo::new(&plan("p", vec![task("T-1")]), DONE_AGENT);
    // A port that nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://127.0.0.1:{port}/x");
    let started = Instant::now();
    let o = run(&repo, &["--database-url", &url, "plan", "list"]);
    let took = started.elapsed();
    assert_eq!(o.code, Some(4), "{o}");
    assert!(
        o.stderr
            .contains(&format!("connection refused at 127.0.0.1:{port}")),
        "{o}"
    );
    assert!(o.stderr.contains("start the local one"), "{o}");
    assert!(took < Duration::from_millis(1500), "took {took:?}: {o}");
    // The engine commands wait for a queue that may come up, and say at once why they wait.
    let mut w = repo.spawn(&["--database-url", &url, "worker", "--until-idle"]);
    let said = engine::wait_for(Duration::from_secs(5), "the worker to say it waits", || {
        let err = std::fs::read_dir(repo.home.join("outputs"))
            .ok()?
            .filter_map(|e| e.ok())
            .filter(|e| e.path().extension().is_some_and(|x| x == "err"))
            .filter_map(|e| std::fs::read_to_string(e.path()).ok())
            .find(|t| t.contains("does not answer yet"))?;
        Some(err)
    });
    assert!(
        said.contains(&format!("connection refused at 127.0.0.1:{port}")),
        "{said}"
    );
    assert!(!w.exited(), "the worker gave up at once: {said}");
}

// ---- headless output always ends with `complete` ---------------------------------------------

/// The last JSON line of stdout: the `complete` line, with its `end`.
fn last_line(o: &Output) -> serde_json::Value {
    let last = o
        .lines()
        .pop()
        .unwrap_or_else(|| panic!("no JSON line: {o}"));
    assert_eq!(last["event"], "complete", "{o}");
    assert_eq!(last["exit_code"].as_i64().map(|c| c as i32), o.code, "{o}");
    last
}

#[test]
fn a_missing_agent_program_ends_with_an_environment_complete_line() {
    let repo = Repo::new(&plan("p", vec![task("T-1")]), "/nonexistent/agent-prog");
    let o = run(&repo, &["run", "plan.json", "--headless"]);
    assert_eq!(o.code, Some(4), "{o}");
    let last = last_line(&o);
    assert_eq!(last["end"], "environment", "{o}");
    assert!(
        last["error"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/agent-prog"),
        "{o}"
    );
}

#[test]
fn no_repository_and_a_refused_plan_end_with_a_complete_line_too() {
    let repo = Repo::new(&plan("p", vec![task("T-1")]), DONE_AGENT);
    let outside = repo.home.join("elsewhere");
    std::fs::create_dir_all(&outside).unwrap();
    let o = run_in(&repo, &outside, &["run", "--headless"]);
    assert_eq!(o.code, Some(4), "{o}");
    let last = last_line(&o);
    assert_eq!(last["end"], "environment", "{o}");
    assert!(
        last["error"]
            .as_str()
            .unwrap()
            .contains("not inside a git repository"),
        "{o}"
    );
    // Input errors say so, with exit 1: a script tells them from the environment.
    repo.write("bad.json", "{\"tasks\": [");
    let o = run(&repo, &["run", "bad.json", "--headless"]);
    assert_eq!(o.code, Some(1), "{o}");
    assert_eq!(last_line(&o)["end"], "invalid_input", "{o}");
    let o = run(&repo, &["run", "nope", "--headless"]);
    assert_eq!(o.code, Some(1), "{o}");
    assert_eq!(last_line(&o)["end"], "invalid_input", "{o}");
}

/// The engine commands wait 30 s for a queue that does not answer; then the run ends with the
/// `environment` complete line, not only a message on stderr.
#[test]
fn an_unreachable_database_ends_with_an_environment_complete_line() {
    let repo = Repo::new(&plan("p", vec![task("T-1")]), DONE_AGENT);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://127.0.0.1:{port}/x");
    let o = repo
        .spawn(&["--database-url", &url, "run", "plan.json", "--headless"])
        .wait(Duration::from_secs(90));
    assert_eq!(o.code, Some(4), "{o}");
    let last = last_line(&o);
    assert_eq!(last["end"], "environment", "{o}");
    assert!(
        last["error"]
            .as_str()
            .unwrap()
            .contains(&format!("connection refused at 127.0.0.1:{port}")),
        "{o}"
    );
}

// ---- plans that end --------------------------------------------------------------------------

fn plan_list(repo: &Repo, extra: &[&str]) -> Vec<serde_json::Value> {
    let mut args = vec!["plan", "list", "--json"];
    args.extend(extra);
    let o = run(repo, &args);
    assert_eq!(o.code, Some(0), "{o}");
    serde_json::from_str::<Vec<serde_json::Value>>(&o.stdout).unwrap_or_else(|e| panic!("{e}: {o}"))
}

fn ids(plans: &[serde_json::Value]) -> Vec<String> {
    plans
        .iter()
        .map(|p| p["plan"]["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_finished_plan_is_done_and_can_be_archived_and_deleted() {
    let repo = two_plans();
    let o = run(&repo, &["run", "p", "--headless"]);
    assert_eq!(o.code, Some(0), "{o}");
    let o = run(&repo, &["plan", "list"]);
    let line = |o: &Output, id: &str| {
        o.stdout
            .lines()
            .find(|l| l.starts_with(&format!("{id} ")))
            .unwrap_or_else(|| panic!("no row for {id}: {o}"))
            .to_string()
    };
    assert!(line(&o, "p").contains(" done "), "{o}");
    assert!(line(&o, "q").contains(" active "), "{o}");

    // Archived: out of the list, in `--all` marked archived, back with --undo / unarchive.
    let o = run(&repo, &["plan", "archive", "p"]);
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(ids(&plan_list(&repo, &[])), ["q"]);
    let o = run(&repo, &["plan", "list"]);
    assert!(o.stdout.contains("1 archived plan not shown"), "{o}");
    let o = run(&repo, &["plan", "list", "--all"]);
    assert!(line(&o, "p").contains(" archived "), "{o}");
    let all = plan_list(&repo, &["--all"]);
    assert_eq!(ids(&all), ["p", "q"]);
    assert!(all[0]["plan"]["archived_at"].is_string(), "{all:?}");
    let o = run(&repo, &["plan", "archive", "p", "--undo"]);
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(ids(&plan_list(&repo, &[])), ["p", "q"]);
    run(&repo, &["plan", "archive", "p"]);
    let o = run(&repo, &["plan", "unarchive", "p"]);
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(ids(&plan_list(&repo, &[])), ["p", "q"]);

    // Deleted: refused without a terminal to ask on unless --yes; then gone, events kept.
    let o = run(&repo, &["plan", "delete", "p"]);
    assert_eq!(o.code, Some(1), "{o}");
    assert!(o.stderr.contains("--yes"), "{o}");
    assert_eq!(ids(&plan_list(&repo, &[])), ["p", "q"]);
    let o = run(&repo, &["plan", "delete", "p", "--yes"]);
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(ids(&plan_list(&repo, &["--all"])), ["q"]);
    let o = run(&repo, &["plan", "show", "p"]);
    assert_eq!(o.code, Some(1), "{o}");
    let events: Vec<String> = repo
        .events(None)
        .iter()
        .filter(|e| e["plan_id"] == "p")
        .map(|e| e["event_type"].as_str().unwrap().to_string())
        .collect();
    assert!(events.contains(&"task.done".to_string()), "{events:?}");
    assert_eq!(events.last().map(String::as_str), Some("plan.deleted"));
    // The id is free for a new import.
    let o = run(&repo, &["plan", "import", "plan.json"]);
    assert_eq!(o.code, Some(0), "{o}");
}

#[test]
fn a_plan_with_running_work_is_not_deleted() {
    let repo = Repo::new(&plan("p", vec![task("T-1")]), "bash -c 'sleep 60'");
    let running = repo.spawn(&["run", "plan.json", "--headless"]);
    engine::wait_for(Duration::from_secs(30), "the task to run", || {
        let o = run(&repo, &["plan", "show", "p", "--json"]);
        let v: serde_json::Value = serde_json::from_str(&o.stdout).ok()?;
        (v["tasks"][0]["status"] == "IN_PROGRESS").then_some(())
    });
    let o = run(&repo, &["plan", "delete", "p", "--yes"]);
    assert_eq!(o.code, Some(1), "{o}");
    assert!(o.stderr.contains("has work running"), "{o}");
    assert_eq!(ids(&plan_list(&repo, &[])), ["p"]);
    drop(running);
}

// ---- help and completion ---------------------------------------------------------------------

#[test]
fn flags_are_described_and_globals_stay_where_they_mean_something() {
    let repo = Repo::new(&plan("p", vec![task("T-1")]), DONE_AGENT);
    let help = |args: &[&str]| {
        let o = run(&repo, args);
        assert_eq!(o.code, Some(0), "{o}");
        o.stdout
    };
    let events = help(&["events", "--help"]);
    assert!(events.contains("Only this plan's events"), "{events}");
    assert!(events.contains("Only this task's events"), "{events}");
    let worker = help(&["worker", "--help"]);
    assert!(worker.contains("Agents running at once"), "{worker}");
    let complete = help(&["handoff", "complete", "--help"]);
    assert!(complete.contains("What the work cost"), "{complete}");
    let completions = help(&["completions", "--help"]);
    for global in ["--database-url", "--repo", "--set"] {
        assert!(!completions.contains(global), "{completions}");
    }
    assert!(!help(&["plan", "check", "--help"]).contains("--database-url"));
    assert!(help(&["plan", "list", "--help"]).contains("--database-url"));
    // The static scripts still come out.
    let bash = help(&["completions", "bash"]);
    assert!(bash.contains("_whilly"), "{bash}");
}

/// `COMPLETE=fish whilly -- whilly ARGS…`: what the shell offers for the last word.
fn complete_in(repo: &Repo, dir: &std::path::Path, words: &[&str]) -> Vec<String> {
    let mut args = vec!["--", "whilly"];
    args.extend(words);
    let o = repo
        .spawn_in(dir, &args, &[("COMPLETE", "fish")])
        .wait(LIMIT);
    assert_eq!(o.code, Some(0), "{o}");
    o.stdout
        .lines()
        .map(|l| l.split('\t').next().unwrap_or("").to_string())
        .collect()
}

#[test]
fn the_shell_completes_plan_and_task_ids() {
    let repo = two_plans();
    let dir = repo.repo.clone();
    let plans = complete_in(&repo, &dir, &["plan", "show", ""]);
    assert!(
        plans.contains(&"p".into()) && plans.contains(&"q".into()),
        "{plans:?}"
    );
    let plans = complete_in(&repo, &dir, &["run", "--plan", "q"]);
    assert_eq!(plans, ["q"]);
    // A PLAN is a file or an id: both are offered.
    let either = complete_in(&repo, &dir, &["run", ""]);
    assert!(either.contains(&"p".into()), "{either:?}");
    assert!(either.contains(&"plan.json".into()), "{either:?}");
    let tasks = complete_in(&repo, &dir, &["events", "--task", ""]);
    assert!(
        tasks.contains(&"T-1".into()) && tasks.contains(&"Q-1".into()),
        "{tasks:?}"
    );
    let tasks = complete_in(&repo, &dir, &["merge", "Q"]);
    assert_eq!(tasks, ["Q-1"]);
    // An archived plan is not offered.
    run(&repo, &["plan", "archive", "q"]);
    let plans = complete_in(&repo, &dir, &["plan", "show", ""]);
    assert!(!plans.contains(&"q".into()), "{plans:?}");
    // Outside a repository nothing is completed and no queue is made.
    let outside = repo.home.join("nowhere");
    std::fs::create_dir_all(&outside).unwrap();
    let none = complete_in(&repo, &outside, &["plan", "show", ""]);
    assert!(!none.iter().any(|c| c == "p"), "{none:?}");
    assert!(!outside.join(".whilly").exists());
}
