//! The console's state and its state machine: `handle(Action) -> Vec<Effect>`. No terminal, no
//! IO: the event loop feeds it actions and data, runs the effects it returns, and renders it.

use super::action::Action;
use super::derived::{DataKey, Derived};
use super::model::*;
use super::msg::TaskLoad;
use super::wizard::Wizard;
use crate::domain::PlanSpec;
use crate::engine::RunSummary;
use crate::plan::triz::{TrizReport, triz_report};
use crate::store::{Event, PlanRecord, TaskRecord, WorkerRecord};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

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
    pub filter: super::views::FilterEditor,
    pub popups: Vec<Popup>,
    pub status: Option<(String, Level)>,
    /// Lines back from the newest event (0 = follow).
    pub events_offset: usize,
    pub detail_scroll: u16,
    pub summary: Option<RunSummary>,
    pub engine_error: Option<String>,
    /// Why this console runs no tasks itself (an agent the plan needs is missing): it watches.
    pub observer: Option<crate::engine::setup::Observer>,
    /// Set once the operator chose to stop running agents.
    pub stopping: bool,
    /// Set once the operator chose to let running agents finish with nothing new starting.
    pub draining: bool,
    /// Ids of tasks whose handoff directory waits for an answer, whichever process runs them.
    pub waiting_handoffs: BTreeSet<String>,
    /// This console's engine's worker id: tasks held by other ids run elsewhere.
    pub own_worker: Option<String>,
    /// `[remote] takeover`: keys may go to agents in remote panes.
    pub remote_takeover: bool,
    /// Whether quitting may leave running agents to finish in the background (the console was
    /// started by a launcher that can hand the terminal back).
    pub can_background: bool,
    /// Why the agent the PRD wizard and the challenge ask cannot answer (not installed, not
    /// configured): said when they are opened, before anything is typed.
    pub no_oneshot_agent: Option<String>,
    pub started: Instant,
    /// When the run finished: the clock and the burn rate stop there (nothing is spent while
    /// the console only waits), and go on if the serving engine gets work again.
    pub finished_at: Option<Instant>,
    /// The clock the renderer uses (set by the loop each frame; fixed in tests).
    pub now: Instant,
    /// Wall-clock time for ages of stored timestamps (set with `now`; fixed in tests).
    pub wall: chrono::DateTime<chrono::Utc>,
    pub triz: Option<TrizReport>,
    /// The inbox view: selection, marks, the item being read.
    pub inbox_ui: super::views::InboxView,
    /// Workers registered on the queue (Postgres; the local process on SQLite).
    pub workers: Vec<WorkerRecord>,
    /// `[queue] worker_offline_secs`: workers silent for longer are not shown.
    pub worker_offline_after: std::time::Duration,
    pub wizard: Option<Wizard>,
    pub challenge: Option<ChallengeView>,
    /// The split dialog (`X`), while it is open.
    pub split: Option<SplitView>,
    pub replay: Option<ReplayMeta>,
    /// The diff view's task and content.
    pub diff: Option<DiffMeta>,
    /// Whether the first load arrived: events up to it are history and notify nobody.
    pub seen_history: bool,
    /// Each task's pull request, by task id: from the events as they arrive, and from GitHub
    /// when the console asks again ([`Msg::Pulls`](super::msg::Msg::Pulls)).
    pub pulls: BTreeMap<String, crate::engine::pull_watch::TaskPull>,
    /// A GitHub rate-limit wait under way in this process, for the header.
    pub github_wait: Option<String>,
    /// Each Jira task's issue status, by task id, as the `jira.transitioned` events tell it.
    pub jira_status: BTreeMap<String, String>,
    /// Agents paused by rate limits, by agent, as the `agent.paused` events tell it (the later
    /// pause wins); [`AppState::agent_pauses`] gives those still running.
    pub paused_agents: BTreeMap<String, crate::domain::rate_limit::PauseNote>,
    /// Each task's project-board column, by task id, as the `board.card_moved` events tell it.
    pub board_column: BTreeMap<String, String>,
    /// The board or Jira sync's last failure, while no later sync succeeded: the header's
    /// warning badge (`board out of step`).
    pub sync_trouble: Option<String>,
    /// Bumped when the task list / the events change (by the data-in methods): what
    /// [`Self::derived`] derived from older data is worked out again.
    tasks_generation: u64,
    events_generation: u64,
    /// Counts, the filtered list, the inbox: derived once per change, not once per frame (a
    /// lock, not a `RefCell`, so the state stays `Sync`; it is never contended).
    derived: Mutex<Derived>,
}

impl AppState {
    /// The rate-limit pauses still running, by agent name.
    pub fn agent_pauses(&self) -> Vec<&crate::domain::rate_limit::PauseNote> {
        self.paused_agents
            .values()
            .filter(|p| p.until > self.wall)
            .collect()
    }

    pub fn new(backend: impl Into<String>, now: Instant) -> Self {
        AppState {
            plan: None,
            tasks: Vec::new(),
            events: Vec::new(),
            backend: backend.into(),
            can_background: false,
            no_oneshot_agent: None,
            panes: Vec::new(),
            view: View::Main,
            focus: Focus::TaskList,
            zoom: None,
            takeover: None,
            selected: 0,
            filter: super::views::FilterEditor::default(),
            popups: Vec::new(),
            status: None,
            events_offset: 0,
            detail_scroll: 0,
            summary: None,
            engine_error: None,
            observer: None,
            stopping: false,
            draining: false,
            waiting_handoffs: BTreeSet::new(),
            own_worker: None,
            remote_takeover: false,
            started: now,
            finished_at: None,
            now,
            wall: chrono::Utc::now(),
            triz: None,
            inbox_ui: super::views::InboxView::default(),
            workers: Vec::new(),
            worker_offline_after: std::time::Duration::from_secs(120),
            wizard: None,
            challenge: None,
            split: None,
            replay: None,
            diff: None,
            seen_history: false,
            pulls: BTreeMap::new(),
            github_wait: None,
            jira_status: BTreeMap::new(),
            paused_agents: BTreeMap::new(),
            board_column: BTreeMap::new(),
            sync_trouble: None,
            tasks_generation: 0,
            events_generation: 0,
            derived: Mutex::new(Derived::default()),
        }
    }

    // ---- data in ---------------------------------------------------------------------------

    pub fn set_data(&mut self, plan: PlanRecord, tasks: Vec<TaskRecord>, new_events: Vec<Event>) {
        self.tasks = tasks;
        self.tasks_generation = self.tasks_generation.wrapping_add(1);
        self.set_plan_and_events(plan, new_events);
    }

    /// A feed load: the plan row, the tasks it brings put in place (all of them, or the changed
    /// ones), the new events. Derived data is worked out again only if tasks or events came.
    pub fn apply_feed(&mut self, plan: PlanRecord, tasks: TaskLoad, new_events: Vec<Event>) {
        if !tasks.is_empty() {
            tasks.apply(&mut self.tasks);
            self.tasks_generation = self.tasks_generation.wrapping_add(1);
        }
        self.set_plan_and_events(plan, new_events);
    }

    fn set_plan_and_events(&mut self, plan: PlanRecord, new_events: Vec<Event>) {
        self.plan = Some(plan);
        if !new_events.is_empty() {
            self.events_generation = self.events_generation.wrapping_add(1);
        }
        self.events.extend(new_events);
        if self.events.len() > MAX_EVENTS {
            let cut = self.events.len() - MAX_EVENTS;
            self.events.drain(..cut);
        }
        self.clamp_selection();
        self.clamp_inbox();
    }

    pub fn set_workers(&mut self, workers: Vec<WorkerRecord>) {
        self.workers = workers;
    }

    /// The workers counted and listed: dead ones (offline, or silent for longer than the
    /// offline threshold) leave the view.
    pub fn online_workers(&self) -> impl Iterator<Item = &WorkerRecord> {
        let (now, after) = (self.wall, self.worker_offline_after);
        self.workers.iter().filter(move |w| w.online(now, after))
    }

    /// The loaded detail of an inbox item; ignored if the operator moved on meanwhile.
    pub fn set_inbox_detail(&mut self, detail: InboxDetail) {
        if self.inbox_ui.open == Some(detail.task_pk) {
            self.inbox_ui.detail = Some(detail);
        }
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
        self.clamp_inbox();
    }

    fn clamp_inbox(&mut self) {
        let items = self.inbox();
        self.inbox_ui.follow(&items);
    }

    pub fn set_finished(&mut self, summary: RunSummary) {
        self.summary = Some(summary);
        self.finished_at.get_or_insert(self.now);
        self.takeover = None;
        self.popups
            .retain(|p| !matches!(p, Popup::Confirm(Confirm::Quit { .. })));
    }

    /// The serving engine has work again: the run is not over any more.
    pub fn clear_finished(&mut self) {
        self.summary = None;
        self.finished_at = None;
    }

    pub fn set_engine_error(&mut self, message: String) {
        self.engine_error = Some(message);
        self.takeover = None;
    }

    pub fn set_status(&mut self, text: impl Into<String>, level: Level) {
        self.status = Some((text.into(), level));
    }

    // ---- derived ---------------------------------------------------------------------------

    /// How many agents wait for someone to type into their terminal.
    pub fn waiting_input(&self) -> usize {
        self.panes.iter().filter(|p| p.waiting_input).count()
    }

    pub fn finished(&self) -> bool {
        self.summary.is_some() || self.engine_error.is_some()
    }

    /// The derived data (see [`super::derived`]); the task list must change through
    /// [`Self::set_data`] for it to follow.
    fn derived(&self) -> (MutexGuard<'_, Derived>, DataKey) {
        let key = DataKey::of(self.tasks_generation, self.events_generation, &self.tasks);
        let guard = self.derived.lock().unwrap_or_else(PoisonError::into_inner);
        (guard, key)
    }

    pub fn counts(&self) -> Counts {
        let (mut d, key) = self.derived();
        d.tasks(key, &self.tasks).counts
    }

    /// The task with this pk.
    pub fn task_by_pk(&self, pk: i64) -> Option<&TaskRecord> {
        let (mut d, key) = self.derived();
        let i = d.tasks(key, &self.tasks).index_of(pk)?;
        self.tasks.get(i).filter(|t| t.pk == pk)
    }

    /// Tasks held by another worker while no pane of this console shows them, in task order.
    pub fn tasks_held_elsewhere(&self) -> Vec<&TaskRecord> {
        let (mut d, key) = self.derived();
        d.tasks(key, &self.tasks)
            .leased
            .iter()
            .filter_map(|&i| self.tasks.get(i))
            .filter(|t| self.held_elsewhere(t))
            .collect()
    }

    /// The run's time: to now, or to its finish.
    pub fn elapsed(&self) -> Duration {
        self.finished_at
            .unwrap_or(self.now)
            .saturating_duration_since(self.started)
    }

    pub fn budget(&self) -> BudgetFigures {
        let spent = self.plan.as_ref().map(|p| p.spent).unwrap_or_default();
        let limit = self.plan.as_ref().and_then(|p| p.budget);
        budget_figures(spent, limit, self.elapsed())
    }

    /// Tasks matching the filter (id, status, agent, description; case-insensitive). Builds a
    /// list of them all: a view draws [`Self::visible_range`] instead.
    pub fn visible_tasks(&self) -> Vec<&TaskRecord> {
        self.visible_range(0, usize::MAX)
    }

    /// How many tasks match the filter.
    pub fn visible_count(&self) -> usize {
        let (mut d, key) = self.derived();
        d.visible(key, &self.tasks, &self.filter.text)
            .len(&self.tasks)
    }

    /// The matching tasks from row `start` to before `end` (clamped): only the rows on screen.
    pub fn visible_range(&self, start: usize, end: usize) -> Vec<&TaskRecord> {
        let (mut d, key) = self.derived();
        let v = d.visible(key, &self.tasks, &self.filter.text);
        let end = end.min(v.len(&self.tasks));
        (start.min(end)..end)
            .filter_map(|row| v.index(row, self.tasks.len()))
            .filter_map(|i| self.tasks.get(i))
            .collect()
    }

    /// The matching task at row `row`.
    pub fn visible_task(&self, row: usize) -> Option<&TaskRecord> {
        let (mut d, key) = self.derived();
        let i = d
            .visible(key, &self.tasks, &self.filter.text)
            .index(row, self.tasks.len())?;
        self.tasks.get(i)
    }

    pub fn selected_task(&self) -> Option<&TaskRecord> {
        self.visible_task(self.selected)
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

    /// Every task waiting for a human.
    pub fn inbox(&self) -> Vec<InboxItem> {
        let (mut d, key) = self.derived();
        d.inbox(
            key,
            &self.tasks,
            &self.panes,
            &self.events,
            &self.waiting_handoffs,
        )
        .items
        .clone()
    }

    /// How many tasks wait for a human.
    pub fn inbox_len(&self) -> usize {
        let (mut d, key) = self.derived();
        d.inbox(
            key,
            &self.tasks,
            &self.panes,
            &self.events,
            &self.waiting_handoffs,
        )
        .items
        .len()
    }

    /// The inbox item a decision applies to: the selected one in the inbox, else the selected
    /// task if it waits for a human.
    fn current_inbox_item(&self) -> Option<InboxItem> {
        let items = self.inbox();
        match self.view {
            View::Inbox => items.get(self.inbox_ui.selected).cloned(),
            _ => {
                let pk = self.selected_task()?.pk;
                items.into_iter().find(|i| i.task_pk == pk)
            }
        }
    }

    /// The inbox item being read, if any.
    pub fn open_inbox_target(&self) -> Option<InboxTarget> {
        let pk = self.inbox_ui.open?;
        self.inbox().iter().find(|i| i.task_pk == pk).map(target_of)
    }

    /// The marked items (in the inbox), else the current one.
    fn decision_targets(&self) -> Vec<InboxTarget> {
        let items = self.inbox();
        let marked: Vec<InboxTarget> = items
            .iter()
            .filter(|i| self.view == View::Inbox && self.inbox_ui.marked.contains(&i.task_pk))
            .map(target_of)
            .collect();
        if !marked.is_empty() {
            return marked;
        }
        self.current_inbox_item()
            .map(|i| vec![target_of(&i)])
            .unwrap_or_default()
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
        matches!(self.popups.last(), Some(Popup::Confirm(_) | Popup::Split))
    }

    /// Whether the top popup is a line of text being typed (the input layer then sends
    /// `Action::TextChar` and friends).
    pub fn wants_text(&self) -> bool {
        matches!(self.popups.last(), Some(Popup::Input { .. }))
    }

    fn clamp_selection(&mut self) {
        let n = self.visible_count();
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
        // The filter being typed, then the view on screen, take their keys first.
        match self.filter.key(&action) {
            super::views::FilterKey::Edited => {
                self.selected = 0;
                return Vec::new();
            }
            super::views::FilterKey::Closed => return Vec::new(),
            super::views::FilterKey::Passed => {}
        }
        if self.view == View::Inbox {
            use super::views::InboxKey;
            let items = self.inbox();
            match self.inbox_ui.key(&action, &items) {
                InboxKey::Open(item) => {
                    self.detail_scroll = 0;
                    return vec![Effect::LoadInboxDetail(target_of(&item))];
                }
                InboxKey::NothingToOpen => {
                    self.set_status("nothing waits for a human", Level::Info);
                    return Vec::new();
                }
                InboxKey::Closed => {
                    self.detail_scroll = 0;
                    return Vec::new();
                }
                InboxKey::Took => return Vec::new(),
                InboxKey::Passed => {}
            }
        }
        match action {
            Action::Quit => self.quit(),
            Action::Help => {
                self.popups.push(Popup::Help);
                Vec::new()
            }
            Action::TaskDetail
            | Action::Events
            | Action::Tasks
            | Action::Stats
            | Action::Budget
            | Action::Triz
            | Action::Inbox
            | Action::Workers
            | Action::Replay
            | Action::Diff
            | Action::NewPrd
            | Action::Challenge => self.view_key(action),
            Action::Approve
            | Action::Merge
            | Action::ApproveAll
            | Action::Reject
            | Action::SendBack
            | Action::Mark => self.decision_key(action),
            Action::AddTask
            | Action::ResetTask
            | Action::SplitTask
            | Action::SkipTask
            | Action::KillAttempt
            | Action::TogglePause => self.task_key(action),
            Action::MoveUp
            | Action::MoveDown
            | Action::First
            | Action::Last
            | Action::FocusNext
            | Action::FocusPrev
            | Action::Zoom
            | Action::Takeover
            | Action::Release
            | Action::Filter
            | Action::Back
            | Action::ScrollUp
            | Action::ScrollDown => self.move_key(action),
            Action::None
            | Action::FilterChar(_)
            | Action::FilterBackspace
            | Action::FilterDone
            | Action::Answer(_)
            | Action::TextChar(_)
            | Action::TextBackspace
            | Action::TextSubmit
            | Action::Resize(..) => Vec::new(),
        }
    }

    /// A key that opens a view (or switches back from it).
    fn view_key(&mut self, action: Action) -> Vec<Effect> {
        match action {
            Action::TaskDetail => self.open_detail(),
            Action::Events => self.switch(View::Events),
            Action::Tasks => self.switch(View::Tasks),
            Action::Stats => self.switch(View::Stats),
            Action::Budget => self.switch(View::Budget),
            Action::Triz => {
                self.triz = Some(self.triz_now());
                self.switch(View::Triz);
            }
            Action::Inbox => {
                self.inbox_ui.open = None;
                self.inbox_ui.detail = None;
                self.switch(View::Inbox);
            }
            Action::Workers => self.switch(View::Workers),
            Action::Replay => return self.open_replay(),
            Action::Diff => return self.open_diff(),
            Action::NewPrd | Action::Challenge if self.no_oneshot_agent.is_some() => {
                let why = self.no_oneshot_agent.clone().unwrap_or_default();
                self.set_status(
                    format!("{why} — install it or set [run] agent, then open the console again"),
                    Level::Warn,
                );
            }
            Action::NewPrd => {
                if self.wizard.is_none() {
                    self.wizard = Some(Wizard::new());
                }
                self.takeover = None;
                self.view = View::Wizard;
            }
            Action::Challenge => {
                if self.challenge.as_ref().is_some_and(|c| c.running) {
                    self.switch(View::Challenge);
                    return Vec::new();
                }
                self.challenge = Some(ChallengeView {
                    running: true,
                    ..ChallengeView::default()
                });
                self.view = View::Challenge;
                self.detail_scroll = 0;
                return vec![Effect::Challenge];
            }
            _ => {}
        }
        Vec::new()
    }

    /// A decision on the selected or marked inbox items.
    fn decision_key(&mut self, action: Action) -> Vec<Effect> {
        match action {
            Action::Approve => return self.approve(),
            Action::Merge => {
                let targets: Vec<InboxTarget> = self
                    .decision_targets()
                    .into_iter()
                    .filter(|t| t.kind == InboxKind::ReadyToMerge)
                    .collect();
                if targets.is_empty() {
                    self.set_status(
                        "m merges work that is ready to merge; nothing selected is",
                        Level::Info,
                    );
                } else {
                    return self.decide(targets, Decision::Merge);
                }
            }
            Action::ApproveAll => {
                let all: Vec<InboxTarget> = self.inbox().iter().map(target_of).collect();
                if all.is_empty() {
                    self.set_status("nothing waits for a human", Level::Info);
                } else {
                    self.popups.push(Popup::Confirm(Confirm::Approve(all)));
                }
            }
            Action::Reject | Action::SendBack => {
                let targets = self.decision_targets();
                if targets.is_empty() {
                    self.set_status(no_inbox_item(self.view), Level::Info);
                } else {
                    let purpose = if action == Action::Reject {
                        InputPurpose::Reject(targets)
                    } else {
                        InputPurpose::SendBack(targets)
                    };
                    self.popups.push(Popup::Input {
                        purpose,
                        text: String::new(),
                    });
                }
            }
            // Marking is the inbox's (above); elsewhere it does nothing.
            Action::Mark => {}
            _ => {}
        }
        Vec::new()
    }

    /// A change to the selected task or the plan, most asking first.
    fn task_key(&mut self, action: Action) -> Vec<Effect> {
        match action {
            Action::AddTask => self.popups.push(Popup::Input {
                purpose: InputPurpose::AddTask(AddStep::Description, TaskDraft::default()),
                text: String::new(),
            }),
            Action::ResetTask => self.ask_reset(),
            Action::SplitTask => return self.ask_split(),
            Action::SkipTask => match self.selected_task() {
                Some(t) if t.status.is_terminal() => {
                    let msg = format!("{} is {} already", t.id, t.status);
                    self.set_status(msg, Level::Info);
                }
                Some(t) => {
                    let id = t.id.clone();
                    self.popups.push(Popup::Confirm(Confirm::SkipTask(id)));
                }
                None => self.set_status("no task selected", Level::Info),
            },
            Action::KillAttempt => match self.target_pane().filter(|p| p.has_screen) {
                Some(p) => {
                    let (pk, id) = (p.task_pk, p.task_id.clone());
                    self.popups
                        .push(Popup::Confirm(Confirm::KillAttempt(pk, id)));
                }
                None => self.set_status("no running agent here to kill", Level::Info),
            },
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
            _ => {}
        }
        Vec::new()
    }

    /// Moving, scrolling, focus and zoom, the filter, back.
    fn move_key(&mut self, action: Action) -> Vec<Effect> {
        match action {
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
                    self.filter.editing = true;
                }
            }
            Action::Back => self.back(),
            Action::ScrollUp | Action::ScrollDown => {
                let delta = if action == Action::ScrollUp {
                    SCROLL_STEP
                } else {
                    -SCROLL_STEP
                };
                if self.view == View::Replay {
                    return vec![Effect::ScrollReplay(delta)];
                }
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
            _ => {}
        }
        Vec::new()
    }

    /// A key for the wizard (the input layer sends every key there while it is open).
    pub fn wizard_key(&mut self, key: crossterm::event::KeyEvent) -> Vec<Effect> {
        self.drive_wizard(|w, now| w.handle_key(key, now))
    }

    /// The outcome of a wizard step.
    pub fn wizard_reply(&mut self, reply: super::wizard::WizardReply) -> Vec<Effect> {
        self.drive_wizard(|w, now| w.apply(reply, now))
    }

    /// Runs one step of the open wizard (none: nothing happens), closes it when it is done, and
    /// turns what it asks for into effects.
    fn drive_wizard(
        &mut self,
        step: impl FnOnce(&mut Wizard, Instant) -> Vec<super::wizard::WizardEffect>,
    ) -> Vec<Effect> {
        let now = self.now;
        let Some(w) = self.wizard.as_mut() else {
            return Vec::new();
        };
        let fx = step(w, now);
        self.after_wizard();
        fx.into_iter()
            .map(|e| Effect::Wizard(Box::new(e)))
            .collect()
    }

    fn after_wizard(&mut self) {
        if self.wizard.as_ref().is_some_and(|w| w.closed) {
            self.wizard = None;
            if self.view == View::Wizard {
                self.view = View::Main;
            }
        }
    }

    pub fn set_challenge(&mut self, result: Result<String, String>) {
        self.challenge = Some(match result {
            Ok(text) => ChallengeView {
                running: false,
                text,
                error: None,
            },
            Err(e) => ChallengeView {
                running: false,
                text: String::new(),
                error: Some(e),
            },
        });
    }

    fn open_replay(&mut self) -> Vec<Effect> {
        if self.view == View::Replay {
            self.view = View::Main;
            return Vec::new();
        }
        let Some(task) = self.selected_task() else {
            self.set_status("no task selected", Level::Info);
            return Vec::new();
        };
        let (pk, id) = (task.pk, task.id.clone());
        if self.pane(pk).is_some_and(|p| p.has_screen) {
            // Still running: its live pane is the better view.
            self.zoom = Some(pk);
            self.focus = Focus::Pane(pk);
            self.view = View::Main;
            return Vec::new();
        }
        self.replay = Some(ReplayMeta {
            task_pk: pk,
            task_id: id.clone(),
            path: None,
            error: None,
        });
        self.takeover = None;
        self.view = View::Replay;
        vec![Effect::LoadReplay {
            task_pk: pk,
            task_id: id,
        }]
    }

    /// One field of the ad-hoc task typed: the next one is asked for, and the whole task goes
    /// through the decision gate before it is added; a field the gate refuses is asked again.
    fn add_task_step(&mut self, step: AddStep, mut draft: TaskDraft, line: String) -> Vec<Effect> {
        let split = |l: &str| -> Vec<String> {
            l.split(';')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect()
        };
        let ask = |step, draft| Popup::Input {
            purpose: InputPurpose::AddTask(step, draft),
            text: String::new(),
        };
        match step {
            AddStep::Description => {
                draft.description = line;
                let probe = crate::domain::TaskSpec {
                    description: draft.description.clone(),
                    acceptance_criteria: vec!["-".into()],
                    test_steps: vec!["-".into()],
                    ..Default::default()
                };
                if let Some(f) = crate::plan::gate::gate_failures(&probe).first() {
                    self.set_status(format!("{f}: {}", f.hint()), Level::Warn);
                    self.popups
                        .push(ask(AddStep::Description, TaskDraft::default()));
                } else {
                    self.popups.push(ask(AddStep::Criteria, draft));
                }
                Vec::new()
            }
            AddStep::Criteria => {
                draft.criteria = split(&line);
                self.popups.push(ask(AddStep::Tests, draft));
                Vec::new()
            }
            AddStep::Tests => {
                let spec = crate::domain::TaskSpec {
                    id: "ADHOC-1".into(),
                    description: draft.description.clone(),
                    acceptance_criteria: draft.criteria.clone(),
                    test_steps: split(&line),
                    ..Default::default()
                };
                match crate::plan::gate::gate_failures(&spec).first() {
                    Some(f) => {
                        self.set_status(format!("{f}: {}", f.hint()), Level::Warn);
                        let again = match f {
                            crate::plan::gate::GateFailure::NoTestSteps => AddStep::Tests,
                            _ => AddStep::Criteria,
                        };
                        self.popups.push(ask(again, draft));
                        Vec::new()
                    }
                    None => vec![Effect::AddTask(Box::new(spec))],
                }
            }
        }
    }

    fn open_diff(&mut self) -> Vec<Effect> {
        if self.view == View::Diff {
            self.view = View::Main;
            return Vec::new();
        }
        let Some(task) = self.selected_task() else {
            self.set_status("no task selected", Level::Info);
            return Vec::new();
        };
        let (pk, id) = (task.pk, task.id.clone());
        self.diff = Some(DiffMeta {
            task_pk: pk,
            task_id: id.clone(),
            loaded: None,
        });
        self.switch(View::Diff);
        vec![Effect::LoadDiff {
            task_pk: pk,
            task_id: id,
        }]
    }

    /// The diff view's content arrived; ignored if the operator moved on to another task.
    pub fn set_diff(
        &mut self,
        task_pk: i64,
        loaded: Result<(crate::workspace::DiffSource, crate::workspace::WorktreeDiff), String>,
    ) {
        if let Some(d) = self.diff.as_mut().filter(|d| d.task_pk == task_pk) {
            d.loaded = Some(loaded);
        }
    }

    /// Whether task `pk` is held by another worker (no local pane of this console runs it; a
    /// remote pane may show it).
    pub fn running_elsewhere(&self, pk: i64) -> bool {
        self.task_by_pk(pk).is_some_and(|t| self.held_elsewhere(t))
    }

    /// [`Self::running_elsewhere`] for a task at hand.
    pub fn held_elsewhere(&self, t: &TaskRecord) -> bool {
        t.status.is_leased()
            && self.own_worker.is_some()
            && t.worker_id.is_some()
            && t.worker_id != self.own_worker
            && !self
                .panes
                .iter()
                .any(|p| p.task_pk == t.pk && p.remote.is_none())
    }

    /// The replay's log was found (or not).
    pub fn set_replay(&mut self, task_pk: i64, result: Result<std::path::PathBuf, String>) {
        if let Some(r) = self.replay.as_mut().filter(|r| r.task_pk == task_pk) {
            match result {
                Ok(p) => r.path = Some(p),
                Err(e) => r.error = Some(e),
            }
        }
    }

    fn approve(&mut self) -> Vec<Effect> {
        let targets = self.decision_targets();
        match targets.len() {
            0 => {
                self.set_status(no_inbox_item(self.view), Level::Info);
                Vec::new()
            }
            1 if self.opened_without_change(&targets[0]) => {
                let target = targets.into_iter().next();
                if let Some(t) = target {
                    self.popups
                        .push(Popup::Confirm(Confirm::ApproveUnchanged(t)));
                }
                Vec::new()
            }
            1 => self.decide(targets, Decision::Approve),
            _ => {
                self.popups.push(Popup::Confirm(Confirm::Approve(targets)));
                Vec::new()
            }
        }
    }

    /// Whether `target` is a handoff whose loaded detail shows no change in its worktree.
    fn opened_without_change(&self, target: &InboxTarget) -> bool {
        target.kind == InboxKind::Handoff
            && self.inbox_ui.detail.as_ref().is_some_and(|d| {
                d.task_pk == target.task_pk && d.diff.as_ref().is_some_and(|d| d.files == 0)
            })
    }

    fn decide(&mut self, targets: Vec<InboxTarget>, decision: Decision) -> Vec<Effect> {
        for t in &targets {
            self.inbox_ui.marked.remove(&t.task_pk);
        }
        let what = match targets.as_slice() {
            [one] => one.task_id.clone(),
            many => format!("{} tasks", many.len()),
        };
        self.set_status(format!("{}: {what}…", decision.verb()), Level::Info);
        if self
            .inbox_ui
            .open
            .is_some_and(|pk| targets.iter().any(|t| t.task_pk == pk))
        {
            self.inbox_ui.open = None;
            self.inbox_ui.detail = None;
        }
        vec![Effect::Decide(targets, decision)]
    }

    fn handle_popup(&mut self, top: Popup, action: Action) -> Vec<Effect> {
        match top {
            Popup::Split => self.split_key(action),
            Popup::Help => {
                if !matches!(action, Action::Resize(..)) {
                    self.popups.pop();
                }
                Vec::new()
            }
            Popup::Input { purpose, mut text } => {
                match action {
                    Action::TextChar(c) => text.push(c),
                    Action::TextBackspace => {
                        text.pop();
                    }
                    Action::Back => {
                        self.popups.pop();
                        return Vec::new();
                    }
                    Action::TextSubmit => {
                        let line = text.trim().to_string();
                        if line.is_empty() {
                            self.set_status("type something first (Esc cancels)", Level::Warn);
                            return Vec::new();
                        }
                        self.popups.pop();
                        return match purpose {
                            InputPurpose::Reject(t) => self.decide(t, Decision::Reject(line)),
                            InputPurpose::SendBack(t) => self.decide(t, Decision::SendBack(line)),
                            InputPurpose::AddTask(step, draft) => {
                                self.add_task_step(step, draft, line)
                            }
                        };
                    }
                    _ => return Vec::new(),
                }
                if let Some(Popup::Input { text: slot, .. }) = self.popups.last_mut() {
                    *slot = text;
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
                    (Confirm::Approve(targets), 'y') => {
                        self.popups.pop();
                        self.decide(targets, Decision::Approve)
                    }
                    (Confirm::ApproveUnchanged(target), 'y') => {
                        self.popups.pop();
                        self.decide(vec![target], Decision::Approve)
                    }
                    (Confirm::SkipTask(id), 'y') => {
                        self.popups.pop();
                        self.set_status(format!("skipping {id}"), Level::Info);
                        vec![Effect::SkipTask(id)]
                    }
                    (Confirm::KillAttempt(pk, id), 'y') => {
                        self.popups.pop();
                        self.set_status(
                            format!("killing {id}'s agent; the attempt counts as failed"),
                            Level::Warn,
                        );
                        vec![Effect::KillAttempt(pk)]
                    }
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
                    (Confirm::Quit { .. }, 'f') => {
                        self.popups.pop();
                        self.draining = true;
                        self.set_status(
                            "nothing new starts; the console quits when the running agents finish (q again to stop them)",
                            Level::Warn,
                        );
                        vec![Effect::FinishAndQuit]
                    }
                    (
                        Confirm::Quit {
                            background: true, ..
                        },
                        key @ ('b' | 'd'),
                    ) => {
                        // b: only the running agents, to their end; d: the whole plan.
                        let whole_plan = key == 'd';
                        self.popups.pop();
                        self.draining = !whole_plan;
                        self.takeover = None;
                        vec![Effect::Background { whole_plan }]
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
        // This console's agents: another process's are not ours to stop or wait for.
        let claimed_here = self
            .tasks
            .iter()
            .filter(|t| t.status.is_leased() && !self.held_elsewhere(t))
            .count();
        let local = self.panes.iter().filter(|p| p.remote.is_none()).count();
        let running = local.max(claimed_here);
        if running == 0 {
            return vec![Effect::Quit];
        }
        self.popups.push(Popup::Confirm(Confirm::Quit {
            running,
            background: self.can_background,
        }));
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
                let n = self.visible_count() as i64;
                if n == 0 {
                    self.selected = 0;
                    return;
                }
                let next = (self.selected as i64).saturating_add(delta).clamp(0, n - 1);
                self.selected = next as usize;
            }
            View::Events => self.scroll_view(delta),
            View::TaskDetail
            | View::Triz
            | View::Stats
            | View::Inbox
            | View::Workers
            | View::Challenge
            | View::Replay
            | View::Diff
            | View::Wizard => self.scroll_view(delta),
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
            View::TaskDetail
            | View::Triz
            | View::Stats
            | View::Inbox
            | View::Workers
            | View::Challenge
            | View::Replay
            | View::Diff
            | View::Wizard => {
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
            Some(p) if p.remote.is_some() && !self.remote_takeover => {
                let msg = format!(
                    "{} runs in another worker: its pane is read-only ([remote] takeover = true on both sides lets you type into it)",
                    p.task_id
                );
                self.set_status(msg, Level::Info);
            }
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
                let msg = format!(
                    "{} has no terminal yet ({})",
                    p.task_id,
                    crate::tui::theme::badge_text(p.state)
                );
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
        } else if !self.filter.text.is_empty() {
            self.filter.text.clear();
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

fn target_of(item: &InboxItem) -> InboxTarget {
    InboxTarget {
        task_pk: item.task_pk,
        task_id: item.task_id.clone(),
        kind: item.kind,
    }
}

fn no_inbox_item(view: View) -> &'static str {
    if view == View::Inbox {
        "nothing waits for a human"
    } else {
        "the selected task does not wait for a human (H opens the inbox)"
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
