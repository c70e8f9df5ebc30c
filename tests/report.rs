//! `whilly report` after a known run with the real binary: exact attempts and statuses, cost,
//! checks, in Markdown and JSON, and the report every run leaves under `.whilly/reports/`.

mod support;

use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;
use support::engine::{self, Repo};

const LIMIT: Duration = Duration::from_secs(120);
const PLAN: &str = "rep-plan";

/// Writes files/<task>.txt and finishes, except for task B, which always fails.
const TEMPLATE: &str = r#"sh -c 'if [ "$1" = B ]; then echo broken; exit 3; fi; mkdir -p files; echo "by $1" > "files/$1.txt"; echo "<promise>COMPLETE</promise>"' agent {task_id}"#;

#[test]
fn a_run_leaves_a_report_and_report_tells_the_same() {
    let mut b = engine::task("B");
    b["max_attempts"] = 2.into();
    let repo = Repo::new(&engine::plan(PLAN, vec![engine::task("A"), b]), TEMPLATE);
    let run = repo.run_plan(&[], &[]).wait(LIMIT);
    assert_eq!(run.code, Some(1), "{run}");

    // The run said where its report is; it is private and under .whilly/reports/.
    let line = run
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("whilly: run report written to "))
        .unwrap_or_else(|| panic!("no report line:\n{run}"));
    let path = std::path::PathBuf::from(line.trim());
    let reports = repo.repo.join(".whilly/reports");
    assert_eq!(
        path.parent().unwrap().canonicalize().unwrap(),
        reports.canonicalize().unwrap()
    );
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with(&format!("{PLAN}-")) && name.ends_with("Z.md"),
        "{name}"
    );
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&reports), 0o700);
    let md = std::fs::read_to_string(&path).unwrap();
    assert!(
        md.starts_with(&format!("# Run report: plan {PLAN} (engine-tests)")),
        "{md}"
    );
    assert!(md.contains("| A | DONE | 1 | $0.00 |"), "{md}");
    assert!(md.contains("| 1/1 passed | - |"), "{md}");
    assert!(md.contains("| B | FAILED"), "{md}");
    assert!(md.contains(" | 2 | $0.00 |"), "{md}");
    assert!(
        md.contains("**Totals:** 2 tasks (1 DONE, 1 FAILED), 3 attempts, $0.00 spent"),
        "{md}"
    );

    // `whilly report` over the same plan: the same table (the whole history is this run).
    let out = repo.run(&["report", PLAN], LIMIT);
    assert_eq!(out.code, Some(0), "{out}");
    let table = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| l.starts_with('|') || l.starts_with("**Totals"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(table(&out.stdout), table(&md));

    let out = repo.run(&["report", "--format", "json"], LIMIT);
    assert_eq!(out.code, Some(0), "{out}");
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["plan_id"], PLAN);
    let tasks = v["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2);
    assert_eq!(
        (&tasks[0]["id"], &tasks[0]["status"], &tasks[0]["attempts"]),
        (&"A".into(), &"DONE".into(), &1.into())
    );
    assert_eq!(tasks[0]["checks"]["passed"], 1);
    assert_eq!(tasks[0]["checks"]["total"], 1);
    assert!(tasks[0]["duration_secs"].as_f64().unwrap() > 0.0);
    assert_eq!(
        (&tasks[1]["id"], &tasks[1]["status"], &tasks[1]["attempts"]),
        (&"B".into(), &"FAILED".into(), &2.into())
    );
    assert_eq!(v["totals"]["attempts"], 3);
    assert_eq!(v["totals"]["by_status"]["DONE"], 1);
    assert_eq!(v["totals"]["by_status"]["FAILED"], 1);
    assert!(v["totals"]["wall_secs"].as_f64().unwrap() > 0.0);

    // --out writes the file instead; an unknown plan is an error naming the known ones.
    let file = repo.shared_file("r.md");
    let out = repo.run(&["report", PLAN, "--out", file.to_str().unwrap()], LIMIT);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(table(&std::fs::read_to_string(&file).unwrap()), table(&md));
    let out = repo.run(&["report", "nope"], LIMIT);
    assert_ne!(out.code, Some(0), "{out}");
    assert!(out.stderr.contains(PLAN), "{out}");
}
