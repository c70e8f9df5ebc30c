//! The console's screens, rendered with ratatui's TestBackend from hand-built states: main view,
//! zoomed pane, help, task detail, budget panel and events at 80×24 and 200×60; tiny sizes down
//! to 1×1 without panics; colour thresholds and NO_COLOR; a real PTY session rendered in a pane.

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::Color;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use whilly::domain::{Status, Usd};
use whilly::engine::sessions::SessionState;
use whilly::engine::{RunEnd, RunSummary};
use whilly::pty::{Emulator, PtySession, SpawnSpec};
use whilly::tui::action::Action;
use whilly::tui::keymap::Keymap;
use whilly::tui::model::{Focus, View};
use whilly::tui::screens::PaneScreens;
use whilly::tui::state::AppState;
use whilly::tui::testkit::{demo_screens, demo_state, emulator, fixed_now, inbox_state, pane};
use whilly::tui::theme::Theme;
use whilly::tui::ui::{self, FrameInfo, UiContext};

fn render_with(
    state: &AppState,
    w: u16,
    h: u16,
    screens: &dyn PaneScreens,
    theme: Theme,
) -> (String, FrameInfo, Buffer) {
    let keymap = Keymap::default();
    let ctx = UiContext {
        keymap: &keymap,
        theme: &theme,
        screens,
    };
    let mut term = Terminal::new(TestBackend::new(w, h)).expect("test terminal");
    let mut info = FrameInfo::default();
    term.draw(|f| info = ui::draw(f, state, &ctx))
        .expect("draw");
    let buf = term.backend().buffer().clone();
    (text(&buf), info, buf)
}

fn render(state: &AppState, w: u16, h: u16) -> String {
    render_with(state, w, h, &demo_screens(), Theme::default()).0
}

fn text(buf: &Buffer) -> String {
    let area = buf.area;
    let mut out = String::new();
    for y in 0..area.height {
        let mut line = String::new();
        for x in 0..area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn state_with(actions: &[Action]) -> AppState {
    let mut s = demo_state(fixed_now());
    for a in actions {
        s.handle(*a);
    }
    s
}

const SIZES: [(u16, u16); 2] = [(80, 24), (200, 60)];

fn snap_views(name: &str, actions: &[Action]) -> Vec<String> {
    let s = state_with(actions);
    SIZES
        .iter()
        .map(|&(w, h)| {
            let out = render(&s, w, h);
            insta::assert_snapshot!(format!("{name}_{w}x{h}"), out);
            out
        })
        .collect()
}

#[test]
fn main_view() {
    let outs = snap_views("main", &[]);
    assert!(
        outs[1].contains("API-2 · command · #1 · 00:42 · $0.75 · [running]"),
        "{}",
        outs[1]
    );
    assert!(
        outs[0].contains("API-2 · [running]"),
        "narrow panes keep the badge: {}",
        outs[0]
    );
    for out in &outs {
        assert!(out.contains("working 2"), "{out}");
        assert!(out.contains("test result: ok"), "{out}");
        assert!(out.contains("[running]"), "{out}");
        assert!(
            out.contains("[verifying]"),
            "badge from SessionState: {out}"
        );
        assert!(out.contains("done 1"), "{out}");
        assert!(out.contains("wait 2"), "deps blocked: {out}");
    }
}

#[test]
fn zoomed_pane() {
    let outs = snap_views("zoomed", &[Action::FocusNext, Action::Zoom]);
    for out in &outs {
        assert!(out.contains("working 2"));
        assert!(!out.contains("UI-3 ·"), "only the zoomed pane shows: {out}");
        assert!(!out.contains("Tasks"), "{out}");
    }
}

#[test]
fn help_popup_lists_the_views_keys() {
    let outs = snap_views("help", &[Action::Help]);
    let big = &outs[1];
    for needle in ["Help: main view", "ctrl-]", "takeover", "zoom", "shift-tab"] {
        assert!(big.contains(needle), "{needle}: {big}");
    }
    // In another view the help lists that view's keys only.
    let s = state_with(&[Action::Events, Action::Help]);
    let out = render(&s, 200, 60);
    assert!(out.contains("Help: events view"), "{out}");
    assert!(!out.contains("type in / give back"), "{out}");
}

#[test]
fn the_help_fits_80x24_in_every_view_in_sections_and_cuts_nothing() {
    for action in [
        Action::Help,
        Action::Tasks,
        Action::TaskDetail,
        Action::Events,
        Action::Budget,
        Action::Stats,
        Action::Inbox,
        Action::Workers,
    ] {
        let mut s = state_with(&[action]);
        if action != Action::Help {
            s.handle(Action::Help);
        }
        let out = render(&s, 80, 24);
        let view = s.view;
        for (title, actions) in whilly::tui::views::help_sections(view) {
            assert!(
                out.contains(&title),
                "{view:?}: section {title:?} missing\n{out}"
            );
            for a in actions {
                // Paired entries share a line: the first word of each description is there.
                let first = a.describe().split(' ').next().unwrap_or_default();
                assert!(out.contains(first), "{view:?}: {a:?} missing\n{out}");
            }
        }
        let popup: String = out.lines().skip(1).take(22).collect::<Vec<_>>().join("\n");
        assert!(!popup.contains('…'), "{view:?}: an entry is cut\n{out}");
    }
}

#[test]
fn task_detail() {
    // DB-4: failed with a reason, and its events.
    let outs = snap_views(
        "detail",
        &[
            Action::MoveDown,
            Action::MoveDown,
            Action::MoveDown,
            Action::TaskDetail,
        ],
    );
    for out in &outs {
        for needle in [
            "DB-4",
            "FAILED",
            "verification_failed",
            "Acceptance criteria",
            "cargo test",
            "src/db-4.rs",
            "#1 failed (verification_failed) · command · exit 0 · $0.40",
        ] {
            assert!(out.contains(needle), "{needle}: {out}");
        }
    }
    // The checks and events follow; at 80×24 they are a scroll away.
    for needle in ["✗ tests (exit 101)", "error: 1 test failed", "task.failed"] {
        assert!(outs[1].contains(needle), "{needle}: {}", outs[1]);
    }
}

#[test]
fn paused_agents_show_in_the_header_and_the_budget_panel() {
    use whilly::domain::rate_limit::PauseNote;
    let mut s = state_with(&[]);
    let note = |agent: &str, secs: i64| PauseNote {
        agent: agent.into(),
        until: s.wall + chrono::Duration::seconds(secs),
        reason: "usage limit".into(),
    };
    let (live, over) = (note("claude", 600), note("codex", -5));
    s.paused_agents.insert("claude".into(), live.clone());
    s.paused_agents.insert("codex".into(), over);
    let label = live.label(&chrono::Local);
    let main = render(&s, 200, 60);
    assert!(main.contains(&label), "{main}");
    assert!(
        !main.contains("codex paused"),
        "an ended pause is not shown: {main}"
    );
    s.handle(Action::Budget);
    let budget = render(&s, 200, 60);
    assert!(budget.contains(&label), "{budget}");
    assert!(budget.contains("spent $3.20 of $4.00"), "{budget}");
}

#[test]
fn budget_panel() {
    let outs = snap_views("budget", &[Action::Budget]);
    for out in &outs {
        assert!(out.contains("spent $3.20 of $4.00"), "{out}");
        assert!(out.contains("WARNING"), "{out}");
        assert!(out.contains("burn rate $177.23/h"), "{out}");
        assert!(out.contains("budget lasts ~16s"), "{out}");
        assert!(out.contains("tokens in 12.4k / out 1.9k"), "{out}");
    }
    // Per task at 200 columns: tokens in/out and the time its attempts ran.
    assert!(outs[1].contains("12.4k/1.9k    7s"), "{}", outs[1]);
}

#[test]
fn events_view_follows_the_newest() {
    let outs = snap_views("events", &[Action::Events]);
    for out in &outs {
        assert!(out.contains("Events (following)"));
        assert!(out.contains("task.failed"));
        assert!(out.contains("IN_PROGRESS→FAILED"));
    }
    let s = state_with(&[Action::Events, Action::MoveUp, Action::MoveUp]);
    assert!(render(&s, 80, 24).contains("2 back"));
}

#[test]
fn takeover_marks_the_pane_and_footer() {
    let s = state_with(&[Action::FocusNext, Action::Takeover]);
    assert_eq!(s.takeover, Some(2));
    let mut state = s;
    state.status = None;
    insta::assert_snapshot!("takeover_200x60", render(&state, 200, 60));
    let out = render(&state, 80, 24);
    insta::assert_snapshot!("takeover_80x24", out);
    assert!(out.contains("TAKEOVER"));
    assert!(out.contains("ctrl-] gives control back"), "{out}");
    assert!(
        out.contains('╔'),
        "double border on the taken-over pane: {out}"
    );
}

#[test]
fn finished_run_shows_the_summary() {
    let mut s = demo_state(fixed_now());
    s.set_panes(Vec::new());
    s.set_finished(RunSummary {
        end: RunEnd::SomeFailed,
        exit_code: 1,
        attempts: 7,
        done: 4,
        failed: 1,
        skipped: 1,
        total: 6,
        cost_usd: 3.2,
        elapsed_sec: 65.0,
        stuck: vec![],
        unlanded: vec![],
        unchanged: vec![],
    });
    insta::assert_snapshot!("finished_200x60", render(&s, 200, 60));
    let out = render(&s, 80, 24);
    insta::assert_snapshot!("finished_80x24", out);
    // The phrase, not the variant's name (it wraps in the pane, and is whole in the header).
    assert!(out.contains("Run finished: some tasks failed"), "{out}");
    assert!(
        out.contains("finished: some tasks failed or wait for a human · exit 1"),
        "{out}"
    );
    assert!(out.contains("press q to quit"));
}

#[test]
fn a_watching_console_says_it_claims_nothing_and_the_summary_says_why_tasks_are_stuck() {
    let mut s = demo_state(fixed_now());
    s.set_panes(Vec::new());
    s.observer = Some(whilly::engine::Observer::Watching);
    for (w, h) in SIZES {
        let out = render(&s, w, h);
        insta::assert_snapshot!(format!("watching_{w}x{h}"), out);
        assert!(
            out.contains("Watching: this console claims no task"),
            "{out}"
        );
    }
    s.set_finished(RunSummary {
        end: RunEnd::SomeFailed,
        exit_code: 1,
        attempts: 3,
        done: 4,
        failed: 1,
        skipped: 0,
        total: 6,
        cost_usd: 1.5,
        elapsed_sec: 65.0,
        stuck: vec![whilly::engine::Stuck {
            task_id: "DB-5".into(),
            status: Status::Pending,
            why: "blocked: DB-4 FAILED".into(),
        }],
        unlanded: vec![],
        unchanged: vec![],
    });
    let out = render(&s, 200, 60);
    insta::assert_snapshot!("finished_stuck_200x60", out);
    assert!(out.contains("stuck: DB-5 (blocked: DB-4 FAILED)"), "{out}");
}

#[test]
fn grids_for_three_and_eight_panes() {
    let now = fixed_now();
    let mut s = demo_state(now);
    let mut screens: BTreeMap<i64, Emulator> = BTreeMap::new();
    let mut panes = Vec::new();
    for i in 0..8i64 {
        let id = format!("T-{i}");
        panes.push(pane(
            100 + i,
            &id,
            SessionState::Running,
            now,
            Duration::from_secs(3),
        ));
        screens.insert(
            100 + i,
            emulator(10, 40, format!("pane {i} output").as_bytes()),
        );
    }
    s.set_panes(panes.clone());
    let (out, info, _) = render_with(&s, 200, 60, &screens, Theme::default());
    insta::assert_snapshot!("eight_panes_200x60", out);
    assert_eq!(info.panes.len(), 8);
    let (small, small_info, _) = render_with(&s, 80, 24, &screens, Theme::default());
    insta::assert_snapshot!("eight_panes_80x24", small);
    assert_eq!(small_info.panes.len(), 8);
    for i in 0..8 {
        assert!(out.contains(&format!("pane {i} output")), "{out}");
    }
    s.set_panes(panes[..3].to_vec());
    let (big, _, _) = render_with(&s, 200, 60, &screens, Theme::default());
    insta::assert_snapshot!("three_panes_200x60", big);
    let (out, info, _) = render_with(&s, 80, 24, &screens, Theme::default());
    insta::assert_snapshot!("three_panes_80x24", out);
    assert_eq!(info.panes.len(), 3);
}

#[test]
fn frame_reports_pane_inner_sizes_for_pty_resizes() {
    let s = demo_state(fixed_now());
    let (_, info, _) = render_with(&s, 80, 24, &demo_screens(), Theme::default());
    // 80 wide: a 30-column task list, two panes side by side in the remaining 50 columns,
    // 21 rows between header and footer; borders take one cell each side.
    assert_eq!(info.panes.len(), 2);
    let (pk, r) = info.panes[0];
    assert_eq!(pk, 2);
    assert_eq!((r.width, r.height), (23, 19));
    let s = state_with(&[Action::FocusNext, Action::Zoom]);
    let (_, info, _) = render_with(&s, 80, 24, &demo_screens(), Theme::default());
    assert_eq!(info.panes.len(), 1);
    assert_eq!((info.panes[0].1.width, info.panes[0].1.height), (78, 19));
}

#[test]
fn tiny_terminals_never_panic() {
    let setups: Vec<Vec<Action>> = vec![
        vec![],
        vec![Action::Help],
        vec![Action::FocusNext, Action::Zoom],
        vec![Action::TaskDetail],
        vec![Action::Budget],
        vec![Action::Events],
        vec![Action::Stats],
        vec![Action::Triz],
        vec![Action::Tasks],
        vec![Action::Quit],
        vec![Action::Filter, Action::FilterChar('a')],
    ];
    for actions in &setups {
        let s = state_with(actions);
        for w in 0..=34u16 {
            for h in 0..=14u16 {
                let (_, info, _) =
                    render_with(&s, w.max(1), h.max(1), &demo_screens(), Theme::default());
                for (_, r) in &info.panes {
                    assert!(r.right() <= w.max(1) && r.bottom() <= h.max(1));
                }
            }
        }
    }
    let s = state_with(&[]);
    let out = render(&s, 1, 1);
    assert_eq!(out, "w\n");
}

fn fg_of(buf: &Buffer, needle: &str, row: u16) -> Option<Color> {
    let line: Vec<&str> = (0..buf.area.width)
        .map(|x| buf[(x, row)].symbol())
        .collect();
    let joined = line.concat();
    let at = joined.find(needle)?;
    let col = joined[..at].chars().count() as u16;
    Some(buf[(col, row)].fg)
}

#[test]
fn cost_colour_follows_budget_thresholds() {
    for (spent, colour) in [
        (1.0, Color::Green),
        (3.2, Color::Yellow),
        (4.0, Color::Red),
        (5.0, Color::Red),
    ] {
        let mut s = demo_state(fixed_now());
        if let Some(p) = s.plan.as_mut() {
            p.spent = Usd::from_f64(spent);
        }
        let (_, _, buf) = render_with(&s, 120, 30, &demo_screens(), Theme::default());
        assert_eq!(fg_of(&buf, "$", 0), Some(colour), "spent {spent}");
    }
}

#[test]
fn no_color_theme_uses_no_colours_outside_panes() {
    let s = state_with(&[Action::Budget]);
    let (_, _, buf) = render_with(
        &s,
        120,
        30,
        &demo_screens(),
        Theme::resolve("default", Some("1")),
    );
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            let c = &buf[(x, y)];
            assert!(
                c.fg == Color::Reset && c.bg == Color::Reset,
                "({x},{y}) {:?}",
                c
            );
        }
    }
    // Selection is still visible without colour.
    let (_, _, buf) = render_with(&state_with(&[]), 120, 30, &demo_screens(), Theme::MONO);
    let selected_row = (0..buf.area.height).find(|&y| {
        (0..buf.area.width).any(|x| {
            buf[(x, y)]
                .modifier
                .contains(ratatui::style::Modifier::REVERSED)
        })
    });
    assert!(selected_row.is_some());
}

#[test]
fn filter_narrows_the_rendered_list() {
    let s = state_with(&[
        Action::Filter,
        Action::FilterChar('u'),
        Action::FilterChar('i'),
        Action::FilterDone,
    ]);
    let out = render(&s, 80, 24);
    assert!(out.contains("UI-3"));
    assert!(!out.contains("DB-4"), "{out}");
    assert!(out.contains("1/6"), "{out}");
}

#[test]
fn every_view_renders_at_both_sizes() {
    for v in [
        View::Main,
        View::Tasks,
        View::TaskDetail,
        View::Events,
        View::Budget,
        View::Stats,
        View::Triz,
        View::Inbox,
        View::Workers,
        View::Wizard,
        View::Challenge,
    ] {
        let mut s = demo_state(fixed_now());
        s.view = v;
        for (w, h) in SIZES {
            let out = render(&s, w, h);
            let lines: Vec<&str> = out.lines().collect();
            // The header gives way part by part: what it shows is whole (the clock too).
            assert!(
                lines[0].contains("whilly demo"),
                "{v:?} {w}x{h}: {}",
                lines[0]
            );
            assert!(lines[0].contains("01:05"), "{v:?} {w}x{h}: {}", lines[0]);
            // The footer shows whole hints: it never ends on a key without its label.
            let footer = lines.last().map(|l| l.trim_end()).unwrap_or_default();
            let tail = footer.rsplit(' ').next().unwrap_or_default();
            assert!(
                tail.chars().count() > 1,
                "{v:?} {w}x{h}: footer cut: {footer:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_real_pty_session_renders_live_in_its_pane() {
    let fixture = "\\033[1mhello from the agent\\033[0m\\nline two\\n";
    let spec = SpawnSpec::new(["printf", fixture]).size(10, 40);
    let pty = Arc::new(PtySession::spawn(spec).expect("spawn printf"));
    assert!(pty.wait_for_text("line two", Duration::from_secs(10)).await);
    let mut s = demo_state(fixed_now());
    s.set_panes(vec![pane(
        2,
        "API-2",
        SessionState::Running,
        s.now,
        Duration::from_secs(1),
    )]);
    s.focus = Focus::Pane(2);
    let mut screens: BTreeMap<i64, Arc<PtySession>> = BTreeMap::new();
    screens.insert(2, pty.clone());
    let (out, _, buf) = render_with(&s, 80, 24, &screens, Theme::default());
    assert!(out.contains("hello from the agent"), "{out}");
    assert!(out.contains("line two"), "{out}");
    let row = (0..24)
        .find(|&y| {
            text(&buf)
                .lines()
                .nth(usize::from(y))
                .is_some_and(|l| l.contains("hello"))
        })
        .expect("row");
    let col = text(&buf)
        .lines()
        .nth(usize::from(row))
        .and_then(|l| l.find("hello"))
        .expect("col");
    let col = text(&buf)
        .lines()
        .nth(usize::from(row))
        .map(|l| l[..col].chars().count())
        .unwrap_or(0) as u16;
    assert!(
        buf[(col, row)]
            .modifier
            .contains(ratatui::style::Modifier::BOLD),
        "the agent's bold survives"
    );
    let _ = Status::Done;
}

fn inbox_with(actions: &[Action]) -> AppState {
    let mut s = inbox_state(fixed_now());
    for a in actions {
        s.handle(*a);
    }
    s
}

#[test]
fn inbox_lists_what_waits_for_a_human() {
    let s = inbox_with(&[Action::Inbox, Action::Mark]);
    for (w, h) in SIZES {
        let out = render(&s, w, h);
        insta::assert_snapshot!(format!("inbox_{w}x{h}"), out);
        assert!(out.contains("REVIEW-7"), "{out}");
        assert!(out.contains("handoff"), "{out}");
        assert!(out.contains("human loop"), "{out}");
        assert!(out.contains("●"), "the mark shows: {out}");
    }
    // The header tells the operator something waits, from any view.
    let main = render(&inbox_with(&[]), 200, 60);
    assert!(main.contains("inbox 2"), "{main}");
}

#[test]
fn inbox_item_shows_the_task_what_the_agent_said_and_the_coloured_diff() {
    use whilly::tui::model::InboxDetail;
    use whilly::workspace::WorktreeDiff;
    let mut s = inbox_with(&[Action::Inbox, Action::MoveDown, Action::Zoom]);
    s.set_inbox_detail(InboxDetail {
        task_pk: 7,
        brief: "Review the release notes by hand.\n\nAcceptance criteria:\n- the wording is final".into(),
        said: Some("I reworded the first line of NOTES.md.".into()),
        bounced: None,
        handoff_dir: Some("/repo/.whilly/handoff/demo/REVIEW-7".into()),
        diff: Some(WorktreeDiff {
            files: 1,
            insertions: 1,
            deletions: 1,
            patch: "diff --git a/NOTES.md b/NOTES.md\n--- a/NOTES.md\n+++ b/NOTES.md\n@@ -1 +1 @@\n-old line\n+new line\n".into(),
            truncated: false,
        }),
        worktree: Some("/work/trees/demo/REVIEW-7".into()),
        diff_note: None,
    });
    let (big, _, _) = render_with(&s, 200, 60, &demo_screens(), Theme::default());
    insta::assert_snapshot!("inbox_detail_200x60", big);
    let (out, _, buf) = render_with(&s, 80, 24, &demo_screens(), Theme::default());
    insta::assert_snapshot!("inbox_detail_80x24", out);
    assert!(big.contains("Review the release notes by hand."), "{big}");
    assert!(big.contains("What the agent said"), "{big}");
    assert!(
        big.contains("I reworded the first line of NOTES.md."),
        "{big}"
    );
    assert!(big.contains("whilly handoff complete REVIEW-7"), "{big}");
    assert!(out.contains("1 file(s), +1 −1"), "{out}");
    assert!(out.contains("Worktree: /work/trees/demo/REVIEW-7"), "{out}");
    let row = out.lines().position(|l| l.contains("+new line")).unwrap() as u16;
    assert_eq!(fg_of(&buf, "+new line", row), Some(Color::Green));
}

#[test]
fn a_bounced_approval_shows_the_failed_check_in_the_inbox_and_the_pane() {
    use whilly::tui::model::InboxDetail;
    let bounce = "your answer was approved, but the check tests failed (exit code 1)\n\
                  FAILED tests/test_notes.py::test_title - AssertionError\n\
                  1 failed, 4 passed in 0.31s";
    let mut s = inbox_with(&[Action::Inbox, Action::MoveDown, Action::Zoom]);
    s.set_inbox_detail(InboxDetail {
        task_pk: 7,
        brief: "Review the release notes by hand.".into(),
        said: None,
        bounced: Some(bounce.into()),
        handoff_dir: Some("/repo/.whilly/handoff/demo/REVIEW-7".into()),
        diff: None,
        worktree: None,
        diff_note: None,
    });
    for (w, h) in SIZES {
        let out = render(&s, w, h);
        insta::assert_snapshot!(format!("inbox_bounced_{w}x{h}"), out);
        assert!(
            out.contains("Bounced: your answer was approved") && out.contains("1 failed, 4 passed"),
            "{out}"
        );
    }
    // The handoff's pane says it too.
    let mut s = demo_state(fixed_now());
    let mut p = pane(
        7,
        "REVIEW-7",
        SessionState::WaitingForHuman,
        fixed_now(),
        Duration::from_secs(30),
    );
    p.has_screen = false;
    p.note = Some(bounce.into());
    s.set_panes(vec![p]);
    for (w, h) in SIZES {
        let out = render(&s, w, h);
        insta::assert_snapshot!(format!("pane_bounced_{w}x{h}"), out);
        assert!(out.contains("Bounced: your answer"), "{out}");
    }
}

#[test]
fn reject_asks_for_a_reason_in_a_popup() {
    let mut s = inbox_with(&[Action::Inbox, Action::Reject]);
    for c in "needs tests".chars() {
        s.handle(Action::TextChar(c));
    }
    insta::assert_snapshot!("inbox_reject_popup_200x60", render(&s, 200, 60));
    let out = render(&s, 80, 24);
    insta::assert_snapshot!("inbox_reject_popup_80x24", out);
    assert!(out.contains("Reject DOCS-5: reason"), "{out}");
    assert!(out.contains("needs tests"), "{out}");
}

#[test]
fn workers_view_shows_hosts_slots_and_heartbeat_age() {
    let s = inbox_with(&[Action::Workers]);
    for (w, h) in SIZES {
        let out = render(&s, w, h);
        insta::assert_snapshot!(format!("workers_{w}x{h}"), out);
        assert!(out.contains("build-1"), "{out}");
        assert!(out.contains("5s ago"), "{out}");
        assert!(out.contains("2m ago") || out.contains("120s ago"), "{out}");
    }
}

fn wizard_state() -> AppState {
    use whilly::tui::wizard::WizardReply;
    let mut s = demo_state(fixed_now());
    s.handle(Action::NewPrd);
    for c in "A profile page".chars() {
        s.wizard_key(crossterm::event::KeyEvent::new(
            crossterm::event::KeyCode::Char(c),
            crossterm::event::KeyModifiers::NONE,
        ));
    }
    s.wizard_key(crossterm::event::KeyEvent::new(
        crossterm::event::KeyCode::Char('s'),
        crossterm::event::KeyModifiers::CONTROL,
    ));
    s.wizard_reply(WizardReply::Question("Who uses it?".into()));
    s
}

#[test]
fn wizard_interview_and_plan_review() {
    use whilly::domain::{PlanSpec, Priority, TaskSpec};
    use whilly::tui::wizard::WizardReply;
    let s = wizard_state();
    for (w, h) in SIZES {
        let out = render(&s, w, h);
        insta::assert_snapshot!(format!("wizard_interview_{w}x{h}"), out);
        assert!(out.contains("step 2/5: interview"), "{out}");
        assert!(out.contains("Q: Who uses it?"), "{out}");
        assert!(out.contains("ctrl-s"), "{out}");
    }
    let mut s = s;
    let good = TaskSpec {
        id: "TASK-001".into(),
        priority: Priority::High,
        description: "Add the profile endpoint returning the user's data as JSON".into(),
        acceptance_criteria: vec!["GET /profile returns 200".into()],
        test_steps: vec!["cargo test profile".into()],
        key_files: vec!["src/profile.rs".into()],
        ..TaskSpec::default()
    };
    let vague = TaskSpec {
        id: "TASK-002".into(),
        description: "fix".into(),
        ..good.clone()
    };
    // Through the interview and the PRD to the plan, then the second task selected.
    let key = |code, modifiers| crossterm::event::KeyEvent::new(code, modifiers);
    let (none, control) = (
        crossterm::event::KeyModifiers::NONE,
        crossterm::event::KeyModifiers::CONTROL,
    );
    use crossterm::event::KeyCode;
    s.wizard_key(key(KeyCode::Char('n'), control));
    s.wizard_reply(WizardReply::Prd {
        path: "docs/PRD-profile.md".into(),
        text: "# Profile".into(),
    });
    s.wizard_key(key(KeyCode::Char('s'), control));
    s.wizard_reply(WizardReply::Plan(PlanSpec {
        id: "prd-profile".into(),
        project: "demo".into(),
        tasks: vec![good, vague],
        ..PlanSpec::default()
    }));
    s.wizard_key(key(KeyCode::Down, none));
    assert_eq!(
        s.wizard.as_ref().map(|w| w.stage()),
        Some(whilly::tui::wizard::Stage::Review { selected: 1 })
    );
    for (w, h) in SIZES {
        let out = render(&s, w, h);
        insta::assert_snapshot!(format!("wizard_review_{w}x{h}"), out);
        assert!(out.contains("✗ TASK-002"), "{out}");
        assert!(out.contains("✓ TASK-001"), "{out}");
        assert!(out.contains("problem(s)"), "{out}");
    }
}

#[test]
fn challenge_view_shows_the_critique() {
    let mut s = demo_state(fixed_now());
    s.handle(Action::Challenge);
    assert!(render(&s, 80, 24).contains("the agent is reading the plan"));
    s.set_challenge(Ok(
        "## Verdict\nrevise: DB-4 has no test step that can fail.\n## Risks\n- none".into(),
    ));
    for (w, h) in SIZES {
        let out = render(&s, w, h);
        insta::assert_snapshot!(format!("challenge_{w}x{h}"), out);
        assert!(out.contains("revise: DB-4"), "{out}");
    }
}

#[test]
fn replay_view_shows_a_finished_attempts_log() {
    use whilly::tui::model::REPLAY_PK;
    let mut s = demo_state(fixed_now());
    s.handle(Action::Replay);
    s.set_replay(1, Ok("/runs/r1/demo/AUTH-1/1.log".into()));
    let emu = whilly::tui::replay::replay_bytes(
        b"\x1b[1;32m\xe2\x9c\x94 done\x1b[0m AUTH-1 finished\r\nall tests pass\r\n",
        whilly::pty::TermSize::new(19, 78),
        100,
    );
    let mut screens: BTreeMap<i64, Emulator> = BTreeMap::new();
    screens.insert(REPLAY_PK, emu);
    let (big, _, _) = render_with(&s, 200, 60, &screens, Theme::default());
    insta::assert_snapshot!("replay_200x60", big);
    let (out, _, buf) = render_with(&s, 80, 24, &screens, Theme::default());
    insta::assert_snapshot!("replay_80x24", out);
    assert!(out.contains("AUTH-1 · replay of 1.log"), "{out}");
    assert!(out.contains("✔ done AUTH-1 finished"), "{out}");
    let row = out.lines().position(|l| l.contains("✔ done")).unwrap() as u16;
    assert_eq!(
        fg_of(&buf, "✔ done", row),
        Some(Color::Indexed(2)),
        "the log's green"
    );
}

#[test]
fn tasks_stats_and_triz_views() {
    let tasks = snap_views("tasks", &[Action::Tasks]);
    let stats = snap_views("stats", &[Action::Stats]);
    let triz = snap_views("triz", &[Action::Triz]);
    for out in &tasks {
        assert!(out.contains("E2E-6") && out.contains("wait 2"), "{out}");
    }
    for out in stats.iter().chain(triz.iter()) {
        assert!(out.contains("whilly demo"), "{out}");
    }
    assert!(triz[1].contains("TRIZ"), "{}", triz[1]);
}

#[test]
fn quit_popup_offers_the_background_with_a_launcher() {
    let mut s = demo_state(fixed_now());
    s.can_background = true;
    s.handle(Action::Quit);
    for (w, h) in SIZES {
        let out = render(&s, w, h);
        insta::assert_snapshot!(format!("quit_background_{w}x{h}"), out);
        assert!(out.contains("let them finish in the background"), "{out}");
        assert!(
            out.contains("the whole plan goes on in the background"),
            "{out}"
        );
        assert!(out.contains("keep going"), "{out}");
    }
}

#[test]
fn tasks_held_by_another_worker_are_named_where_panes_would_be() {
    let mut s = demo_state(fixed_now());
    s.own_worker = Some("here/1/a".into());
    let mut tasks = s.tasks.clone();
    for t in tasks.iter_mut().filter(|t| t.status.is_leased()) {
        t.worker_id = Some("there/2/b".into());
    }
    let plan = s.plan.clone().expect("plan");
    s.set_data(plan, tasks, Vec::new());
    s.set_panes(Vec::new());
    let out = render(&s, 200, 60);
    assert!(
        out.contains("2 task(s) run in another worker: API-2, UI-3."),
        "{out}"
    );
    // The console's own claims (no pane yet while preparing) are not "another worker".
    s.own_worker = Some("there/2/b".into());
    let out = render(&s, 200, 60);
    assert!(out.contains("No agent running yet."), "{out}");
}

#[test]
fn diff_view_shows_where_the_changes_come_from_and_colours_them() {
    use whilly::tui::msg::Msg;
    use whilly::workspace::{DiffSource, WorktreeDiff};
    let mut s = demo_state(fixed_now());
    s.handle(Action::Diff);
    let pk = s.diff.as_ref().map(|d| d.task_pk).expect("diff view");
    s.update(Msg::Diff(
        pk,
        Ok((
            DiffSource::Landed("0123456789abcdef0123".into()),
            WorktreeDiff {
                files: 1,
                insertions: 1,
                deletions: 1,
                patch: "diff --git a/src/auth.rs b/src/auth.rs\n--- a/src/auth.rs\n+++ b/src/auth.rs\n@@ -1 +1 @@\n-fn old() {}\n+fn login() {}\n".into(),
                truncated: false,
            },
        )),
    ));
    for (w, h) in SIZES {
        let (out, _, buf) = render_with(&s, w, h, &demo_screens(), Theme::default());
        insta::assert_snapshot!(format!("diff_{w}x{h}"), out);
        assert!(
            out.contains("landed commit 0123456789ab against its parent"),
            "{out}"
        );
        let row = out.lines().position(|l| l.contains("+fn login")).unwrap() as u16;
        assert_eq!(fg_of(&buf, "+fn login", row), Some(Color::Green));
    }
}

#[test]
fn split_dialog_shows_the_agent_at_work_then_the_coloured_diff() {
    use whilly::tui::msg::Msg;
    let mut s = demo_state(fixed_now());
    for _ in 0..4 {
        s.handle(Action::MoveDown);
    }
    assert_eq!(s.selected_task().map(|t| t.id.as_str()), Some("DOCS-5"));
    s.handle(Action::SplitTask);
    assert!(render(&s, 80, 24).contains("asking the agent to split DOCS-5"));
    s.update(Msg::Split(
        "DOCS-5".into(),
        Ok(Box::new(whilly::tui::testkit::demo_split())),
    ));
    for (w, h) in SIZES {
        let (out, _, buf) = render_with(&s, w, h, &demo_screens(), Theme::default());
        insta::assert_snapshot!(format!("split_{w}x{h}"), out);
        assert!(out.contains("Split DOCS-5"), "{out}");
        assert!(out.contains("y write into the queue"), "{out}");
        let needle = "+      \"id\": \"DOCS-5a\"";
        let row = out.lines().position(|l| l.contains(needle));
        if let Some(row) = row {
            assert_eq!(fg_of(&buf, needle, row as u16), Some(Color::Green));
        } else {
            // 80×24 shows the top of the diff: its header.
            assert!(out.contains("--- a/demo (queue)"), "{out}");
        }
    }
    // Scrolled down, the added subtask comes into view at the small size too.
    s.handle(Action::ScrollDown);
    let out = render(&s, 80, 24);
    assert!(out.contains("+      \"id\": \"DOCS-5b\""), "{out}");
}

#[test]
fn an_agent_waiting_for_input_is_named_in_its_pane_and_counted_in_the_header() {
    let mut s = demo_state(fixed_now());
    let mut panes = s.panes.clone();
    panes[0].waiting_input = true;
    s.set_panes(panes);
    for (w, h) in SIZES {
        let (out, _, _) = render_with(&s, w, h, &demo_screens(), Theme::default());
        insta::assert_snapshot!(format!("waiting_input_{w}x{h}"), out);
        // Whole where the pane has room, short where it has not.
        let badge = if w >= 200 {
            "[waiting for input]"
        } else {
            "[input?]"
        };
        assert!(out.contains(badge), "{out}");
        assert!(
            out.lines().next().is_some_and(|l| l.contains("input 1")),
            "{out}"
        );
    }
}
