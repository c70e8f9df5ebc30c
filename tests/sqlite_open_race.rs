//! Several `whilly` processes opening a brand-new SQLite queue at once (a `run` and an `events`
//! started together, say) all get in: none fails with "database is locked" while another is
//! creating the file, switching it to WAL or migrating it.

use std::process::{Command, Stdio};

#[test]
fn concurrent_first_opens_all_succeed() {
    for round in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("git")
            .args(["init", "-q"])
            .current_dir(dir.path())
            .status()
            .unwrap()
            .success();
        assert!(ok);
        std::fs::write(
            dir.path().join("plan.json"),
            r#"{"project": "race", "plan_id": "race", "tasks": [{"id": "T-1", "status": "pending",
              "priority": "high", "description": "a task to import while others open the queue",
              "acceptance_criteria": ["imported"], "test_steps": ["whilly plan show race"]}]}"#,
        )
        .unwrap();
        let children: Vec<_> = (0..9)
            .map(|i| {
                let args: &[&str] = match i % 3 {
                    0 => &["plan", "import", "plan.json"],
                    1 => &["plan", "list"],
                    _ => &["events", "--json"],
                };
                Command::new(env!("CARGO_BIN_EXE_whilly"))
                    .args(args)
                    .current_dir(dir.path())
                    .env("HOME", dir.path())
                    .env("XDG_CONFIG_HOME", dir.path().join("xdg"))
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}
