//! The console's state and its state machine: `handle(Action) -> Vec<Effect>`. No terminal, no
//! IO: the event loop feeds it actions and data, runs the effects it returns, and renders it.

use super::action::Action;
use crate::domain::{PlanSpec, Status, Usd};
use crate::engine::RunSummary;
use crate::engine::budget::{BudgetState, budget_state};
use crate::engine::sessions::SessionState;
use crate::plan::triz::{TrizReport, triz_report};
use crate::store::{Event, PlanRecord, TaskRecord};
use std::time::{Duration, Instant};

/// Events kept in memory for the events view and task detail.
const MAX_EVENTS: usize = 2000;
/// Lines scrolled by one scroll action in a pane.
pub const SCROLL_STEP: i32 = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Main,
    Tasks,
    TaskDetail,
    Events,
    Budget,
    Stats,
    Triz,
}

impl View {
    pub fn title(self) -> &'static str {
        match self {
            View::Main => "main",
            View::Tasks => "tasks",
            View::TaskDetail => "task detail",
            View::Events => "events",
            View::Budget => "budget",
            View::Stats => "statistics",
            View::Triz => "TRIZ",
        }
    }

    /// The actions that mean something in this view (the help popup lists their keys).
    pub fn actions(self) -> &'static [Action] {
        use Action::*;
        const GLOBAL: &[Action] = &[
            Quit,
            Help,
            TaskDetail,
            Events,
            Tasks,
            Stats,
            Budget,
            NewPrd,
            ResetTask,
            Triz,
            Challenge,
            TogglePause,
            Back,
        ];
        match self {
            View::Main => &[
                Quit,
                Help,
                MoveUp,
                MoveDown,
                First,
                Last,
                FocusNext,
                FocusPrev,
                Zoom,
                Takeover,
                Release,
                Filter,
                ScrollUp,
                ScrollDown,
                TaskDetail,
                Events,
                Tasks,
                Stats,
                Budget,
                NewPrd,
                ResetTask,
                Triz,
                Challenge,
                TogglePause,
                Back,
            ],
            View::Tasks | View::Budget => &[
                Quit,
                Help,
                MoveUp,
                MoveDown,
                First,
                Last,
                Filter,
                TaskDetail,
                Events,
                Tasks,
                Stats,
                Budget,
                NewPrd,
                ResetTask,
                Triz,
                Challenge,
                TogglePause,
                Back,
            ],
            View::Events | View::TaskDetail | View::Triz => &[
                Quit,
                Help,
                MoveUp,
                MoveDown,
                First,
                Last,
                TaskDetail,
                Events,
                Tasks,
                Stats,
                Budget,
                NewPrd,
                ResetTask,
                Triz,
                Challenge,
                TogglePause,
                Back,
            ],
            View::Stats => GLOBAL,
        }
    }
}

/// Where keys go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    TaskList,
    /// The pane of the session for this task pk.
    Pane(i64),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirm {
    ResetTask(String),
    /// Quit while agents run: stop them (tasks released) or keep waiting.
    Quit {
        running: usize,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Popup {
    Help,
    Confirm(Confirm),
}

/// What the event loop must do after an action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Leave the console (nothing left running, or the run is over).
    Quit,
    /// Stop the engine now (agents killed, their tasks released) and leave once it has ended.
    StopAgentsAndQuit,
    ResetTask(String),
    SetPaused(bool),
    /// Move a pane's scrollback view by `delta` lines (positive = back in time).
    ScrollPane {
        task_pk: i64,
        delta: i32,
    },
}

/// One live agent session as the console shows it (from `engine::sessions::SessionInfo`).
#[derive(Debug, Clone, PartialEq)]
pub struct PaneMeta {
    pub task_pk: i64,
    pub task_id: String,
    pub agent: String,
    pub attempt: i64,
    pub started: Instant,
    pub state: SessionState,
    /// Whether a terminal is attached (none while preparing or for a human handoff).
    pub has_screen: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
}

/// Task counts for the header.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub total: usize,
    pub done: usize,
    pub pending: usize,
    pub running: usize,
    pub failed: usize,
    pub skipped: usize,
    /// BLOCKED or HUMAN_LOOP: waiting for an operator.
    pub held: usize,
}

/// Budget numbers for the header and the budget panel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetFigures {
    pub spent: Usd,
    pub limit: Option<Usd>,
    /// Spent over limit, 0.0–∞ (None without a limit).
    pub ratio: Option<f64>,
    pub state: BudgetState,
    /// Dollars per hour since the console started.
    pub burn_per_hour: f64,
    /// Time until the limit at the current burn rate.
    pub to_exhaustion: Option<Duration>,
}

pub struct AppState {
    pub plan: Option<PlanRecord>,
    pub tasks: Vec<TaskRecord>,
    pub events: Vec<Event>,
    pub backend: String,
    pub panes: Vec<PaneMeta>,
    pub view: View,
    pub focus: Focus,
    pub zoom: Option<i64>,
    pub takeover: Option<i64>,
    /// Index into the filtered task list.
    pub selected: usize,
    pub filter: String,
    pub filter_editing: bool,
    pub popups: Vec<Popup>,
    pub status: Option<(String, Level)>,
    /// Lines back from the newest event (0 = follow).
    pub events_offset: usize,
    pub detail_scroll: u16,
    pub summary: Option<RunSummary>,
    pub engine_error: Option<String>,
    /// Set once the operator chose to stop running agents.
    pub stopping: bool,
    pub started: Instant,
    /// The clock the renderer uses (set by the loop each frame; fixed in tests).
    pub now: Instant,
    pub triz: Option<TrizReport>,
}

impl AppState {
    pub fn new(backend: impl Into<String>, now: Instant) -> Self {
        AppState {
            plan: None,
            tasks: Vec::new(),
            events: Vec::new(),
            backend: backend.into(),
            panes: Vec::new(),
            view: View::Main,
            focus: Focus::TaskList,
            zoom: None,
            takeover: None,
            selected: 0,
            filter: String::new(),
            filter_editing: false,
            popups: Vec::new(),
            status: None,
            events_offset: 0,
            detail_scroll: 0,
            summary: None,
            engine_error: None,
            stopping: false,
            started: now,
            now,
            triz: None,
        }
    }

    // ---- data in ---------------------------------------------------------------------------

    pub fn set_data(&mut self, plan: PlanRecord, tasks: Vec<TaskRecord>, new_events: Vec<Event>) {
        self.plan = Some(plan);
        self.tasks = tasks;
        self.events.extend(new_events);
        if self.events.len() > MAX_EVENTS {
            let cut = self.events.len() - MAX_EVENTS;
            self.events.drain(..cut);
        }
        self.clamp_selection();
    }

    /// The live sessions; focus, zoom and takeover of sessions that ended are dropped.
    pub fn set_panes(&mut self, mut panes: Vec<PaneMeta>) {
        panes.sort_by_key(|p| p.task_pk);
        let alive = |pk: i64| panes.iter().any(|p| p.task_pk == pk);
        if let Focus::Pane(pk) = self.focus
            && !alive(pk)
        {
            self.focus = Focus::TaskList;
        }
        if self.zoom.is_some_and(|pk| !alive(pk)) {
            self.zoom = None;
        }
        if let Some(pk) = self.takeover
            && !panes.iter().any(|p| p.task_pk == pk && p.has_screen)
        {
            self.takeover = None;
            self.set_status("the agent's session ended; control is back", Level::Info);
        }
        self.panes = panes;
    }

    pub fn set_finished(&mut self, summary: RunSummary) {
        self.summary = Some(summary);
        self.takeover = None;
        self.popups
            .retain(|p| !matches!(p, Popup::Confirm(Confirm::Quit { .. })));
    }

    pub fn set_engine_error(&mut self, message: String) {
        self.engine_error = Some(message);
        self.takeover = None;
    }

    pub fn set_status(&mut self, text: impl Into<String>, level: Level) {
        self.status = Some((text.into(), level));
    }

    // ---- derived ---------------------------------------------------------------------------

    pub fn finished(&self) -> bool {
        self.summary.is_some() || self.engine_error.is_some()
    }

    pub fn counts(&self) -> Counts {
        let mut c = Counts {
            total: self.tasks.len(),
            ..Counts::default()
        };
        for t in &self.tasks {
            match t.status {
                Status::Pending => c.pending += 1,
                Status::Claimed | Status::InProgress => c.running += 1,
                Status::Done => c.done += 1,
                Status::Failed => c.failed += 1,
                Status::Skipped => c.skipped += 1,
                Status::Blocked | Status::HumanLoop => c.held += 1,
            }
        }
        c
    }

    pub fn elapsed(&self) -> Duration {
        self.now.saturating_duration_since(self.started)
    }

    pub fn budget(&self) -> BudgetFigures {
        let spent = self.plan.as_ref().map(|p| p.spent).unwrap_or_default();
        let limit = self.plan.as_ref().and_then(|p| p.budget);
        budget_figures(spent, limit, self.elapsed())
    }

    /// Tasks matching the filter (id, status, agent, description; case-insensitive).
    pub fn visible_tasks(&self) -> Vec<&TaskRecord> {
        let needle = self.filter.trim().to_lowercase();
        self.tasks
            .iter()
            .filter(|t| needle.is_empty() || task_matches(t, &needle))
            .collect()
    }

    pub fn selected_task(&self) -> Option<&TaskRecord> {
        self.visible_tasks().get(self.selected).copied()
    }

    pub fn pane(&self, task_pk: i64) -> Option<&PaneMeta> {
        self.panes.iter().find(|p| p.task_pk == task_pk)
    }

    /// The pane keys and zoom act on: the focused one, else the selected task's.
    pub fn target_pane(&self) -> Option<&PaneMeta> {
        match self.focus {
            Focus::Pane(pk) => self.pane(pk),
            Focus::TaskList => self
                .selected_task()
                .and_then(|t| self.pane(t.pk))
                .or_else(|| self.zoom.and_then(|pk| self.pane(pk))),
        }
    }

    pub fn task_events(&self, task_id: &str) -> Vec<&Event> {
        self.events
            .iter()
            .filter(|e| e.task_id.as_deref() == Some(task_id))
            .collect()
    }

    /// Whether the top popup is waiting for a y/n-style answer (the input layer then sends
    /// `Action::Answer`).
    pub fn wants_answer(&self) -> bool {
        matches!(self.popups.last(), Some(Popup::Confirm(_)))
    }

    fn clamp_selection(&mut self) {
        let n = self.visible_tasks().len();
        self.selected = self.selected.min(n.saturating_sub(1));
    }

    // ---- the state machine -----------------------------------------------------------------

    pub fn handle(&mut self, action: Action) -> Vec<Effect> {
        if !matches!(action, Action::Resize(..)) {
            self.status = None;
        }
        if let Some(top) = self.popups.last().cloned() {
            return self.handle_popup(top, action);
        }
        if self.filter_editing {
            match action {
                Action::FilterChar(c) => {
                    self.filter.push(c);
                    self.selected = 0;
                    return Vec::new();
                }
                Action::FilterBackspace => {
                    self.filter.pop();
                    self.selected = 0;
                    return Vec::new();
                }
                Action::FilterDone => {
                    self.filter_editing = false;
                    return Vec::new();
                }
                Action::Back => {
                    self.filter_editing = false;
                    self.filter.clear();
                    self.selected = 0;
                    return Vec::new();
                }
                _ => self.filter_editing = false,
            }
        }
        match action {
            Action::Quit => return self.quit(),
            Action::Help => self.popups.push(Popup::Help),
            Action::TaskDetail => self.open_detail(),
            Action::Events => self.switch(View::Events),
            Action::Tasks => self.switch(View::Tasks),
            Action::Stats => self.switch(View::Stats),
            Action::Budget => self.switch(View::Budget),
            Action::Triz => {
                self.triz = Some(self.triz_now());
                self.switch(View::Triz);
            }
            Action::NewPrd => self.set_status("new PRD wizard: not yet", Level::Info),
            Action::Challenge => self.set_status("challenge: not yet", Level::Info),
            Action::ResetTask => self.ask_reset(),
            Action::TogglePause => {
                if let Some(plan) = &self.plan {
                    let pause = !plan.paused;
                    self.set_status(
                        if pause {
                            "pausing the plan: running agents finish, nothing new starts"
                        } else {
                            "resuming the plan"
                        },
                        Level::Info,
                    );
                    return vec![Effect::SetPaused(pause)];
                }
            }
            Action::MoveUp => self.move_by(-1),
            Action::MoveDown => self.move_by(1),
            Action::First => self.move_by(i64::MIN / 2),
            Action::Last => self.move_by(i64::MAX / 2),
            Action::FocusNext => self.cycle_focus(1),
            Action::FocusPrev => self.cycle_focus(-1),
            Action::Zoom => self.zoom(),
            Action::Takeover => self.takeover(),
            Action::Release => self.takeover = None,
            Action::Filter => {
                if matches!(self.view, View::Main | View::Tasks | View::Budget) {
                    self.filter_editing = true;
                }
            }
            Action::Back => self.back(),
            Action::ScrollUp | Action::ScrollDown => {
                let delta = if action == Action::ScrollUp {
                    SCROLL_STEP
                } else {
                    -SCROLL_STEP
                };
                if self.view == View::Main
                    && let Some(p) = self.target_pane().filter(|p| p.has_screen)
                {
                    return vec![Effect::ScrollPane {
                        task_pk: p.task_pk,
                        delta,
                    }];
                }
                self.scroll_view(-delta.signum() as i64 * 10);
            }
            Action::None
            | Action::FilterChar(_)
            | Action::FilterBackspace
            | Action::FilterDone
            | Action::Answer(_)
            | Action::Resize(..) => {}
        }
        Vec::new()
    }

    fn handle_popup(&mut self, top: Popup, action: Action) -> Vec<Effect> {
        match top {
            Popup::Help => {
                if !matches!(action, Action::Resize(..)) {
                    self.popups.pop();
                }
                Vec::new()
            }
            Popup::Confirm(confirm) => {
                let answer = match action {
                    Action::Answer(c) => c.to_ascii_lowercase(),
                    Action::Back => 'n',
                    Action::Quit if matches!(confirm, Confirm::Quit { .. }) => 'n',
                    _ => return Vec::new(),
                };
                match (confirm, answer) {
                    (Confirm::ResetTask(id), 'y') => {
                        self.popups.pop();
                        self.set_status(format!("resetting {id}"), Level::Info);
                        vec![Effect::ResetTask(id)]
                    }
                    (Confirm::Quit { .. }, 's' | 'y') => {
                        self.popups.pop();
                        self.stopping = true;
                        self.takeover = None;
                        self.set_status(
                            "stopping agents; their tasks go back to PENDING…",
                            Level::Warn,
                        );
                        vec![Effect::StopAgentsAndQuit]
                    }
                    (_, 'n' | 'w') => {
                        self.popups.pop();
                        Vec::new()
                    }
                    _ => Vec::new(),
                }
            }
        }
    }

    fn quit(&mut self) -> Vec<Effect> {
        if self.finished() {
            return vec![Effect::Quit];
        }
        if self.stopping {
            self.set_status("still stopping agents…", Level::Warn);
            return Vec::new();
        }
        let running = self.panes.len().max(self.counts().running);
        if running == 0 {
            return vec![Effect::Quit];
        }
        self.popups.push(Popup::Confirm(Confirm::Quit { running }));
        Vec::new()
    }

    fn switch(&mut self, view: View) {
        self.view = if self.view == view { View::Main } else { view };
        self.events_offset = 0;
        self.detail_scroll = 0;
        if self.view != View::Main {
            self.takeover = None;
        }
    }

    fn open_detail(&mut self) {
        if self.selected_task().is_none() {
            self.set_status("no task selected", Level::Info);
            return;
        }
        self.switch(View::TaskDetail);
    }

    fn ask_reset(&mut self) {
        let Some(task) = self.selected_task() else {
            self.set_status("no task selected", Level::Info);
            return;
        };
        if task.status.is_leased() {
            let msg = format!("{} is running; it cannot be reset until it stops", task.id);
            self.set_status(msg, Level::Warn);
            return;
        }
        let id = task.id.clone();
        self.popups.push(Popup::Confirm(Confirm::ResetTask(id)));
    }

    fn move_by(&mut self, delta: i64) {
        match self.view {
            View::Main | View::Tasks | View::Budget => {
                let n = self.visible_tasks().len() as i64;
                if n == 0 {
                    self.selected = 0;
                    return;
                }
                let next = (self.selected as i64).saturating_add(delta).clamp(0, n - 1);
                self.selected = next as usize;
            }
            View::Events => self.scroll_view(delta),
            View::TaskDetail | View::Triz | View::Stats => self.scroll_view(delta),
        }
    }

    /// Scrolls text views; positive = down / towards newer.
    fn scroll_view(&mut self, delta: i64) {
        match self.view {
            View::Events => {
                let max = self.events.len() as i64;
                self.events_offset = (self.events_offset as i64)
                    .saturating_sub(delta)
                    .clamp(0, max) as usize;
            }
            View::TaskDetail | View::Triz | View::Stats => {
                self.detail_scroll = (i64::from(self.detail_scroll).saturating_add(delta))
                    .clamp(0, i64::from(u16::MAX)) as u16;
            }
            _ => {}
        }
    }

    fn cycle_focus(&mut self, dir: i64) {
        if self.view != View::Main {
            return;
        }
        // Zoomed: cycle the zoomed pane among panes; otherwise the task list takes part too.
        let mut ring: Vec<Focus> = Vec::new();
        if self.zoom.is_none() {
            ring.push(Focus::TaskList);
        }
        ring.extend(self.panes.iter().map(|p| Focus::Pane(p.task_pk)));
        if ring.is_empty() {
            return;
        }
        let current = match self.zoom {
            Some(pk) => Focus::Pane(pk),
            None => self.focus,
        };
        let at = ring.iter().position(|f| *f == current).unwrap_or(0) as i64;
        let n = ring.len() as i64;
        let next = ring[((at + dir).rem_euclid(n)) as usize];
        self.focus = next;
        if self.zoom.is_some()
            && let Focus::Pane(pk) = next
        {
            self.zoom = Some(pk);
        }
        if self.takeover.is_some() {
            self.takeover = None;
        }
    }

    fn zoom(&mut self) {
        if self.view != View::Main {
            return;
        }
        if self.zoom.is_some() {
            self.zoom = None;
            return;
        }
        match self.target_pane().map(|p| p.task_pk) {
            Some(pk) => {
                self.zoom = Some(pk);
                self.focus = Focus::Pane(pk);
            }
            None if self.focus == Focus::TaskList && self.selected_task().is_some() => {
                self.open_detail()
            }
            None => self.set_status("no agent pane to zoom", Level::Info),
        }
    }

    fn takeover(&mut self) {
        if self.view != View::Main {
            return;
        }
        if self.finished() {
            self.set_status("the run is over", Level::Info);
            return;
        }
        match self.target_pane() {
            Some(p) if p.has_screen => {
                let pk = p.task_pk;
                let task = p.task_id.clone();
                self.takeover = Some(pk);
                self.focus = Focus::Pane(pk);
                self.set_status(
                    format!("typing goes to {task}; Ctrl-] gives control back"),
                    Level::Warn,
                );
            }
            Some(p) => {
                let msg = format!("{} has no terminal yet ({:?})", p.task_id, p.state);
                self.set_status(msg, Level::Info);
            }
            None => self.set_status("focus an agent pane first (Tab)", Level::Info),
        }
    }

    fn back(&mut self) {
        if self.takeover.is_some() {
            self.takeover = None;
        } else if self.view != View::Main {
            self.view = View::Main;
        } else if self.zoom.is_some() {
            self.zoom = None;
        } else if !self.filter.is_empty() {
            self.filter.clear();
            self.selected = 0;
        } else if self.focus != Focus::TaskList {
            self.focus = Focus::TaskList;
        }
    }

    fn triz_now(&self) -> TrizReport {
        let mut spec: PlanSpec = self
            .plan
            .as_ref()
            .map(|p| p.spec.clone())
            .unwrap_or_default();
        spec.tasks = self.tasks.iter().map(|t| t.spec.clone()).collect();
        triz_report(&spec)
    }
}

fn task_matches(t: &TaskRecord, needle: &str) -> bool {
    t.id.to_lowercase().contains(needle)
        || t.status.as_str().to_lowercase().contains(needle)
        || t.spec.description.to_lowercase().contains(needle)
        || t.spec
            .agent
            .as_deref()
            .is_some_and(|a| a.to_lowercase().contains(needle))
        || t.priority.as_str().contains(needle)
}

/// Spend against the limit, the burn rate since `elapsed` began, and the projected time left.
pub fn budget_figures(spent: Usd, limit: Option<Usd>, elapsed: Duration) -> BudgetFigures {
    let hours = elapsed.as_secs_f64() / 3600.0;
    let burn_per_hour = if hours > 0.0 {
        spent.as_f64() / hours
    } else {
        0.0
    };
    let ratio = limit.map(|l| {
        if l.0 <= 0 {
            if spent.0 > 0 { f64::INFINITY } else { 1.0 }
        } else {
            spent.as_f64() / l.as_f64()
        }
    });
    let to_exhaustion = match limit {
        Some(l) if burn_per_hour > 0.0 => {
            let left = (l - spent).as_f64().max(0.0);
            Some(Duration::from_secs_f64(
                (left / burn_per_hour * 3600.0).min(1e9),
            ))
        }
        _ => None,
    };
    BudgetFigures {
        spent,
        limit,
        ratio,
        state: budget_state(limit, spent),
        burn_per_hour,
        to_exhaustion,
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
