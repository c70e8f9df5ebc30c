//! The `whilly::prd` API as the console and the CLI drive it: one-shot calls (answer, cost, typed
//! errors, timeout and cancellation killing the whole process group) and the wizard's jobs run
//! for real (a scripted agent, files, a real SQLite store) with the pure wizard deciding each step.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use whilly::agent::{AgentSettings, BackendKind};
use whilly::domain::Usd;
use whilly::prd::{
    Applied, Collisions, Effect, Input, Job, JobContext, OneShot, OneShotError, PrdError, Reply,
    Stage, Wizard, WizardOptions, run_job,
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

/// Runs the jobs `fx` asks for, feeding each reply back, until the wizard wants the operator;
/// returns what it shows then and adds up the agent calls' cost.
async fn settle(
    w: &mut Wizard,
    cx: &JobContext<'_>,
    mut fx: Vec<Effect>,
    cost: &mut Usd,
) -> Vec<Effect> {
    while let [Effect::Run(job)] = &fx[..] {
        let done = run_job(cx, job.clone()).await.unwrap();
        *cost += done.spent.cost;
        fx = w.handle(Input::Reply(done.reply));
    }
    fx
}

#[tokio::test]
async fn the_wizard_with_its_jobs_from_idea_to_imported_and_merged_plans() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    std::fs::create_dir_all(&root).unwrap();
    let agent = script_agent(
        "repair",
        &dir.path().join("log"),
        &root.join(whilly::prd::STATE_DIR),
    );
    let target = whilly::store::open::target_from(None, &root).unwrap();
    let store = whilly::store::open::open(&target, &root).await.unwrap();
    let cx = JobContext {
        agent: &agent,
        root: &root,
        store: Some(store.as_ref()),
        merge_into: Some("prd-calendar-sync"),
    };
    let mut cost = Usd::ZERO;
    let mut w = Wizard::new(WizardOptions::default());
    assert!(matches!(
        &w.handle(Input::Answer("too early".into()))[..],
        [Effect::Refused(_)]
    ));
    let fx = w.handle(Input::Idea("Sync our two team calendars".into()));
    let fx = settle(&mut w, &cx, fx, &mut cost).await;
    assert!(
        matches!(&fx[..], [Effect::ShowQuestion(q)] if q.contains("question 1")),
        "{fx:?}"
    );
    let fx = w.handle(Input::Answer("the operations team".into()));
    let fx = settle(&mut w, &cx, fx, &mut cost).await;
    assert!(matches!(&fx[..], [Effect::ShowQuestion(_)]), "{fx:?}");
    // An empty answer, then the scripted agent says DONE and writes the PRD.
    let fx = w.handle(Input::Answer(String::new()));
    let fx = settle(&mut w, &cx, fx, &mut cost).await;
    let prd = root.join("docs/PRD-calendar-sync.md");
    assert!(
        matches!(&fx[..], [Effect::ShowPrd { path, text }] if path == &prd && text.starts_with("# Calendar Sync")),
        "{fx:?}"
    );
    assert_eq!(w.answers().len(), 2);
    assert_eq!(w.answers()[1].answer, "");

    // The operator edits the PRD; the plan is made from the edited text, saved first.
    let edited = std::fs::read_to_string(&prd).unwrap() + "FR-3. Edited by the operator.\n";
    let job = w.handle(Input::MakePlan {
        edited: Some(edited.clone()),
    });
    let [Effect::Run(job @ Job::MakePlan { .. })] = &job[..] else {
        panic!("{job:?}")
    };
    let done = run_job(&cx, job.clone()).await.unwrap();
    assert_eq!(
        done.spent.calls, 2,
        "the first reply needed the repair round"
    );
    assert_eq!(std::fs::read_to_string(&prd).unwrap(), edited);
    let log = std::fs::read_to_string(dir.path().join("log/prompt-004.md")).unwrap();
    assert!(log.contains("Edited by the operator"), "{log}");
    assert_eq!(w.handle(Input::Reply(done.reply)), [Effect::ShowPlan]);
    assert_eq!(w.gate().len(), 1, "TASK-003 is vague");
    let fx = w.handle(Input::Import(None));
    assert!(
        matches!(&fx[..], [Effect::Refused(why)] if why.contains("TASK-003")),
        "{fx:?}"
    );

    // The operator fixes the task the gate refused.
    let mut spec = w.plan().unwrap().clone();
    let index = spec.tasks.iter().position(|t| t.id == "TASK-003").unwrap();
    let t3 = &mut spec.tasks[index];
    t3.description = "Write the user documentation of the calendar sync.".into();
    t3.test_steps = vec!["test -s docs/sync.md".into()];
    let fix = spec.tasks[index].clone();
    w.handle(Input::SetTask { index, task: fix });
    assert!(w.plan_ready(), "{:?}", w.problems());

    let mut merging = w.clone();
    let fx = w.handle(Input::Import(None));
    let fx = settle(&mut w, &cx, fx, &mut cost).await;
    let imported = Applied::Imported {
        path: root.join("docs/PRD-calendar-sync.plan.json"),
        plan_id: "prd-calendar-sync".into(),
        tasks: 3,
    };
    assert_eq!(fx, [Effect::Done(imported.clone())]);
    assert_eq!(w.stage(), &Stage::Finished(imported));
    assert!(root.join("docs/PRD-calendar-sync.plan.json").is_file());

    // Merging the same plan into it: every id clashes and is renamed, dependencies follow.
    let fx = merging.handle(Input::Merge);
    let fx = settle(&mut merging, &cx, fx, &mut cost).await;
    let [Effect::Done(Applied::Merged { added, renamed, .. })] = &fx[..] else {
        panic!("{fx:?}")
    };
    assert_eq!(added, &["TASK-004", "TASK-005", "TASK-006"]);
    assert_eq!(renamed.len(), 3);
    let err = whilly::prd::merge_and_import(
        store.as_ref(),
        "prd-calendar-sync",
        merging.plan().unwrap(),
        Collisions::Refuse,
    )
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
    assert!(cost == Usd::ZERO);

    // Without a queue the queue's jobs fail, typed.
    let bare = JobContext {
        store: None,
        merge_into: None,
        ..cx
    };
    let err = run_job(&bare, Job::Merge(merging.plan().unwrap().clone()))
        .await
        .unwrap_err();
    assert!(matches!(err, PrdError::Missing(_)), "{err}");
    assert!(matches!(
        Reply::failed(&err),
        Reply::Failed { raw: None, .. }
    ));
}

#[tokio::test]
async fn the_question_cap_ends_the_interview_without_a_call() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let agent = script_agent("good", &log, &dir.path().join("scratch"));
    let cx = JobContext {
        agent: &agent,
        root: dir.path(),
        store: None,
        merge_into: None,
    };
    let mut cost = Usd::ZERO;
    let opts = WizardOptions {
        max_questions: 1,
        ..WizardOptions::default()
    };
    let mut w = Wizard::new(opts);
    let fx = w.handle(Input::Idea("an idea".into()));
    let fx = settle(&mut w, &cx, fx, &mut cost).await;
    assert!(matches!(&fx[..], [Effect::ShowQuestion(_)]), "{fx:?}");
    // The scripted agent would ask a second question; the cap writes the PRD instead.
    let fx = w.handle(Input::Answer("yes".into()));
    assert!(
        matches!(&fx[..], [Effect::Run(Job::WritePrd { .. })]),
        "{fx:?}"
    );
    assert_eq!(std::fs::read_dir(&log).unwrap().count(), 1);
    // Ending early drops the question shown.
    let mut w = Wizard::new(WizardOptions::default());
    let fx = w.handle(Input::Idea("an idea".into()));
    let fx = settle(&mut w, &cx, fx, &mut cost).await;
    assert!(matches!(&fx[..], [Effect::ShowQuestion(_)]), "{fx:?}");
    let fx = w.handle(Input::EndInterview);
    assert!(
        matches!(&fx[..], [Effect::Run(Job::WritePrd { answers, .. })] if answers.is_empty()),
        "{fx:?}"
    );
    assert_eq!(std::fs::read_dir(&log).unwrap().count(), 2);
}
