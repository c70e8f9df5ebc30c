//! The wizard driven by keys and replies: no agent, no files.

use super::*;
use crate::domain::Priority;
use crate::prd::wizard::Applied;
use crate::prd::{DEFAULT_MAX_QUESTIONS, QaPair};

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

/// A wizard showing the PRD `text` (the interview skipped with Ctrl-N).
fn at_prd(text: &str) -> Wizard {
    let now = Instant::now();
    let mut w = Wizard::new();
    type_text(&mut w, "idea");
    w.handle_key(ctrl('s'), now);
    w.apply(WizardReply::Question("q1".into()), now);
    w.handle_key(ctrl('n'), now);
    w.apply(
        WizardReply::Prd {
            path: "docs/PRD-x.md".into(),
            text: text.into(),
        },
        now,
    );
    assert!(matches!(w.stage(), Stage::EditPrd { .. }));
    w
}

/// A wizard reviewing `plan`.
fn at_review(plan: PlanSpec) -> Wizard {
    let now = Instant::now();
    let mut w = at_prd("# X");
    assert_eq!(w.handle_key(ctrl('s'), now).len(), 1);
    w.apply(WizardReply::Plan(plan), now);
    assert_eq!(w.stage(), Stage::Review { selected: 0 });
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
            answers: vec![],
            max_questions: DEFAULT_MAX_QUESTIONS,
        }]
    );
    assert!(w.busy());
    // Keys while the agent thinks do nothing (but Esc still may close).
    assert!(w.handle_key(key(KeyCode::Char('x')), now).is_empty());

    // A reply nobody asked for (a PRD while a question is awaited) is dropped.
    assert!(
        w.apply(
            WizardReply::Prd {
                path: "docs/PRD-stale.md".into(),
                text: "# Stale".into()
            },
            now
        )
        .is_empty()
    );
    assert_eq!(w.stage(), Stage::Asking);
    w.apply(WizardReply::Question("Who uses it?".into()), now);
    assert_eq!(
        w.stage(),
        Stage::Answer {
            question: "Who uses it?".into()
        }
    );
    type_text(&mut w, "logged-in users");
    let fx = w.handle_key(ctrl('s'), now);
    assert!(matches!(&fx[..], [WizardEffect::Ask { answers, .. }] if answers.len() == 1));
    let fx = w.apply(WizardReply::InterviewDone, now);
    assert!(
        matches!(&fx[..], [WizardEffect::WritePrd { answers, .. }] if answers[0].answer == "logged-in users")
    );
    assert_eq!(w.stage(), Stage::Writing);

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
        [
            WizardEffect::MakePlan {
                prd,
                edited: Some(text),
                ..
            },
        ] => {
            assert_eq!(prd, &PathBuf::from("docs/PRD-profile.md"));
            assert!(text.starts_with("!# Profile"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    w.apply(WizardReply::Plan(plan_of(vec![good_task("P-1")])), now);
    assert_eq!(w.stage(), Stage::Review { selected: 0 });
    assert!(w.plan_ready(), "{:?}", w.problems());
    let fx = w.handle_key(key(KeyCode::Char('m')), now);
    assert!(matches!(&fx[..], [WizardEffect::Merge(p)] if p.tasks.len() == 1));
    w.apply(WizardReply::Applied(merged()), now);
    assert_eq!(
        w.stage(),
        Stage::Finished {
            message: merged().to_string()
        }
    );
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

    // What is typed when Ctrl-N is pressed is the last answer, not lost.
    let mut w = Wizard::new();
    type_text(&mut w, "idea");
    w.handle_key(ctrl('s'), now);
    w.apply(WizardReply::Question("q1".into()), now);
    type_text(&mut w, "only this");
    let fx = w.handle_key(ctrl('n'), now);
    let last = QaPair {
        question: "q1".into(),
        answer: "only this".into(),
    };
    assert!(matches!(&fx[..], [WizardEffect::WritePrd { answers, .. }] if answers == &[last]));

    // The same cap as `whilly prd new`; an empty answer lets the agent decide.
    let mut w = Wizard::new();
    type_text(&mut w, "idea");
    w.handle_key(ctrl('s'), now);
    let mut last = Vec::new();
    for i in 0..DEFAULT_MAX_QUESTIONS {
        w.apply(WizardReply::Question(format!("q{i}")), now);
        if i > 0 {
            type_text(&mut w, "a");
        }
        last = w.handle_key(ctrl('s'), now);
    }
    assert!(
        matches!(&last[..], [WizardEffect::WritePrd { answers, .. }] if answers.len() == DEFAULT_MAX_QUESTIONS && answers[0].answer.is_empty())
    );
}

#[test]
fn vague_tasks_block_merging_until_edited_or_deleted() {
    let now = Instant::now();
    let mut vague = good_task("P-2");
    vague.description = "fix".into();
    vague.acceptance_criteria.clear();
    let mut w = at_review(plan_of(vec![good_task("P-1"), vague]));
    assert!(!w.plan_ready());
    assert!(!w.problems_of("P-2").is_empty(), "{:?}", w.problems());
    assert!(w.problems_of("P-1").is_empty(), "{:?}", w.problems());
    assert!(w.handle_key(key(KeyCode::Char('s')), now).is_empty());
    assert!(w.error.as_deref().is_some_and(|e| e.contains("errors")));

    // Edit P-2 as JSON: a syntax error is reported and the editor stays.
    w.handle_key(key(KeyCode::Down), now);
    w.handle_key(key(KeyCode::Char('e')), now);
    assert_eq!(w.stage(), Stage::EditTask { index: 1 });
    let good = serde_json::to_string_pretty(&good_task("P-2")).unwrap();
    w.editor = super::editor(vec!["{ broken".into()]);
    w.handle_key(ctrl('s'), now);
    assert!(
        w.error.as_deref().is_some_and(|e| e.contains("line 1")),
        "{:?}",
        w.error
    );
    assert_eq!(w.stage(), Stage::EditTask { index: 1 });
    w.editor = super::editor(good.lines().map(str::to_string).collect());
    w.handle_key(ctrl('s'), now);
    assert_eq!(w.stage(), Stage::Review { selected: 1 });
    assert!(w.plan_ready(), "{:?}", w.problems());

    // Deleting a task others depend on is an error until fixed.
    let mut dependent = good_task("P-3");
    dependent.dependencies = vec!["P-1".into()];
    let mut w = at_review(plan_of(vec![good_task("P-1"), dependent]));
    assert!(w.plan_ready());
    w.handle_key(key(KeyCode::Char('d')), now);
    assert_eq!(w.plan().map(|p| p.tasks.len()), Some(1));
    assert!(!w.plan_ready(), "P-3 depends on a deleted task");
}

#[test]
fn failures_wait_for_retry_or_edit_and_escape_twice_closes() {
    let now = Instant::now();
    let mut w = at_prd("# X");
    let fx = w.handle_key(ctrl('s'), now);
    assert_eq!(fx.len(), 1);
    w.apply(
        WizardReply::Failed {
            message: "no valid JSON".into(),
            raw: Some(".whilly/prd/raw.txt".into()),
        },
        now,
    );
    assert_eq!(w.stage(), Stage::Failed);
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
        w.stage(),
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
    let mut w = at_review(plan_of(vec![good_task("P-1")]));
    w.handle_key(key(KeyCode::Enter), now);
    assert_eq!(w.stage(), Stage::EditTask { index: 0 });
    type_text(&mut w, "garbage");
    w.handle_key(key(KeyCode::Esc), now);
    assert_eq!(w.stage(), Stage::Review { selected: 0 });
    assert!(!w.closing);
    assert!(w.plan_ready());
}
