//! `whilly doctor` with the real binary on a real repository and SQLite queue: a healthy setup
//! passes; each seeded problem is found with its fix; `--fix` fixes the safe ones (checked on
//! disk and in the queue) and says what it did; what only a human can fix is left and said.

mod support;

use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;
use support::engine::{self, Output, Repo};
use support::github_standin::GitHubStandIn;
use whilly::store::{ClaimRequest, Store, WorkerRecord};
use whilly::store::{TaskQueue, WorkerRegistry};

const LIMIT: Duration = Duration::from_secs(120);
const PLAN: &str = "doc-plan";

/// Writes files/<task>.txt and finishes, except for task B, which always fails.
const TEMPLATE: &str = r#"sh -c 'if [ "$1" = B ]; then echo broken; exit 3; fi; mkdir -p files; echo "by $1" > "files/$1.txt"; echo "<promise>COMPLETE</promise>"' agent {task_id}"#;

fn doctor(repo: &Repo, args: &[&str], env: &[(&str, &str)]) -> (Output, Value) {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--format", "json"]);
    let out = repo.spawn_in(&repo.repo, &all, env).wait(LIMIT);
    let v: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("doctor --format json is not JSON ({e}):\n{out}"));
    (out, v)
}

/// The findings of `check` with `severity` whose `what` contains `needle`.
fn find<'a>(v: &'a Value, check: &str, severity: &str, needle: &str) -> Vec<&'a Value> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == check && f["severity"] == severity)
        .filter(|f| f["what"].as_str().unwrap().contains(needle))
        .collect()
}

fn one<'a>(v: &'a Value, check: &str, severity: &str, needle: &str) -> &'a Value {
    let found = find(v, check, severity, needle);
    assert_eq!(
        found.len(),
        1,
        "expected one {severity} {check} finding with {needle:?} in:\n{}",
        serde_json::to_string_pretty(&v["findings"]).unwrap()
    );
    found[0]
}

fn problems(v: &Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "problem")
        .map(|f| f["what"].as_str().unwrap().to_string())
        .collect()
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn chmod(p: &Path, m: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
}

async fn open_store(repo: &Path) -> std::sync::Arc<dyn Store> {
    let target = whilly::store::open::target_from(None, repo).unwrap();
    whilly::store::open::open(&target, repo).await.unwrap()
}

/// Worker `dead-worker` on `gone-box`; its heartbeat is set an hour back with SQL afterwards
/// (registering stamps it with the database's now).
fn dead_worker() -> WorkerRecord {
    let now = chrono::Utc::now();
    WorkerRecord {
        id: "dead-worker".into(),
        host: "gone-box".into(),
        slots: 1,
        tags: vec![],
        started_at: now,
        heartbeat_at: now,
        offline: false,
    }
}

fn branches(repo: &Repo) -> Vec<String> {
    repo.git(&["branch", "--format=%(refname:short)"])
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_healthy_repository_passes() {
    let repo = Repo::new(&engine::plan(PLAN, vec![engine::task("A")]), TEMPLATE);
    let run = repo.run_plan(&[], &[]).wait(LIMIT);
    assert_eq!(run.code, Some(0), "{run}");
    let (out, v) = doctor(&repo, &["doctor"], &[]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(problems(&v).is_empty(), "{:?}", problems(&v));
    one(&v, "database", "ok", "sqlite queue at");
    one(&v, "agents", "ok", "agent fake");
    one(&v, "files", "ok", "is private");
    // What `.whilly/` holds, by part: the run's attempt logs among them.
    let disk = one(&v, "disk", "ok", "holds");
    assert!(disk["what"].as_str().unwrap().contains("runs "), "{disk}");
    one(
        &v,
        "plans",
        "ok",
        "1 plans, each file where it was imported from",
    );
    // The finished task's worktree waits in the pool for the next task: not an orphan.
    one(&v, "worktrees", "ok", "1 worktree (1 idle in the pool)");
    one(&v, "leases", "ok", "no expired leases");
    one(&v, "tokens", "ok", "GitHub: no token");
    // The text form says the same, grouped.
    let text = repo.run(&["doctor"], LIMIT);
    assert_eq!(text.code, Some(0), "{text}");
    assert!(
        text.stdout.contains("database\n  [ok] sqlite queue at"),
        "{text}"
    );
    assert!(text.stdout.contains("0 problems"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_problems_are_found_and_the_safe_ones_fixed() {
    let repo = Repo::new(
        &engine::plan(PLAN, vec![engine::task("A"), engine::task("B")]),
        TEMPLATE,
    );
    // A lands; B fails its attempts and keeps its worktree (keep_failed) and branch.
    let run = repo.run_plan(&[], &[]).wait(LIMIT);
    assert_eq!(run.code, Some(1), "{run}");
    let b_branch = format!("whilly/{PLAN}/B");
    assert!(branches(&repo).contains(&b_branch), "{:?}", branches(&repo));
    // The plan goes: B's worktree and branch belong to no task now.
    let del = repo.run(&["plan", "delete", PLAN, "--yes"], LIMIT);
    assert_eq!(del.code, Some(0), "{del}");
    // A task branch with work of its own, whose task is gone too: it must be kept.
    repo.git(&["checkout", "-q", "-b", "whilly/old/X"]);
    repo.write("files/x.txt", "unlanded work\n");
    repo.git(&["add", "files/x.txt"]);
    repo.git(&["commit", "-qm", "unlanded"]);
    repo.git(&["checkout", "-q", "-"]);
    // A ghost: imported from a file that is then deleted, with its tasks unfinished.
    repo.write(
        "ghost.json",
        &serde_json::to_string(&engine::plan(
            "ghost",
            vec![engine::task("G1"), engine::task("G2")],
        ))
        .unwrap(),
    );
    let imp = repo.run(&["plan", "import", "ghost.json"], LIMIT);
    assert_eq!(imp.code, Some(0), "{imp}");
    let ghost_file = repo.repo.join("ghost.json");
    let ghost_text = std::fs::read_to_string(&ghost_file).unwrap();
    std::fs::remove_file(&ghost_file).unwrap();
    // A stale lease (a claim whose worker vanished) and a dead worker, seeded in the queue.
    let store = open_store(&repo.repo).await;
    let mut req = ClaimRequest::new("vanished-worker");
    req.plan_id = Some("ghost".into());
    req.lease = Duration::from_millis(1);
    let claimed = store
        .claim(&req)
        .await
        .unwrap()
        .expect("a ghost task to claim");
    store.register_worker(&dead_worker()).await.unwrap();
    store.close().await;
    let pool = sqlx::SqlitePool::connect(&format!(
        "sqlite:{}",
        repo.repo.join(".whilly/whilly.db").display()
    ))
    .await
    .unwrap();
    sqlx::query(
        "UPDATE workers SET heartbeat_at = heartbeat_at - 3600000 WHERE id = 'dead-worker'",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    // .whilly/ readable by everyone.
    let state = repo.repo.join(".whilly");
    let mirror = state.join("events.jsonl");
    chmod(&state, 0o755);
    chmod(&mirror, 0o644);
    // A GitHub token the stand-in refuses, a missing agent binary, a disk budget exceeded.
    let gh = GitHubStandIn::start();
    let api = format!("github.api_url={}", gh.url());
    let env = [(
        "WHILLY_GITHUB_TOKEN",
        "ghp_refused0000000000000000000000000000",
    )];
    let mut args = vec![
        "-c",
        api.as_str(),
        "-c",
        "agents.fake.template=/nonexistent/agent-bin {prompt_file}",
        "-c",
        "worktrees.max_disk=1K",
        "doctor",
    ];

    let (out, v) = doctor(&repo, &args, &env);
    assert_eq!(out.code, Some(1), "{out}");
    assert_eq!(v["exit_code"], 1);
    let files = one(&v, "files", "problem", "can be read by other users");
    assert!(
        files["what"].as_str().unwrap().contains("(0755)"),
        "{files}"
    );
    assert!(
        files["what"]
            .as_str()
            .unwrap()
            .contains("events.jsonl (0644)"),
        "{files}"
    );
    assert!(files["fix"].as_str().unwrap().contains("chmod"), "{files}");
    let wt = one(&v, "worktrees", "problem", "orphan worktree");
    assert!(
        wt["what"]
            .as_str()
            .unwrap()
            .contains("its task is no longer in the queue"),
        "{wt}"
    );
    assert!(
        wt["fix"].as_str().unwrap().contains("whilly doctor --fix"),
        "{wt}"
    );
    let kept = one(&v, "worktrees", "warn", "branch whilly/old/X is kept");
    assert!(
        kept["fix"]
            .as_str()
            .unwrap()
            .contains("git branch -D whilly/old/X"),
        "{kept}"
    );
    let disk = one(
        &v,
        "worktrees",
        "problem",
        "over [worktrees] max_disk = 1.0 KiB",
    );
    assert!(
        disk["fix"]
            .as_str()
            .unwrap()
            .contains("raise worktrees.max_disk"),
        "{disk}"
    );
    let lease = one(&v, "leases", "problem", "held by leases that expired");
    assert!(
        lease["what"]
            .as_str()
            .unwrap()
            .contains("worker vanished-worker"),
        "{lease}"
    );
    assert_eq!(lease["fixable"]["kind"], "reclaim_leases");
    let worker = one(&v, "workers", "problem", "dead-worker on gone-box");
    assert!(
        worker["fix"]
            .as_str()
            .unwrap()
            .contains("mark them offline"),
        "{worker}"
    );
    let ghost = one(&v, "plans", "problem", "plan ghost was imported from");
    assert!(
        ghost["what"]
            .as_str()
            .unwrap()
            .contains("which no longer exists"),
        "{ghost}"
    );
    assert!(
        ghost["fix"].as_str().unwrap().contains("--id ghost"),
        "{ghost}"
    );
    assert!(
        ghost.get("fixable").is_none(),
        "a ghost with work is never removed: {ghost}"
    );
    let agent = one(&v, "agents", "problem", "agent fake (needed by run.agent");
    assert!(
        agent["what"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/agent-bin"),
        "{agent}"
    );
    assert!(
        agent["fix"].as_str().unwrap().contains("agents.fake.bin"),
        "{agent}"
    );
    let token = one(
        &v,
        "tokens",
        "problem",
        "GitHub: the token from WHILLY_GITHUB_TOKEN is refused",
    );
    assert!(
        token["fix"]
            .as_str()
            .unwrap()
            .contains("WHILLY_GITHUB_TOKEN"),
        "{token}"
    );
    assert!(
        !out.stdout.contains("ghp_refused"),
        "the token itself is never printed"
    );

    // --fix: the safe ones, each said. (Opening a SQLite queue narrows `.whilly/` itself, which
    // the run above did: widen it again so --fix has the whole job.)
    chmod(&state, 0o755);
    args.push("--fix");
    let (out, v) = doctor(&repo, &args, &env);
    assert_eq!(out.code, Some(1), "agent, token and ghost are left: {out}");
    let said: Vec<&str> = v["fixes_applied"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            assert_eq!(f["ok"], true, "{f}");
            f["said"].as_str().unwrap()
        })
        .collect();
    let said = said.join("\n");
    assert!(said.contains("files to 0600"), "{said}");
    assert!(said.contains(&format!("and branch {b_branch}")), "{said}");
    assert!(
        said.contains("reclaimed expired leases: back to PENDING"),
        "{said}"
    );
    assert!(said.contains("marked offline: dead-worker"), "{said}");
    // On disk and in the queue.
    assert_eq!(mode(&state), 0o700);
    assert_eq!(mode(&mirror), 0o600);
    let left = branches(&repo);
    assert!(!left.contains(&b_branch), "{left:?}");
    assert!(left.contains(&"whilly/old/X".to_string()), "kept: {left:?}");
    let listed = repo.run(&["worktrees", "list", "--json"], LIMIT);
    assert_eq!(listed.stdout.trim(), "[]", "{listed}");
    let task = repo.task("ghost", &claimed.task.id);
    assert_eq!(task["status"], "PENDING", "{task}");
    assert_eq!(repo.events_of_type("task.lease_expired").len(), 1);
    let offline = repo.events_of_type("worker.offline");
    assert_eq!(offline.len(), 1);
    assert_eq!(offline[0]["worker_id"], "dead-worker");
    // What is left is only what a human must do.
    let mut left: Vec<String> = problems(&v);
    left.sort();
    assert_eq!(left.len(), 3, "{left:#?}");
    assert!(left[0].starts_with("GitHub: the token"), "{left:?}");
    assert!(left[1].starts_with("agent fake"), "{left:?}");
    assert!(left[2].starts_with("plan ghost"), "{left:?}");

    // The human part done (the file back, the agent and token as configured): all clear.
    std::fs::write(&ghost_file, ghost_text).unwrap();
    let (out, v) = doctor(&repo, &["doctor"], &[]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(problems(&v).is_empty(), "{:?}", problems(&v));
    one(&v, "worktrees", "warn", "branch whilly/old/X is kept");
    one(&v, "workers", "ok", "1 marked offline");
    assert_eq!(json!(v["fixes_applied"]), json!([]));
}

/// The same checks on a Postgres queue: the database is named without its password, a lease
/// whose worker vanished and a silent worker are found, `--fix` reclaims and marks them through
/// the store's own paths, and the queue is clean afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_queue_is_checked_and_fixed() {
    let db = support::pg::fresh_database().await;
    let url = db.url();
    let repo = Repo::new(&engine::plan(PLAN, vec![engine::task("A")]), TEMPLATE);
    let db_args = ["--database-url", url.as_str()];
    let imp = repo.run(
        &[&db_args[..], &["plan", "import", "plan.json"]].concat(),
        LIMIT,
    );
    assert_eq!(imp.code, Some(0), "{imp}");
    let (out, v) = doctor(&repo, &[&db_args[..], &["doctor"]].concat(), &[]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(problems(&v).is_empty(), "{:?}", problems(&v));
    one(&v, "database", "ok", "postgres");
    one(&v, "leases", "ok", "no expired leases");

    // A claim whose worker vanished, and a worker silent for an hour.
    let store = whilly::store::postgres::PgStore::connect(&url, None)
        .await
        .unwrap();
    let mut req = ClaimRequest::new("vanished-worker");
    req.lease = Duration::from_millis(1);
    let claimed = store.claim(&req).await.unwrap().expect("A to claim");
    store.register_worker(&dead_worker()).await.unwrap();
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    sqlx::query(
        "UPDATE workers SET heartbeat_at = now() - interval '1 hour' WHERE id = 'dead-worker'",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    store.close().await;

    let (out, v) = doctor(&repo, &[&db_args[..], &["doctor"]].concat(), &[]);
    assert_eq!(out.code, Some(1), "{out}");
    let lease = one(&v, "leases", "problem", "held by leases that expired");
    assert!(
        lease["what"]
            .as_str()
            .unwrap()
            .contains("worker vanished-worker"),
        "{lease}"
    );
    one(&v, "workers", "problem", "dead-worker on gone-box");

    let (out, v) = doctor(&repo, &[&db_args[..], &["doctor", "--fix"]].concat(), &[]);
    assert_eq!(out.code, Some(0), "everything left was fixable: {out}");
    let said: Vec<String> = v["fixes_applied"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["said"].as_str().unwrap().to_string())
        .collect();
    let said = said.join("\n");
    assert!(said.contains("reclaimed expired leases"), "{said}");
    assert!(said.contains("marked offline: dead-worker"), "{said}");
    let show = repo.run(
        &[&db_args[..], &["plan", "show", PLAN, "--json"]].concat(),
        LIMIT,
    );
    let shown: Value = serde_json::from_str(&show.stdout).unwrap();
    let a = shown["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == claimed.task.id)
        .unwrap();
    assert_eq!(a["status"], "PENDING", "{a}");
    let (out, v) = doctor(&repo, &[&db_args[..], &["doctor"]].concat(), &[]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(problems(&v).is_empty(), "{:?}", problems(&v));
}
