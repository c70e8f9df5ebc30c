//! The wizard driven by keys and replies: no agent, no files.

use super::*;
use crate::domain::Priority;

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

fn type_text(w: &mut Wizard, text: &str) {
    for c in text.chars() {
        let code = if c == '\n' {
            KeyCode::Enter
        } else {
            KeyCode::Char(c)
        };
        w.handle_key(key(code), Instant::now());
    }
}

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

fn plan_of(tasks: Vec<TaskSpec>) -> PlanSpec {
    PlanSpec {
        id: "prd-profile".into(),
        project: "demo".into(),
        tasks,
        ..PlanSpec::default()
    }
}

#[test]
fn idea_then_interview_then_prd_then_plan() {
    let mut w = Wizard::new();
    let now = Instant::now();
    // An empty idea is refused.
    assert!(w.handle_key(ctrl('s'), now).is_empty());
    assert!(w.error.is_some());
    type_text(&mut w, "A profile page\nwith avatars");
    let fx = w.handle_key(ctrl('s'), now);
    assert_eq!(
        fx,
        [WizardEffect::Ask {
            idea: "A profile page\nwith avatars".into(),
            answers: vec![]
        }]
    );
    assert!(w.busy());
    // Keys while the agent thinks do nothing (but Esc still may close).
    assert!(w.handle_key(key(KeyCode::Char('x')), now).is_empty());

    w.apply(WizardReply::Question("Who uses it?".into()), now);
    assert_eq!(
        w.stage,
        Stage::Answer {
            question: "Who uses it?".into()
        }
    );
    type_text(&mut w, "logged-in users");
    let fx = w.handle_key(ctrl('s'), now);
    assert!(matches!(&fx[..], [WizardEffect::Ask { answers, .. }] if answers.len() == 1));
    let fx = w.apply(WizardReply::InterviewDone, now);
    assert!(
        matches!(&fx[..], [WizardEffect::WritePrd { answers, .. }] if answers[0].1 == "logged-in users")
    );
    assert_eq!(w.stage, Stage::Writing);

    w.apply(
        WizardReply::Prd {
            path: "docs/PRD-profile.md".into(),
            text: "# Profile\n\nGoals".into(),
        },
        now,
    );
    assert!(w.editing());
    type_text(&mut w, "!");
    let fx = w.handle_key(ctrl('s'), now);
    match &fx[..] {
        [WizardEffect::SaveAndPlan { path, text }] => {
            assert_eq!(path, &PathBuf::from("docs/PRD-profile.md"));
            assert!(text.starts_with("!# Profile"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    w.apply(WizardReply::Plan(plan_of(vec![good_task("P-1")])), now);
    assert_eq!(w.stage, Stage::Review { selected: 0 });
    assert!(w.plan_ready(), "{:?}", w.problems);
    let fx = w.handle_key(key(KeyCode::Char('m')), now);
    assert!(matches!(&fx[..], [WizardEffect::Merge(p)] if p.tasks.len() == 1));
    w.apply(WizardReply::Applied("merged 1 task".into()), now);
    assert!(matches!(w.stage, Stage::Finished { .. }));
    w.handle_key(key(KeyCode::Char('x')), now);
    assert!(w.closed);
}

#[test]
fn ctrl_n_ends_the_interview_early_and_the_cap_ends_it_too() {
    let now = Instant::now();
    let mut w = Wizard::new();
    type_text(&mut w, "idea");
    w.handle_key(ctrl('s'), now);
    w.apply(WizardReply::Question("q1".into()), now);
    let fx = w.handle_key(ctrl('n'), now);
    assert!(matches!(&fx[..], [WizardEffect::WritePrd { answers, .. }] if answers.is_empty()));

    let mut w = Wizard::new();
    type_text(&mut w, "idea");
    w.handle_key(ctrl('s'), now);
    let mut last = Vec::new();
    for i in 0..MAX_QUESTIONS {
        w.apply(WizardReply::Question(format!("q{i}")), now);
        type_text(&mut w, "a");
        last = w.handle_key(ctrl('s'), now);
    }
    assert!(
        matches!(&last[..], [WizardEffect::WritePrd { answers, .. }] if answers.len() == MAX_QUESTIONS)
    );
}

#[test]
fn vague_tasks_block_merging_until_edited_or_deleted() {
    let now = Instant::now();
    let mut w = Wizard::new();
    let mut vague = good_task("P-2");
    vague.description = "fix".into();
    vague.acceptance_criteria.clear();
    w.apply(
        WizardReply::Plan(plan_of(vec![good_task("P-1"), vague])),
        now,
    );
    assert!(!w.plan_ready());
    assert!(!w.problems_of("P-2").is_empty(), "{:?}", w.problems);
    assert!(w.problems_of("P-1").is_empty(), "{:?}", w.problems);
    assert!(w.handle_key(key(KeyCode::Char('s')), now).is_empty());
    assert!(w.error.as_deref().is_some_and(|e| e.contains("errors")));

    // Edit P-2 as JSON: a syntax error is reported and the editor stays.
    w.handle_key(key(KeyCode::Down), now);
    w.handle_key(key(KeyCode::Char('e')), now);
    assert_eq!(w.stage, Stage::EditTask { index: 1 });
    let good = serde_json::to_string_pretty(&good_task("P-2")).unwrap();
    w.editor = super::editor(vec!["{ broken".into()]);
    w.handle_key(ctrl('s'), now);
    assert!(
        w.error.as_deref().is_some_and(|e| e.contains("line 1")),
        "{:?}",
        w.error
    );
    assert_eq!(w.stage, Stage::EditTask { index: 1 });
    w.editor = super::editor(good.lines().map(str::to_string).collect());
    w.handle_key(ctrl('s'), now);
    assert_eq!(w.stage, Stage::Review { selected: 1 });
    assert!(w.plan_ready(), "{:?}", w.problems);

    // Deleting a task others depend on is an error until fixed.
    let mut dependent = good_task("P-3");
    dependent.dependencies = vec!["P-1".into()];
    w.apply(
        WizardReply::Plan(plan_of(vec![good_task("P-1"), dependent])),
        now,
    );
    assert!(w.plan_ready());
    w.handle_key(key(KeyCode::Char('d')), now);
    assert_eq!(w.plan.as_ref().map(|p| p.tasks.len()), Some(1));
    assert!(!w.plan_ready(), "P-3 depends on a deleted task");
}

#[test]
fn failures_wait_for_retry_or_edit_and_escape_twice_closes() {
    let now = Instant::now();
    let mut w = Wizard::new();
    w.apply(
        WizardReply::Prd {
            path: "docs/PRD-x.md".into(),
            text: "# X".into(),
        },
        now,
    );
    let fx = w.handle_key(ctrl('s'), now);
    assert_eq!(fx.len(), 1);
    w.apply(
        WizardReply::Failed {
            message: "no valid JSON".into(),
            raw: Some(".whilly/prd/raw.txt".into()),
        },
        now,
    );
    assert_eq!(w.stage, Stage::Failed);
    assert_eq!(w.raw_reply, Some(PathBuf::from(".whilly/prd/raw.txt")));
    // `r` runs the same step again.
    assert_eq!(w.handle_key(key(KeyCode::Char('r')), now), fx);
    w.apply(
        WizardReply::Failed {
            message: "again".into(),
            raw: None,
        },
        now,
    );
    // `e` goes back to the PRD with the text as it was sent.
    w.handle_key(key(KeyCode::Char('e')), now);
    assert_eq!(
        w.stage,
        Stage::EditPrd {
            path: "docs/PRD-x.md".into()
        }
    );
    assert_eq!(w.editor.lines().join("\n"), "# X");

    w.handle_key(key(KeyCode::Esc), now);
    assert!(w.closing && !w.closed);
    w.handle_key(key(KeyCode::Char('a')), now);
    assert!(!w.closing, "any other key cancels closing");
    w.handle_key(key(KeyCode::Esc), now);
    w.handle_key(key(KeyCode::Esc), now);
    assert!(w.closed);
}

#[test]
fn escape_in_a_task_editor_drops_the_edit_only() {
    let now = Instant::now();
    let mut w = Wizard::new();
    w.apply(WizardReply::Plan(plan_of(vec![good_task("P-1")])), now);
    w.handle_key(key(KeyCode::Enter), now);
    assert_eq!(w.stage, Stage::EditTask { index: 0 });
    type_text(&mut w, "garbage");
    w.handle_key(key(KeyCode::Esc), now);
    assert_eq!(w.stage, Stage::Review { selected: 0 });
    assert!(!w.closing);
    assert!(w.plan_ready());
}
