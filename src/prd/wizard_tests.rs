//! The wizard driven by inputs alone: no agent, no files, no queue.

use super::*;
use crate::domain::Priority;

fn good_task(id: &str) -> TaskSpec {
    TaskSpec {
        id: id.into(),
        priority: Priority::High,
        description: format!("Implement the {id} endpoint returning the user's profile as JSON"),
        acceptance_criteria: vec!["GET /profile returns 200 with the profile".into()],
        test_steps: vec!["cargo test profile".into()],
        key_files: vec![format!("src/{}.rs", id.to_lowercase())],
        ..TaskSpec::default()
    }
}

fn vague_task(id: &str) -> TaskSpec {
    TaskSpec {
        description: "Docs.".into(),
        test_steps: Vec::new(),
        ..good_task(id)
    }
}

fn plan_of(tasks: Vec<TaskSpec>) -> PlanSpec {
    PlanSpec {
        id: "prd-profile".into(),
        project: "demo".into(),
        tasks,
        ..PlanSpec::default()
    }
}

fn qa(q: &str, a: &str) -> QaPair {
    QaPair {
        question: q.into(),
        answer: a.into(),
    }
}

fn reply(w: &mut Wizard, r: Reply) -> Vec<Effect> {
    w.handle(Input::Reply(r))
}

fn prd(path: &str, text: &str) -> Reply {
    Reply::Prd {
        path: path.into(),
        text: text.into(),
    }
}

/// A wizard with `plan` ready to review, its PRD at docs/PRD-profile.md.
fn at_plan(plan: PlanSpec) -> Wizard {
    let mut w = Wizard::new(WizardOptions {
        max_questions: 0,
        ..WizardOptions::default()
    });
    w.handle(Input::Idea("a profile page".into()));
    reply(&mut w, prd("docs/PRD-profile.md", "# Profile\n"));
    w.handle(Input::MakePlan { edited: None });
    assert_eq!(reply(&mut w, Reply::Plan(plan)), [Effect::ShowPlan]);
    assert_eq!(w.stage(), &Stage::PlanReady);
    w
}

fn merged() -> Applied {
    Applied::Merged {
        into: "base".into(),
        added: vec!["P-1".into()],
        renamed: Vec::new(),
    }
}

#[test]
fn idea_interview_prd_plan_merge() {
    let mut w = Wizard::default();
    assert_eq!(w.stage(), &Stage::Idea);
    let fx = w.handle(Input::Idea("  A profile page\nwith avatars \n".into()));
    assert_eq!(
        fx,
        [Effect::Run(Job::Ask {
            idea: "A profile page\nwith avatars".into(),
            answers: vec![],
            max_questions: DEFAULT_MAX_QUESTIONS,
        })]
    );
    assert!(w.busy());
    assert_eq!(
        reply(&mut w, Reply::Question("Who uses it?".into())),
        [Effect::ShowQuestion("Who uses it?".into())]
    );
    assert_eq!(
        w.stage(),
        &Stage::Answering {
            question: "Who uses it?".into()
        }
    );
    let fx = w.handle(Input::Answer(" logged-in users ".into()));
    assert!(
        matches!(&fx[..], [Effect::Run(Job::Ask { answers, .. })] if answers == &[qa("Who uses it?", "logged-in users")]),
        "{fx:?}"
    );
    let fx = reply(&mut w, Reply::InterviewDone);
    assert_eq!(
        fx,
        [Effect::Run(Job::WritePrd {
            idea: "A profile page\nwith avatars".into(),
            answers: vec![qa("Who uses it?", "logged-in users")],
        })]
    );
    assert_eq!(w.stage(), &Stage::WritingPrd);

    let fx = reply(&mut w, prd("docs/PRD-profile.md", "# Profile\n"));
    assert_eq!(
        fx,
        [Effect::ShowPrd {
            path: "docs/PRD-profile.md".into(),
            text: "# Profile\n".into()
        }]
    );
    assert_eq!(w.prd_path(), Some(Path::new("docs/PRD-profile.md")));
    // The operator's edit goes with the plan job, to be saved first.
    let fx = w.handle(Input::MakePlan {
        edited: Some("# Profile\n\nFR-1. edited\n".into()),
    });
    assert_eq!(
        fx,
        [Effect::Run(Job::MakePlan {
            prd: "docs/PRD-profile.md".into(),
            edited: Some("# Profile\n\nFR-1. edited\n".into()),
            opts: PlanOptions::default(),
        })]
    );
    assert_eq!(w.stage(), &Stage::Planning);
    assert_eq!(
        reply(&mut w, Reply::Plan(plan_of(vec![good_task("P-1")]))),
        [Effect::ShowPlan]
    );
    assert!(w.plan_ready(), "{:?}", w.problems());
    let fx = w.handle(Input::Merge);
    assert!(
        matches!(&fx[..], [Effect::Run(Job::Merge(p))] if p.tasks.len() == 1),
        "{fx:?}"
    );
    assert_eq!(w.stage(), &Stage::Applying);
    assert_eq!(
        reply(&mut w, Reply::Applied(merged())),
        [Effect::Done(merged())]
    );
    assert_eq!(w.stage(), &Stage::Finished(merged()));
    assert!(!w.busy());
}

#[test]
fn the_question_cap_is_one_rule_whatever_the_agent_says() {
    let mut w = Wizard::new(WizardOptions {
        max_questions: 2,
        ..WizardOptions::default()
    });
    w.handle(Input::Idea("idea".into()));
    reply(&mut w, Reply::Question("q1".into()));
    assert!(matches!(
        &w.handle(Input::Answer("a1".into()))[..],
        [Effect::Run(Job::Ask {
            max_questions: 2,
            ..
        })]
    ));
    reply(&mut w, Reply::Question("q2".into()));
    // The second answer reaches the cap: the PRD comes next, no third question is asked.
    let fx = w.handle(Input::Answer("a2".into()));
    assert!(
        matches!(&fx[..], [Effect::Run(Job::WritePrd { answers, .. })] if answers.len() == 2),
        "{fx:?}"
    );

    // No interview at all: the idea goes straight to the PRD.
    let mut w = Wizard::new(WizardOptions {
        max_questions: 0,
        ..WizardOptions::default()
    });
    let fx = w.handle(Input::Idea("idea".into()));
    assert!(
        matches!(&fx[..], [Effect::Run(Job::WritePrd { answers, .. })] if answers.is_empty()),
        "{fx:?}"
    );
    assert_eq!(
        DEFAULT_MAX_QUESTIONS, 10,
        "one cap for the console and the CLI"
    );
}

#[test]
fn answers_may_be_empty_and_the_operator_may_end_the_interview() {
    let mut w = Wizard::default();
    assert!(matches!(
        &w.handle(Input::Idea("   ".into()))[..],
        [Effect::Refused(why)] if why.contains("idea is empty")
    ));
    assert_eq!(w.stage(), &Stage::Idea, "a refusal changes nothing");
    assert!(matches!(
        &w.handle(Input::Answer("too early".into()))[..],
        [Effect::Refused(_)]
    ));
    w.handle(Input::Idea("idea".into()));
    reply(&mut w, Reply::Question("q1".into()));
    // Empty: the agent decides (the prompt says so).
    let fx = w.handle(Input::Answer(String::new()));
    assert!(
        matches!(&fx[..], [Effect::Run(Job::Ask { answers, .. })] if answers == &[qa("q1", "")]),
        "{fx:?}"
    );
    reply(&mut w, Reply::Question("q2".into()));
    // A last answer is kept and ends the interview.
    let fx = w.handle(Input::LastAnswer("a2".into()));
    assert!(
        matches!(&fx[..], [Effect::Run(Job::WritePrd { answers, .. })] if answers[1] == qa("q2", "a2")),
        "{fx:?}"
    );

    let mut w = Wizard::default();
    w.handle(Input::Idea("idea".into()));
    reply(&mut w, Reply::Question("q1".into()));
    // Ending the interview drops the question shown.
    let fx = w.handle(Input::EndInterview);
    assert!(
        matches!(&fx[..], [Effect::Run(Job::WritePrd { answers, .. })] if answers.is_empty()),
        "{fx:?}"
    );
    assert_eq!(w.answers(), &[]);
}

#[test]
fn replies_are_taken_only_while_their_job_runs() {
    let mut w = Wizard::default();
    assert!(reply(&mut w, Reply::Question("stale".into())).is_empty());
    assert!(reply(&mut w, Reply::Plan(plan_of(vec![good_task("P-1")]))).is_empty());
    assert!(
        reply(
            &mut w,
            Reply::Failed {
                message: "stale".into(),
                raw: None
            }
        )
        .is_empty()
    );
    assert_eq!(w.stage(), &Stage::Idea);
    w.handle(Input::Idea("idea".into()));
    // Asking: a PRD or a plan is no answer to a question job.
    assert!(reply(&mut w, prd("docs/PRD-x.md", "# X")).is_empty());
    assert_eq!(w.stage(), &Stage::Asking);
    assert_eq!(w.plan(), None);
}

#[test]
fn tasks_failing_the_gate_stay_out_of_the_queue_until_fixed() {
    let mut w = at_plan(plan_of(vec![good_task("P-1"), vague_task("P-2")]));
    assert!(!w.plan_ready());
    assert_eq!(w.gate().len(), 1);
    assert_eq!(w.gate()[0].task_id, "P-2");
    assert!(w.problems_of("P-1").is_empty(), "{:?}", w.problems());
    assert!(w.problems_of("P-2").iter().any(|p| p.error));
    for input in [Input::Merge, Input::Import(None)] {
        let fx = w.handle(input);
        assert!(
            matches!(&fx[..], [Effect::Refused(why)] if why.contains("errors (P-2)")),
            "{fx:?}"
        );
        assert_eq!(w.stage(), &Stage::PlanReady);
    }
    // A file may hold it (the operator fixes it there), beside the PRD by default.
    let mut file = w.clone();
    let fx = file.handle(Input::WritePlan(None));
    assert!(
        matches!(&fx[..], [Effect::Run(Job::WritePlan { path, .. })] if path == Path::new("docs/PRD-profile.plan.json")),
        "{fx:?}"
    );

    // Fixed in place: ready.
    assert_eq!(
        w.handle(Input::SetTask {
            index: 1,
            task: good_task("P-2")
        }),
        [Effect::ShowPlan]
    );
    assert!(w.plan_ready(), "{:?}", w.problems());
    assert!(w.gate().is_empty());
    assert!(matches!(
        &w.handle(Input::SetTask {
            index: 9,
            task: good_task("P-9")
        })[..],
        [Effect::Refused(_)]
    ));

    // Deleting a task another depends on breaks validation: not even a file then.
    let mut dependent = good_task("P-3");
    dependent.dependencies = vec!["P-1".into()];
    let mut w = at_plan(plan_of(vec![good_task("P-1"), dependent]));
    assert!(w.plan_ready());
    assert_eq!(w.handle(Input::DeleteTask(0)), [Effect::ShowPlan]);
    assert_eq!(w.plan().map(|p| p.tasks.len()), Some(1));
    assert!(!w.plan_ready(), "P-3 depends on a deleted task");
    assert!(matches!(
        &w.handle(Input::WritePlan(None))[..],
        [Effect::Refused(_)]
    ));
    // Deleting the last task leaves nothing to merge.
    w.handle(Input::DeleteTask(0));
    assert!(matches!(
        &w.handle(Input::Merge)[..],
        [Effect::Refused(why)] if why.contains("no tasks")
    ));
}

#[test]
fn failures_wait_for_a_retry_or_an_edit_of_the_prd() {
    let mut w = Wizard::new(WizardOptions {
        max_questions: 0,
        ..WizardOptions::default()
    });
    w.handle(Input::Idea("idea".into()));
    reply(&mut w, prd("docs/PRD-x.md", "# X"));
    let job = w.handle(Input::MakePlan {
        edited: Some("# X edited".into()),
    });
    let failed = Reply::Failed {
        message: "no valid JSON".into(),
        raw: Some(".whilly/prd/raw.txt".into()),
    };
    assert_eq!(
        reply(&mut w, failed),
        [Effect::Failed {
            message: "no valid JSON".into(),
            raw: Some(".whilly/prd/raw.txt".into())
        }]
    );
    assert_eq!(w.stage(), &Stage::Failed);
    assert_eq!(w.handle(Input::Retry), job, "the same job again");
    reply(
        &mut w,
        Reply::Failed {
            message: "again".into(),
            raw: None,
        },
    );
    // Back to the PRD as it was sent.
    assert_eq!(
        w.handle(Input::EditPrd),
        [Effect::ShowPrd {
            path: "docs/PRD-x.md".into(),
            text: "# X edited".into()
        }]
    );
    assert_eq!(
        w.stage(),
        &Stage::PrdReady {
            path: "docs/PRD-x.md".into()
        }
    );
    assert!(matches!(&w.handle(Input::Retry)[..], [Effect::Refused(_)]));
    assert!(matches!(
        &w.handle(Input::MakePlan {
            edited: Some(" \n".into())
        })[..],
        [Effect::Refused(why)] if why.contains("empty")
    ));

    // A failed merge goes back to the plan; nothing to retry, the operator chooses again.
    let mut w = at_plan(plan_of(vec![good_task("P-1")]));
    w.handle(Input::Merge);
    reply(
        &mut w,
        Reply::Failed {
            message: "database gone".into(),
            raw: None,
        },
    );
    assert_eq!(w.stage(), &Stage::PlanReady);
    assert!(matches!(&w.handle(Input::Retry)[..], [Effect::Refused(_)]));
    assert!(matches!(
        &w.handle(Input::Merge)[..],
        [Effect::Run(Job::Merge(_))]
    ));
}

#[test]
fn a_given_prd_goes_straight_to_the_plan() {
    let mut w = Wizard::new(WizardOptions {
        plan: PlanOptions {
            plan_id: Some("mine".into()),
            ..PlanOptions::default()
        },
        ..WizardOptions::default()
    });
    let fx = w.handle(Input::UsePrd("/p/docs/PRD-given.md".into()));
    assert!(
        matches!(&fx[..], [Effect::Run(Job::MakePlan { edited: None, opts, .. })] if opts.plan_id.as_deref() == Some("mine")),
        "{fx:?}"
    );
    reply(
        &mut w,
        Reply::Failed {
            message: "x".into(),
            raw: None,
        },
    );
    // Its text was never seen: the operator edits the file itself.
    assert!(matches!(
        &w.handle(Input::EditPrd)[..],
        [Effect::Refused(why)] if why.contains("PRD-given.md")
    ));
    w.handle(Input::Retry);
    reply(&mut w, Reply::Plan(plan_of(vec![good_task("P-1")])));
    let fx = w.handle(Input::Import(None));
    assert!(
        matches!(&fx[..], [Effect::Run(Job::Import { path, .. })] if path == Path::new("/p/docs/PRD-given.plan.json")),
        "{fx:?}"
    );
}

#[test]
fn a_plan_without_a_prd_is_kept_under_the_state_dir() {
    let mut w = at_plan(plan_of(vec![good_task("P-1")]));
    w.prd_path = None;
    let fx = w.handle(Input::Import(None));
    assert!(
        matches!(&fx[..], [Effect::Run(Job::Import { path, .. })] if path == &Path::new(STATE_DIR).join("prd-profile.plan.json")),
        "{fx:?}"
    );
    let mut w = at_plan(plan_of(vec![good_task("P-1")]));
    let fx = w.handle(Input::Import(Some("elsewhere.json".into())));
    assert!(
        matches!(&fx[..], [Effect::Run(Job::Import { path, .. })] if path == Path::new("elsewhere.json")),
        "{fx:?}"
    );
}

#[test]
fn what_was_applied_reads_as_a_sentence() {
    let m = Applied::Merged {
        into: "base".into(),
        added: vec!["T-4".into(), "T-5".into()],
        renamed: vec![("T-1".into(), "T-4".into())],
    };
    assert_eq!(
        m.to_string(),
        "merged 2 task(s) into plan base: T-4, T-5 (renamed: T-1 → T-4); the engine picks them \
         up like any ready task"
    );
    let i = Applied::Imported {
        path: "docs/PRD-x.plan.json".into(),
        plan_id: "prd-x".into(),
        tasks: 3,
    };
    assert!(i.to_string().contains("`whilly run --plan prd-x`"), "{i}");
}
