//! The state machine, driven with actions only: no terminal, no IO.

use super::*;
use crate::domain::{Status, Usd};
use crate::engine::budget::BudgetState;
use crate::tui::testkit::{demo_state, fixed_now};

fn state() -> AppState {
    demo_state(fixed_now())
}

#[test]
fn moves_clamp_to_the_list() {
    let mut s = state();
    assert_eq!(s.selected, 0);
    s.handle(Action::MoveUp);
    assert_eq!(s.selected, 0);
    for _ in 0..20 {
        s.handle(Action::MoveDown);
    }
    assert_eq!(s.selected, 5);
    s.handle(Action::First);
    assert_eq!(s.selected, 0);
    s.handle(Action::Last);
    assert_eq!(s.selected_task().map(|t| t.id.as_str()), Some("E2E-6"));
}

#[test]
fn filter_narrows_and_escape_clears() {
    let mut s = state();
    s.handle(Action::Filter);
    assert!(s.filter.editing);
    for c in "fail".chars() {
        s.handle(Action::FilterChar(c));
    }
    s.handle(Action::FilterDone);
    assert!(!s.filter.editing);
    let ids: Vec<_> = s.visible_tasks().iter().map(|t| t.id.clone()).collect();
    assert_eq!(ids, ["DB-4"]);
    // Keys act normally again once the filter is kept.
    s.handle(Action::MoveDown);
    s.handle(Action::Back);
    assert!(s.filter.text.is_empty());
    assert_eq!(s.visible_tasks().len(), 6);
}

#[test]
fn tab_cycles_task_list_and_panes_and_zoom_follows() {
    let mut s = state();
    assert_eq!(s.focus, Focus::TaskList);
    s.handle(Action::FocusNext);
    assert_eq!(s.focus, Focus::Pane(2));
    s.handle(Action::FocusNext);
    assert_eq!(s.focus, Focus::Pane(3));
    s.handle(Action::FocusNext);
    assert_eq!(s.focus, Focus::TaskList);
    s.handle(Action::FocusPrev);
    assert_eq!(s.focus, Focus::Pane(3));
    s.handle(Action::Zoom);
    assert_eq!(s.zoom, Some(3));
    // Zoomed, Tab moves the zoom between panes (the list is hidden).
    s.handle(Action::FocusNext);
    assert_eq!(s.zoom, Some(2));
    s.handle(Action::FocusNext);
    assert_eq!(s.zoom, Some(3));
    s.handle(Action::Zoom);
    assert_eq!(s.zoom, None);
}

#[test]
fn enter_on_a_task_zooms_its_pane_or_opens_detail() {
    let mut s = state();
    s.handle(Action::MoveDown); // API-2 has a pane
    s.handle(Action::Zoom);
    assert_eq!(s.zoom, Some(2));
    s.handle(Action::Back);
    assert_eq!(s.zoom, None);
    s.focus = Focus::TaskList;
    s.handle(Action::First); // AUTH-1 is done: no pane
    s.handle(Action::Zoom);
    assert_eq!(s.view, View::TaskDetail);
}

#[test]
fn takeover_needs_a_pane_and_release_returns() {
    let mut s = state();
    s.handle(Action::Takeover);
    assert_eq!(s.takeover, None, "AUTH-1 has no pane");
    assert!(s.status.is_some());
    s.handle(Action::FocusNext);
    s.handle(Action::Takeover);
    assert_eq!(s.takeover, Some(2));
    s.handle(Action::Release);
    assert_eq!(s.takeover, None);
    s.handle(Action::Takeover);
    // The session ends: control comes back by itself.
    let panes: Vec<PaneMeta> = s.panes.iter().filter(|p| p.task_pk != 2).cloned().collect();
    s.set_panes(panes);
    assert_eq!(s.takeover, None);
    assert_eq!(s.focus, Focus::TaskList);
}

#[test]
fn quit_with_agents_running_asks_and_keep_waiting_keeps_them() {
    let mut s = state();
    assert!(s.handle(Action::Quit).is_empty());
    assert_eq!(
        s.popups,
        [Popup::Confirm(Confirm::Quit {
            running: 2,
            background: false
        })]
    );
    assert!(s.wants_answer());
    assert!(s.handle(Action::Answer('w')).is_empty());
    assert!(s.popups.is_empty());
    assert!(!s.stopping);
    s.handle(Action::Quit);
    assert_eq!(s.handle(Action::Answer('s')), [Effect::StopAgentsAndQuit]);
    assert!(s.stopping);
    assert!(
        s.handle(Action::Quit).is_empty(),
        "a second quit while stopping waits"
    );
}

#[test]
fn quit_when_nothing_runs_or_after_the_run_is_immediate() {
    let mut s = state();
    s.set_panes(Vec::new());
    s.tasks.iter_mut().for_each(|t| {
        if t.status.is_leased() {
            t.status = Status::Pending
        }
    });
    assert_eq!(s.handle(Action::Quit), [Effect::Quit]);
    let mut s = state();
    s.set_finished(all_done());
    assert_eq!(s.handle(Action::Quit), [Effect::Quit]);
}

/// A run that ended with its one task DONE.
fn all_done() -> RunSummary {
    RunSummary {
        end: crate::engine::RunEnd::AllDone,
        exit_code: 0,
        attempts: 1,
        done: 1,
        failed: 0,
        skipped: 0,
        total: 1,
        cost_usd: 0.0,
        elapsed_sec: 1.0,
        stuck: vec![],
        unlanded: vec![],
        unchanged: vec![],
    }
}

#[test]
fn the_wizard_says_its_agent_is_missing_before_anything_is_typed() {
    let mut s = state();
    s.no_oneshot_agent = Some("agent \"claude\" cannot answer the wizard: not found".into());
    for action in [Action::NewPrd, Action::Challenge] {
        assert!(s.handle(action).is_empty());
        assert_eq!(s.view, View::Main, "{action:?} did not open");
        assert!(s.wizard.is_none());
        let (text, level) = s.status.clone().expect("said at once");
        assert!(
            text.contains("cannot answer") && text.contains("[run] agent"),
            "{text}"
        );
        assert_eq!(level, Level::Warn);
    }
}

#[test]
fn the_clock_and_burn_rate_stop_when_the_run_finishes() {
    let mut s = state();
    s.now = s.started + Duration::from_secs(60);
    s.set_finished(all_done());
    let burn = s.budget().burn_per_hour;
    s.now += Duration::from_secs(3600);
    assert_eq!(s.elapsed(), Duration::from_secs(60), "the clock stopped");
    assert!(
        (s.budget().burn_per_hour - burn).abs() < 1e-9,
        "so did the burn rate"
    );
    // The serving engine got work again: the clock goes on.
    s.clear_finished();
    assert_eq!(s.elapsed(), Duration::from_secs(3660));
}

#[test]
fn reset_asks_first_and_refuses_running_tasks() {
    let mut s = state();
    s.handle(Action::MoveDown); // API-2 is running
    assert!(s.handle(Action::ResetTask).is_empty());
    assert!(s.popups.is_empty());
    assert!(matches!(s.status, Some((_, Level::Warn))));
    s.handle(Action::Last);
    s.handle(Action::MoveUp);
    s.handle(Action::MoveUp); // DB-4 failed
    s.handle(Action::ResetTask);
    assert_eq!(
        s.popups,
        [Popup::Confirm(Confirm::ResetTask("DB-4".into()))]
    );
    assert!(s.handle(Action::Answer('n')).is_empty());
    s.handle(Action::ResetTask);
    assert_eq!(
        s.handle(Action::Answer('y')),
        [Effect::ResetTask("DB-4".into())]
    );
}

#[test]
fn views_toggle_and_help_closes_on_any_key() {
    let mut s = state();
    s.handle(Action::Budget);
    assert_eq!(s.view, View::Budget);
    s.handle(Action::Budget);
    assert_eq!(s.view, View::Main);
    s.handle(Action::Events);
    assert_eq!(s.view, View::Events);
    s.handle(Action::Help);
    assert_eq!(s.popups, [Popup::Help]);
    s.handle(Action::MoveDown);
    assert!(s.popups.is_empty());
    assert_eq!(
        s.view,
        View::Events,
        "the key that closed help did nothing else"
    );
    s.handle(Action::Back);
    assert_eq!(s.view, View::Main);
    s.handle(Action::Triz);
    assert_eq!(s.view, View::Triz);
    assert!(s.triz.is_some());
}

#[test]
fn pause_toggles_from_the_plans_state() {
    let mut s = state();
    assert_eq!(s.handle(Action::TogglePause), [Effect::SetPaused(true)]);
    if let Some(p) = s.plan.as_mut() {
        p.paused = true;
    }
    assert_eq!(s.handle(Action::TogglePause), [Effect::SetPaused(false)]);
}

#[test]
fn n_opens_the_wizard_and_c_starts_a_challenge() {
    let mut s = state();
    assert!(s.handle(Action::NewPrd).is_empty());
    assert_eq!(s.view, View::Wizard);
    assert!(s.wizard.is_some());
    // Esc twice closes the wizard and returns to the main view.
    let esc = crossterm::event::KeyEvent::new(
        crossterm::event::KeyCode::Esc,
        crossterm::event::KeyModifiers::NONE,
    );
    s.wizard_key(esc);
    s.wizard_key(esc);
    assert!(s.wizard.is_none());
    assert_eq!(s.view, View::Main);

    assert_eq!(s.handle(Action::Challenge), [Effect::Challenge]);
    assert_eq!(s.view, View::Challenge);
    // While it runs, `c` only shows the view; it does not start another call.
    assert!(s.handle(Action::Challenge).is_empty());
    s.set_challenge(Ok("## Verdict\nrevise".into()));
    assert_eq!(s.challenge.as_ref().map(|c| c.running), Some(false));
    s.view = View::Challenge;
    assert_eq!(s.handle(Action::Challenge), [Effect::Challenge]);
}

#[test]
fn scroll_goes_to_the_focused_pane_in_main_view() {
    let mut s = state();
    s.handle(Action::FocusNext);
    assert_eq!(
        s.handle(Action::ScrollUp),
        [Effect::ScrollPane {
            task_pk: 2,
            delta: SCROLL_STEP
        }]
    );
}

#[test]
fn budget_figures_burn_rate_and_projection() {
    let b = budget_figures(
        Usd::from_f64(2.0),
        Some(Usd::from_f64(10.0)),
        Duration::from_secs(1800),
    );
    assert!((b.burn_per_hour - 4.0).abs() < 1e-9);
    assert_eq!(b.state, BudgetState::Ok);
    assert_eq!(b.to_exhaustion, Some(Duration::from_secs(7200)));
    let b = budget_figures(
        Usd::from_f64(8.0),
        Some(Usd::from_f64(10.0)),
        Duration::from_secs(60),
    );
    assert_eq!(b.state, BudgetState::Warning);
    let b = budget_figures(
        Usd::from_f64(10.0),
        Some(Usd::from_f64(10.0)),
        Duration::ZERO,
    );
    assert_eq!(b.state, BudgetState::Exhausted);
    assert_eq!(b.to_exhaustion, None);
    let b = budget_figures(Usd::ZERO, None, Duration::from_secs(60));
    assert_eq!(b.ratio, None);
}

#[test]
fn counts_group_statuses() {
    let c = state().counts();
    assert_eq!(
        (c.total, c.done, c.running, c.failed, c.pending),
        (6, 1, 2, 1, 2)
    );
}

mod inbox {
    use super::*;
    use crate::tui::model::{Decision, InboxKind};
    use crate::tui::testkit::inbox_state;

    fn inbox() -> AppState {
        let mut s = inbox_state(fixed_now());
        s.handle(Action::Inbox);
        s
    }

    #[test]
    fn lists_handoffs_another_process_runs_from_their_directories() {
        let mut s = inbox();
        // REVIEW-7's session belongs to another process (a background run): no pane here.
        let panes: Vec<_> = s.panes.iter().filter(|p| p.task_pk != 7).cloned().collect();
        s.set_panes(panes);
        let ids =
            |s: &AppState| -> Vec<String> { s.inbox().into_iter().map(|i| i.task_id).collect() };
        assert_eq!(ids(&s), ["DOCS-5"]);
        s.waiting_handoffs.insert("REVIEW-7".into());
        assert_eq!(ids(&s), ["DOCS-5", "REVIEW-7"]);
        // A waiting directory of a task that is no longer leased is stale: not listed.
        s.waiting_handoffs.insert("AUTH-1".into());
        assert_eq!(ids(&s), ["DOCS-5", "REVIEW-7"]);
    }

    #[test]
    fn lists_handoffs_and_parked_tasks_with_their_notes() {
        let s = inbox();
        assert_eq!(s.view, View::Inbox);
        let items = s.inbox();
        let summary: Vec<_> = items.iter().map(|i| (i.task_id.as_str(), i.kind)).collect();
        assert_eq!(
            summary,
            [
                ("DOCS-5", InboxKind::HumanLoop),
                ("REVIEW-7", InboxKind::Handoff)
            ]
        );
        assert!(items[0].note.contains("mdbook"), "{:?}", items[0].note);
        assert!(
            items[0].note.starts_with("human_loop: "),
            "{:?}",
            items[0].note
        );
    }

    #[test]
    fn approving_a_handoff_that_changed_nothing_asks_first() {
        let mut s = inbox();
        s.handle(Action::MoveDown);
        s.inbox_ui.open = Some(7);
        s.set_inbox_detail(crate::tui::model::InboxDetail {
            task_pk: 7,
            brief: "Review".into(),
            said: None,
            bounced: None,
            handoff_dir: None,
            diff: Some(crate::workspace::WorktreeDiff {
                files: 0,
                insertions: 0,
                deletions: 0,
                patch: String::new(),
                truncated: false,
            }),
            worktree: None,
            diff_note: None,
        });
        assert!(s.handle(Action::Approve).is_empty(), "not at once");
        assert!(
            matches!(s.popups.last(), Some(Popup::Confirm(Confirm::ApproveUnchanged(t))) if t.task_id == "REVIEW-7")
        );
        assert!(s.handle(Action::Answer('n')).is_empty());
        assert!(s.popups.is_empty());
        s.handle(Action::Approve);
        let fx = s.handle(Action::Answer('y'));
        assert!(
            matches!(fx.as_slice(), [Effect::Decide(t, Decision::Approve)] if t[0].task_id == "REVIEW-7"),
            "{fx:?}"
        );
    }

    #[test]
    fn single_approve_decides_at_once() {
        let mut s = inbox();
        s.handle(Action::MoveDown);
        let fx = s.handle(Action::Approve);
        match fx.as_slice() {
            [Effect::Decide(t, Decision::Approve)] => {
                assert_eq!(t.len(), 1);
                assert_eq!(t[0].task_id, "REVIEW-7");
                assert_eq!(t[0].kind, InboxKind::Handoff);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn marked_items_are_approved_together_after_confirmation() {
        let mut s = inbox();
        s.handle(Action::Mark);
        s.handle(Action::Mark);
        assert_eq!(s.inbox_ui.marked.len(), 2);
        assert!(s.handle(Action::Approve).is_empty());
        assert!(s.wants_answer());
        // "n" keeps everything as it was.
        s.handle(Action::Answer('n'));
        assert_eq!(s.inbox_ui.marked.len(), 2);
        s.handle(Action::Approve);
        let fx = s.handle(Action::Answer('y'));
        match fx.as_slice() {
            [Effect::Decide(t, Decision::Approve)] => assert_eq!(t.len(), 2),
            other => panic!("{other:?}"),
        }
        assert!(s.inbox_ui.marked.is_empty());
    }

    #[test]
    fn approve_all_asks_first() {
        let mut s = inbox();
        assert!(s.handle(Action::ApproveAll).is_empty());
        let fx = s.handle(Action::Answer('y'));
        assert!(matches!(fx.as_slice(), [Effect::Decide(t, Decision::Approve)] if t.len() == 2));
    }

    #[test]
    fn reject_needs_a_reason_and_escape_cancels() {
        let mut s = inbox();
        s.handle(Action::Reject);
        assert!(s.wants_text());
        assert!(s.handle(Action::TextSubmit).is_empty());
        assert!(
            s.wants_text(),
            "an empty reason is refused, the popup stays"
        );
        for c in "wrong tool".chars() {
            s.handle(Action::TextChar(c));
        }
        s.handle(Action::TextBackspace);
        let fx = s.handle(Action::TextSubmit);
        match fx.as_slice() {
            [Effect::Decide(t, Decision::Reject(r))] => {
                assert_eq!(t[0].task_id, "DOCS-5");
                assert_eq!(r, "wrong too");
            }
            other => panic!("{other:?}"),
        }
        s.handle(Action::SendBack);
        s.handle(Action::TextChar('x'));
        assert!(s.handle(Action::Back).is_empty());
        assert!(s.popups.is_empty());
    }

    #[test]
    fn send_back_carries_the_comment() {
        let mut s = inbox();
        s.handle(Action::SendBack);
        for c in "use mdbook".chars() {
            s.handle(Action::TextChar(c));
        }
        let fx = s.handle(Action::TextSubmit);
        assert!(matches!(
            fx.as_slice(),
            [Effect::Decide(_, Decision::SendBack(c))] if c == "use mdbook"
        ));
    }

    #[test]
    fn enter_opens_the_item_and_escape_closes_it() {
        let mut s = inbox();
        let fx = s.handle(Action::Zoom);
        assert!(matches!(fx.as_slice(), [Effect::LoadInboxDetail(t)] if t.task_id == "DOCS-5"));
        assert_eq!(s.inbox_ui.open, Some(5));
        s.handle(Action::Back);
        assert_eq!(s.inbox_ui.open, None);
        assert_eq!(s.view, View::Inbox);
        s.handle(Action::Back);
        assert_eq!(s.view, View::Main);
    }

    #[test]
    fn decisions_work_on_the_selected_task_outside_the_inbox() {
        let mut s = inbox_state(fixed_now());
        // DB-4 failed: not waiting for a human.
        for _ in 0..3 {
            s.handle(Action::MoveDown);
        }
        assert!(s.handle(Action::Approve).is_empty());
        assert!(s.status.as_ref().is_some_and(|(t, _)| t.contains("inbox")));
        s.handle(Action::MoveDown); // DOCS-5, parked
        assert!(matches!(
            s.handle(Action::Approve).as_slice(),
            [Effect::Decide(t, Decision::Approve)] if t[0].task_id == "DOCS-5"
        ));
    }

    #[test]
    fn items_that_left_the_inbox_drop_their_marks() {
        let mut s = inbox();
        s.handle(Action::Mark);
        assert!(s.inbox_ui.marked.contains(&5));
        let mut tasks = s.tasks.clone();
        tasks[4].status = Status::Done;
        let plan = s.plan.clone().unwrap();
        s.set_data(plan, tasks, Vec::new());
        assert!(s.inbox_ui.marked.is_empty());
        assert_eq!(s.inbox().len(), 1);
    }
}

#[test]
fn quit_can_let_running_agents_finish_first() {
    let mut s = state();
    s.handle(Action::Quit);
    assert!(s.wants_answer());
    assert_eq!(s.handle(Action::Answer('f')), [Effect::FinishAndQuit]);
    assert!(s.draining);
    assert!(!s.stopping);
    assert!(s.popups.is_empty());
    // Finishing can take long: q again still offers to stop them now.
    s.handle(Action::Quit);
    assert!(s.wants_answer());
    assert_eq!(s.handle(Action::Answer('s')), [Effect::StopAgentsAndQuit]);
    assert!(s.stopping);
}

#[test]
fn quit_does_not_wait_for_another_workers_agents() {
    let held_by = |worker: &str| {
        let mut s = state();
        let mut tasks = s.tasks.clone();
        for t in tasks.iter_mut().filter(|t| t.status.is_leased()) {
            t.worker_id = Some(worker.into());
        }
        let plan = s.plan.clone().expect("plan");
        s.set_data(plan, tasks, Vec::new());
        s.own_worker = Some("here/1/a".into());
        s.set_panes(Vec::new());
        s
    };
    // Every running task is held by another process; none has a pane here.
    let mut s = held_by("there/2/b");
    assert!(s.running_elsewhere(s.tasks[1].pk));
    assert_eq!(s.handle(Action::Quit), [Effect::Quit]);
    // The same tasks held by this console's own engine (no pane yet) are waited for.
    let mut s = held_by("here/1/a");
    assert!(!s.running_elsewhere(s.tasks[1].pk));
    assert!(s.handle(Action::Quit).is_empty());
    assert!(s.wants_answer());
}

#[test]
fn background_is_offered_only_with_a_launcher() {
    let mut s = state();
    s.handle(Action::Quit);
    assert_eq!(
        s.popups,
        [Popup::Confirm(Confirm::Quit {
            running: 2,
            background: false
        })]
    );
    assert!(
        s.handle(Action::Answer('b')).is_empty(),
        "no launcher: b does nothing"
    );
    assert_eq!(s.popups.len(), 1);
    s.handle(Action::Back);
    s.can_background = true;
    s.handle(Action::Quit);
    assert_eq!(
        s.popups,
        [Popup::Confirm(Confirm::Quit {
            running: 2,
            background: true
        })]
    );
    assert_eq!(
        s.handle(Action::Answer('b')),
        [Effect::Background { whole_plan: false }]
    );
    assert!(s.popups.is_empty());
    assert!(s.draining);
    // d: the whole plan goes on in the background.
    let mut s = state();
    s.can_background = true;
    s.handle(Action::Quit);
    assert_eq!(
        s.handle(Action::Answer('d')),
        [Effect::Background { whole_plan: true }]
    );
    assert!(!s.draining);
}

#[test]
fn o_replays_a_finished_task_and_zooms_a_running_one() {
    let mut s = state();
    // AUTH-1 is done: its log is looked up.
    assert_eq!(
        s.handle(Action::Replay),
        [Effect::LoadReplay {
            task_pk: 1,
            task_id: "AUTH-1".into()
        }]
    );
    assert_eq!(s.view, View::Replay);
    assert_eq!(
        s.handle(Action::ScrollUp),
        [Effect::ScrollReplay(SCROLL_STEP)]
    );
    s.set_replay(1, Err("AUTH-1 has no attempt log yet".into()));
    assert!(s.replay.as_ref().is_some_and(|r| r.error.is_some()));
    s.handle(Action::Back);
    assert_eq!(s.view, View::Main);
    // API-2 runs: `o` zooms its live pane instead.
    s.handle(Action::MoveDown);
    assert!(s.handle(Action::Replay).is_empty());
    assert_eq!(s.zoom, Some(2));
    assert_eq!(s.view, View::Main);
}

#[test]
fn skip_and_kill_ask_first() {
    let mut s = state();
    // AUTH-1 is DONE: nothing to skip.
    assert!(s.handle(Action::SkipTask).is_empty());
    assert!(s.popups.is_empty());
    s.handle(Action::Last); // E2E-6, pending
    assert!(s.handle(Action::SkipTask).is_empty());
    assert!(s.wants_answer());
    assert_eq!(
        s.handle(Action::Answer('y')),
        [Effect::SkipTask("E2E-6".into())]
    );

    // Kill needs a running agent: the focused pane's.
    s.handle(Action::First);
    assert!(s.handle(Action::KillAttempt).is_empty());
    assert!(s.popups.is_empty(), "AUTH-1 has no agent");
    s.handle(Action::FocusNext);
    s.handle(Action::KillAttempt);
    assert!(s.wants_answer());
    assert!(s.handle(Action::Answer('n')).is_empty());
    s.handle(Action::KillAttempt);
    assert_eq!(s.handle(Action::Answer('y')), [Effect::KillAttempt(2)]);
}

/// Replies go through `update` like keys: the queue's first load is history, later news
/// notifies, and notes land in the status bar.
#[test]
fn replies_are_messages_the_state_answers() {
    use crate::tui::msg::Msg;
    use crate::tui::msg::{FeedData, TaskLoad};
    use crate::tui::testkit::event;
    let mut s = state();
    let plan = s.plan.clone().expect("demo plan");
    let tasks = s.tasks.clone();
    let human = event(
        900,
        "task.human_loop",
        "DB-4",
        None,
        Some(Status::HumanLoop),
    );
    let feed = |events| {
        Msg::Data(Box::new(FeedData {
            plan: plan.clone(),
            tasks: TaskLoad::All(tasks.clone()),
            events,
            workers: None,
            handoffs: None,
        }))
    };
    // The first load is history: nobody is told about what happened before the console opened.
    let fx = s.update(feed(vec![human.clone()]));
    assert!(fx.is_empty(), "{fx:?}");
    let fx = s.update(feed(vec![human]));
    assert!(
        matches!(fx.as_slice(), [Effect::Notify(n)] if n.body.contains("DB-4")),
        "{fx:?}"
    );
    s.update(Msg::Note("DB-4 is PENDING again".into(), Level::Info));
    assert_eq!(
        s.status.as_ref().map(|(t, _)| t.as_str()),
        Some("DB-4 is PENDING again")
    );
    s.update(Msg::FeedFailed("connection refused".into()));
    assert!(matches!(&s.status, Some((t, Level::Warn)) if t.contains("connection refused")));
}

#[test]
fn d_opens_the_selected_tasks_diff_and_takes_only_its_answer() {
    use crate::tui::msg::Msg;
    use crate::workspace::{DiffSource, WorktreeDiff};
    let mut s = state();
    s.handle(Action::MoveDown);
    let id = s.selected_task().map(|t| t.id.clone()).expect("selected");
    let pk = s.selected_task().map(|t| t.pk).expect("selected");
    let fx = s.handle(Action::Diff);
    assert_eq!(s.view, View::Diff);
    assert_eq!(
        fx,
        vec![Effect::LoadDiff {
            task_pk: pk,
            task_id: id
        }]
    );
    // A late answer for another task is dropped; this task's fills the view.
    s.update(Msg::Diff(pk + 100, Err("other".into())));
    assert!(s.diff.as_ref().is_some_and(|d| d.loaded.is_none()));
    let diff = WorktreeDiff {
        files: 1,
        insertions: 2,
        deletions: 0,
        patch: "+a\n+b\n".into(),
        truncated: false,
    };
    s.update(Msg::Diff(pk, Ok((DiffSource::Branch("b".into()), diff))));
    assert!(
        matches!(&s.diff.as_ref().and_then(|d| d.loaded.clone()), Some(Ok((DiffSource::Branch(_), d))) if d.insertions == 2)
    );
    // D again (or esc) goes back.
    s.handle(Action::Diff);
    assert_eq!(s.view, View::Main);
}

#[test]
fn n_adds_one_gate_checked_task_a_field_at_a_time() {
    let mut s = state();
    let type_line = |s: &mut AppState, line: &str| {
        for c in line.chars() {
            s.handle(Action::TextChar(c));
        }
        s.handle(Action::TextSubmit)
    };
    s.handle(Action::AddTask);
    // Too vague: the gate says why and asks again.
    assert!(type_line(&mut s, "fix it").is_empty());
    assert!(
        matches!(&s.status, Some((t, Level::Warn)) if t.contains("description")),
        "{:?}",
        s.status
    );
    assert!(matches!(
        s.popups.last(),
        Some(Popup::Input {
            purpose: InputPurpose::AddTask(AddStep::Description, _),
            ..
        })
    ));
    assert!(type_line(&mut s, "Add a --version flag to the CLI in src/cli/args.rs").is_empty());
    assert!(type_line(&mut s, "prints the version; exits 0").is_empty());
    let fx = type_line(&mut s, "cargo test; ./target/debug/whilly --version");
    let [Effect::AddTask(spec)] = fx.as_slice() else {
        panic!("{fx:?}");
    };
    assert_eq!(spec.acceptance_criteria, ["prints the version", "exits 0"]);
    assert_eq!(
        spec.test_steps,
        ["cargo test", "./target/debug/whilly --version"]
    );
    assert!(s.popups.is_empty());
}

/// The board's and Jira's news: each task's column and issue status, the pull request, and a
/// warning while the last word of a sync is a failure.
#[test]
fn sync_events_show_cards_issues_pulls_and_trouble() {
    use crate::store::event_types as et;
    use crate::tui::msg::Msg;
    use crate::tui::msg::{FeedData, TaskLoad};
    use crate::tui::testkit::event;
    let mut s = state();
    let plan = s.plan.clone().expect("demo plan");
    let tasks = s.tasks.clone();
    let feed = |events| {
        Msg::Data(Box::new(FeedData {
            plan: plan.clone(),
            tasks: TaskLoad::All(tasks.clone()),
            events,
            workers: None,
            handoffs: None,
        }))
    };
    let with = |mut e: crate::store::Event, payload: serde_json::Value| {
        e.payload = payload;
        e
    };
    s.update(feed(vec![
        with(
            event(901, et::GITHUB_PR_OPENED, "DB-4", None, None),
            serde_json::json!({"number": 12, "url": "https://github.com/o/r/pull/12", "draft": true, "repo": "o/r"}),
        ),
        with(
            event(902, et::BOARD_CARD_MOVED, "DB-4", None, None),
            serde_json::json!({"to": "In Review"}),
        ),
        with(
            event(903, et::JIRA_TRANSITIONED, "DB-4", None, None),
            serde_json::json!({"to": "In Review"}),
        ),
        with(
            event(904, et::BOARD_SYNC_FAILED, "DB-4", None, None),
            serde_json::json!({"error": "502 Bad Gateway"}),
        ),
    ]));
    assert_eq!(s.pulls["DB-4"].number, 12);
    assert_eq!(s.board_column["DB-4"], "In Review");
    assert_eq!(s.jira_status["DB-4"], "In Review");
    assert!(
        s.sync_trouble
            .as_deref()
            .is_some_and(|t| t.contains("502 Bad Gateway")),
        "{:?}",
        s.sync_trouble
    );
    s.update(feed(vec![with(
        event(905, et::BOARD_CARD_MOVED, "DB-4", None, None),
        serde_json::json!({"to": "Done"}),
    )]));
    assert_eq!(s.sync_trouble, None, "a later move clears the warning");
    assert_eq!(s.board_column["DB-4"], "Done");
}
