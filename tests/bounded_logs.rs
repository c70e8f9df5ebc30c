//! An attempt's log is bounded (issue 26, item 5): an agent printing 30 MB under
//! `[logging] attempt_log_max_mb = 8` leaves a log of about 8 MB holding its first lines, a
//! note of what was left out, and its last lines (the completion marker among them), and the
//! task is DONE.

#[path = "support/engine.rs"]
mod engine;

use engine::{Repo, plan, task};
use std::time::Duration;

#[test]
fn a_flooding_agents_log_keeps_its_head_and_tail_within_the_limit() {
    let flood = "sh -c 'echo FIRST-LINE; head -c 31457280 /dev/zero | tr \"\\0\" x | fold -w 100; \
                 mkdir -p files; echo done > files/$WHILLY_TASK_ID.txt; echo LAST-LINE; \
                 echo \"<promise>COMPLETE</promise>\"'";
    let repo = Repo::new(&plan("p", vec![task("T-1")]), flood);
    let out = repo.run(
        &[
            "-c",
            "logging.attempt_log_max_mb=8",
            "run",
            "plan.json",
            "--headless",
        ],
        Duration::from_secs(120),
    );
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(repo.task("p", "T-1")["status"], "DONE");
    let log = repo
        .attempt_files("p", "T-1")
        .into_iter()
        .find(|f| f.extension().is_some_and(|e| e == "log"))
        .expect("an attempt log");
    let size = std::fs::metadata(&log).unwrap().len();
    assert!(
        size <= 8 * 1_048_576 + 4096,
        "{} is {size} bytes",
        log.display()
    );
    let text = String::from_utf8_lossy(&std::fs::read(&log).unwrap()).into_owned();
    assert!(text.contains("FIRST-LINE"));
    assert!(text.contains("bytes of output left out here"), "the note");
    let tail = &text[text.len().saturating_sub(4096)..];
    assert!(tail.contains("LAST-LINE") && tail.contains("<promise>COMPLETE</promise>"));
}
