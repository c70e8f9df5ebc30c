//! The `whilly::prd` API as the console drives it: one-shot calls (answer, cost, typed errors,
//! timeout and cancellation killing the whole process group) and the wizard step by step with a
//! real SQLite store.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use whilly::agent::{AgentSettings, BackendKind};
use whilly::domain::Usd;
use whilly::prd::{
    Collisions, OneShot, OneShotError, PrdError, Stage, Step, Wizard, WizardOptions,
};

fn command_agent(template: &str, scratch: &Path) -> OneShot {
    let mut s = AgentSettings::new(BackendKind::Command);
    s.name = "fake".into();
    s.command = Some(template.to_string());
    OneShot::new(&s, scratch).expect("agent")
}

/// Whether `pid` is gone (or a zombie nobody reaped yet, which runs nothing).
fn dead(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

async fn wait_for_file(path: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(s) = std::fs::read_to_string(path)
            && s.ends_with('\n')
        {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn assert_dies(pid: i32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !dead(pid) {
        assert!(Instant::now() < deadline, "process {pid} outlived the call");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An agent that starts a grandchild (`sleep`), records its pid, and waits forever.
fn sleeper_template(pid_file: &Path) -> String {
    format!(
        "sh -c 'sleep 300 & echo $! > {}; wait' agent {{prompt}}",
        pid_file.display()
    )
}

#[tokio::test]
async fn answer_and_cost_from_a_claude_style_result() {
    let dir = tempfile::tempdir().unwrap();
    let agent = command_agent(
        r#"sh -c 'echo "some banner"; echo "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"QUESTION: why?\",\"total_cost_usd\":0.25}"' agent {prompt}"#,
        &dir.path().join("scratch"),
    );
    let reply = agent.ask("t", "the prompt", dir.path()).await.unwrap();
    assert_eq!(reply.text, "QUESTION: why?");
    assert_eq!(reply.cost, Usd::from_f64(0.25));
    // A plain command's answer is its whole output, not only the tail a task run keeps.
    let long = command_agent("seq 1 200", &dir.path().join("scratch"));
    let reply = long.ask("t", "p", dir.path()).await.unwrap();
    assert_eq!(reply.text.lines().count(), 200);
    // The prompt file lives only for the call.
    assert_eq!(
        std::fs::read_dir(dir.path().join("scratch"))
            .unwrap()
            .count(),
        0
    );
}

#[tokio::test]
async fn failures_are_typed() {
    let dir = tempfile::tempdir().unwrap();
    let scratch = dir.path().join("scratch");
    let err = command_agent(
        "sh -c 'echo working; echo \"boom: disk on fire\" >&2; exit 7' agent {prompt}",
        &scratch,
    )
    .ask("t", "p", dir.path())
    .await
    .unwrap_err();
    match &err {
        OneShotError::Failed { code, tail, .. } => {
            assert_eq!(*code, Some(7));
            assert!(tail.contains("disk on fire"), "{tail}");
        }
        other => panic!("{other:?}"),
    }
    let err = command_agent(
        "sh -c 'echo \"Error: invalid x-api-key\" >&2; exit 1' agent {prompt}",
        &scratch,
    )
    .ask("t", "p", dir.path())
    .await
    .unwrap_err();
    assert!(matches!(err, OneShotError::Auth { .. }), "{err:?}");
    let err = command_agent("true", &scratch)
        .ask("t", "p", dir.path())
        .await
        .unwrap_err();
    assert!(matches!(err, OneShotError::EmptyReply { .. }), "{err:?}");

    let mut s = AgentSettings::new(BackendKind::Claude);
    s.bin = "/nonexistent/claude".into();
    let err = OneShot::new(&s, &scratch).unwrap_err().to_string();
    assert!(err.contains("agents.claude.bin"), "{err}");
    let err = OneShot::new(&AgentSettings::new(BackendKind::Handoff), &scratch)
        .unwrap_err()
        .to_string();
    assert!(err.contains("handoff"), "{err}");
}

#[tokio::test]
async fn timeout_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let agent = command_agent(&sleeper_template(&pid_file), &dir.path().join("scratch"))
        .with_timeout(Duration::from_secs(2));
    let started = Instant::now();
    let err = agent.ask("t", "p", dir.path()).await.unwrap_err();
    assert!(matches!(err, OneShotError::Timeout { .. }), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    let pid: i32 = wait_for_file(&pid_file).await.trim().parse().unwrap();
    assert_dies(pid).await;
}

#[tokio::test]
async fn dropping_the_call_kills_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let agent = command_agent(&sleeper_template(&pid_file), &dir.path().join("scratch"));
    let cwd = dir.path().to_path_buf();
    let task = tokio::spawn(async move { agent.ask("t", "p", &cwd).await });
    let pid: i32 = wait_for_file(&pid_file).await.trim().parse().unwrap();
    assert!(!dead(pid));
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert_dies(pid).await;
}

fn script_agent(mode: &str, log: &Path, scratch: &Path) -> OneShot {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fake_agents/prd_agent.sh");
    command_agent(
        &format!(
            "sh {} {mode} {} {{prompt_file}}",
            script.display(),
            log.display()
        ),
        scratch,
    )
}

#[tokio::test]
async fn the_wizard_step_by_step_as_the_console_drives_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    std::fs::create_dir_all(&root).unwrap();
    let agent = script_agent(
        "repair",
        &dir.path().join("log"),
        &root.join(whilly::prd::STATE_DIR),
    );
    let mut w = Wizard::new(
        agent,
        &root,
        "Sync our two team calendars",
        WizardOptions::default(),
    );
    assert!(matches!(w.answer("too early"), Err(PrdError::WrongStep(_))));
    assert_eq!(w.stage(), Stage::Interviewing);
    let Step::Question(q1) = w.next_question().await.unwrap() else {
        panic!("expected a question")
    };
    // Asking again before answering gives the same question without another call.
    assert_eq!(w.next_question().await.unwrap(), Step::Question(q1.clone()));
    w.answer("the operations team").unwrap();
    assert!(matches!(
        w.next_question().await.unwrap(),
        Step::Question(_)
    ));
    w.answer("").unwrap();
    assert_eq!(w.next_question().await.unwrap(), Step::Done);
    assert_eq!(w.answers().len(), 2);
    assert_eq!(w.stage(), Stage::InterviewDone);

    let prd = w.write_prd().await.unwrap();
    assert_eq!(prd, root.join("docs/PRD-calendar-sync.md"));
    assert_eq!(w.stage(), Stage::PrdWritten);
    // The operator edits the PRD; the plan is generated from the edited file.
    let edited = std::fs::read_to_string(&prd).unwrap() + "FR-3. Edited by the operator.\n";
    std::fs::write(&prd, &edited).unwrap();
    let generated = w.generate_plan().await.unwrap().clone();
    assert_eq!(
        generated.calls, 2,
        "the first reply needed the repair round"
    );
    assert_eq!(generated.gate.len(), 1);
    let log = std::fs::read_to_string(dir.path().join("log/prompt-004.md")).unwrap();
    assert!(log.contains("Edited by the operator"), "{log}");

    // The operator fixes the task the gate refused in the task table.
    let mut spec = generated.spec.clone();
    let t3 = spec.tasks.iter_mut().find(|t| t.id == "TASK-003").unwrap();
    t3.description = "Write the user documentation of the calendar sync.".into();
    t3.test_steps = vec!["test -s docs/sync.md".into()];
    let report = w.set_plan(spec);
    assert!(!report.has_errors() && report.gate.is_empty());

    let target = whilly::store::open::target_from(None, &root).unwrap();
    let store = whilly::store::open::open(&target, &root).await.unwrap();
    let (path, saved, imported) = w.save_as_new_plan(store.as_ref(), None).await.unwrap();
    assert_eq!(path, root.join("docs/PRD-calendar-sync.plan.json"));
    assert_eq!(saved.id, "prd-calendar-sync");
    assert_eq!(imported.created.len(), 3);
    // Merging the same plan into it: every id clashes and is renamed, dependencies follow.
    let (merged, report) = w
        .merge_into(store.as_ref(), "prd-calendar-sync", Collisions::Rename)
        .await
        .unwrap();
    assert_eq!(merged.added, ["TASK-004", "TASK-005", "TASK-006"]);
    assert_eq!(report.created.len(), 3);
    let err = w
        .merge_into(store.as_ref(), "prd-calendar-sync", Collisions::Refuse)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("TASK-001, TASK-002, TASK-003"), "{err}");
    let tasks = store.list_tasks("prd-calendar-sync").await.unwrap();
    assert_eq!(tasks.len(), 6);
    assert_eq!(
        tasks[4].spec.dependencies,
        ["TASK-004"],
        "TASK-005 depends on the renamed TASK-004"
    );
    assert!(w.cost() == Usd::ZERO);
}

#[tokio::test]
async fn the_question_cap_ends_the_interview_without_a_call() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let agent = script_agent("good", &log, &dir.path().join("scratch"));
    let opts = WizardOptions {
        max_questions: 1,
        ..WizardOptions::default()
    };
    let mut w = Wizard::new(agent, dir.path(), "an idea", opts);
    assert!(matches!(
        w.next_question().await.unwrap(),
        Step::Question(_)
    ));
    w.answer("yes").unwrap();
    // The scripted agent would ask a second question; the cap says DONE first.
    assert_eq!(w.next_question().await.unwrap(), Step::Done);
    assert_eq!(std::fs::read_dir(&log).unwrap().count(), 1);
    // Ending early drops a pending question.
    let agent = script_agent("good", &log, &dir.path().join("scratch"));
    let mut w = Wizard::new(agent, dir.path(), "an idea", WizardOptions::default());
    assert!(matches!(
        w.next_question().await.unwrap(),
        Step::Question(_)
    ));
    w.finish_interview();
    assert_eq!(w.pending_question(), None);
    assert_eq!(w.next_question().await.unwrap(), Step::Done);
    assert_eq!(std::fs::read_dir(&log).unwrap().count(), 2);
}
