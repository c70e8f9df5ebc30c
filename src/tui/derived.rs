//! What the views derive from the console's data — the header's counts, the filtered task
//! list, the inbox, the tasks by pk, the leased tasks — worked out again only when what it is
//! derived from changed, not once per frame: an idle frame must cost the same for 10 tasks as
//! for 100,000. Pure: [`super::state::AppState`] owns one and hands it its inputs.
//!
//! Each part is keyed by what it depends on. The task list and the events go by [`DataKey`]
//! (generations the state's data-in methods bump, with the list's length and address as a
//! guard against a list replaced behind their back); the small inputs (the filter, the panes' states, the waiting handoffs) are
//! compared by value, which costs next to nothing.

use super::model::{Counts, InboxItem, PaneMeta};
use crate::domain::Status;
use crate::engine::sessions::SessionState;
use crate::store::{Event, TaskRecord};
use std::collections::{BTreeSet, HashMap};

/// Which version of the task list and events a part was derived from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct DataKey {
    /// Bumped whenever the task list changes.
    pub tasks_generation: u64,
    pub tasks_len: usize,
    pub tasks_addr: usize,
    /// Bumped whenever events arrive (their count stops changing at the cap).
    pub events_generation: u64,
}

impl DataKey {
    pub(super) fn of(
        tasks_generation: u64,
        events_generation: u64,
        tasks: &[TaskRecord],
    ) -> DataKey {
        DataKey {
            tasks_generation,
            tasks_len: tasks.len(),
            tasks_addr: tasks.as_ptr() as usize,
            events_generation,
        }
    }

    /// The part of the key the task-only parts depend on.
    fn tasks_only(self) -> DataKey {
        DataKey {
            events_generation: 0,
            ..self
        }
    }
}

#[derive(Default)]
pub(super) struct Derived {
    tasks: Option<TasksPart>,
    visible: Option<VisiblePart>,
    inbox: Option<InboxPart>,
}

/// Derived from the task list alone.
pub(super) struct TasksPart {
    key: DataKey,
    pub counts: Counts,
    by_pk: HashMap<i64, usize>,
    /// Indices of the CLAIMED / IN_PROGRESS tasks (few, whatever the plan's size).
    pub leased: Vec<usize>,
}

impl TasksPart {
    pub(super) fn index_of(&self, pk: i64) -> Option<usize> {
        self.by_pk.get(&pk).copied()
    }
}

/// The filtered list: indices into the tasks, `None` when no filter is set (all of them, in
/// order, without a list of 100,000 indices).
pub(super) struct VisiblePart {
    key: DataKey,
    filter: String,
    pub rows: Option<Vec<usize>>,
}

impl VisiblePart {
    pub(super) fn len(&self, tasks: &[TaskRecord]) -> usize {
        self.rows.as_ref().map_or(tasks.len(), Vec::len)
    }

    /// The task index of visible row `row`.
    pub(super) fn index(&self, row: usize, tasks_len: usize) -> Option<usize> {
        match &self.rows {
            Some(rows) => rows.get(row).copied(),
            None => (row < tasks_len).then_some(row),
        }
    }
}

pub(super) struct InboxPart {
    key: DataKey,
    panes: Vec<(i64, SessionState)>,
    waiting: BTreeSet<String>,
    pub items: Vec<InboxItem>,
}

impl Derived {
    pub(super) fn tasks(&mut self, key: DataKey, tasks: &[TaskRecord]) -> &TasksPart {
        let key = key.tasks_only();
        if self.tasks.as_ref().is_some_and(|p| p.key != key) {
            self.tasks = None;
        }
        self.tasks.get_or_insert_with(|| tasks_part(key, tasks))
    }

    pub(super) fn visible(
        &mut self,
        key: DataKey,
        tasks: &[TaskRecord],
        filter: &str,
    ) -> &VisiblePart {
        let key = key.tasks_only();
        let needle = filter.trim().to_lowercase();
        if self
            .visible
            .as_ref()
            .is_some_and(|p| p.key != key || p.filter != needle)
        {
            self.visible = None;
        }
        self.visible.get_or_insert_with(|| {
            let rows = (!needle.is_empty()).then(|| {
                tasks
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| task_matches(t, &needle))
                    .map(|(i, _)| i)
                    .collect()
            });
            VisiblePart {
                key,
                filter: needle,
                rows,
            }
        })
    }

    pub(super) fn inbox(
        &mut self,
        key: DataKey,
        tasks: &[TaskRecord],
        panes: &[PaneMeta],
        events: &[Event],
        waiting: &BTreeSet<String>,
    ) -> &InboxPart {
        let same_panes = |p: &InboxPart| {
            p.panes.len() == panes.len()
                && p.panes
                    .iter()
                    .zip(panes)
                    .all(|(a, b)| *a == (b.task_pk, b.state))
        };
        if self
            .inbox
            .as_ref()
            .is_some_and(|p| p.key != key || !same_panes(p) || p.waiting != *waiting)
        {
            self.inbox = None;
        }
        self.inbox.get_or_insert_with(|| InboxPart {
            key,
            panes: panes.iter().map(|p| (p.task_pk, p.state)).collect(),
            waiting: waiting.clone(),
            items: inbox_items(tasks, panes, events, waiting),
        })
    }
}

fn tasks_part(key: DataKey, tasks: &[TaskRecord]) -> TasksPart {
    let mut c = Counts {
        total: tasks.len(),
        ..Counts::default()
    };
    let mut leased = Vec::new();
    let mut by_pk = HashMap::with_capacity(tasks.len());
    for (i, t) in tasks.iter().enumerate() {
        by_pk.insert(t.pk, i);
        match t.status {
            Status::Pending => c.pending += 1,
            Status::Claimed | Status::InProgress => {
                c.running += 1;
                leased.push(i);
            }
            Status::Done => c.done += 1,
            Status::Failed => c.failed += 1,
            Status::Skipped => c.skipped += 1,
            Status::Blocked | Status::HumanLoop => c.held += 1,
        }
    }
    TasksPart {
        key,
        counts: c,
        by_pk,
        leased,
    }
}

/// Whether the task matches a (lower-case) filter: id, status, description, agent, priority.
pub(super) fn task_matches(t: &TaskRecord, needle: &str) -> bool {
    t.id.to_lowercase().contains(needle)
        || t.status.as_str().to_lowercase().contains(needle)
        || t.spec.description.to_lowercase().contains(needle)
        || t.spec
            .agent
            .as_deref()
            .is_some_and(|a| a.to_lowercase().contains(needle))
        || t.priority.as_str().contains(needle)
}

/// The items, in task order: handoffs waiting for a human (this console's sessions, or any
/// process's handoff directory: `waiting`), then parked tasks.
pub(super) fn inbox_items(
    tasks: &[TaskRecord],
    panes: &[PaneMeta],
    events: &[Event],
    waiting: &BTreeSet<String>,
) -> Vec<InboxItem> {
    crate::engine::awaiting_human::inbox_items(tasks, events, |t| {
        waiting.contains(&t.id)
            || panes
                .iter()
                .any(|p| p.task_pk == t.pk && p.state == SessionState::WaitingForHuman)
    })
}

#[cfg(test)]
mod tests {
    use crate::domain::Status;
    use crate::store::event_types as et;
    use crate::tui::action::Action;
    use crate::tui::model::MAX_EVENTS;
    use crate::tui::msg::TaskLoad;
    use crate::tui::testkit::{demo_state, event, fixed_now, task};

    #[test]
    fn counts_and_the_filtered_list_follow_the_data_and_the_filter() {
        let mut s = demo_state(fixed_now());
        assert_eq!(s.counts().running, 2);
        assert_eq!(s.visible_count(), 6);
        for c in "pend".chars() {
            s.handle(Action::Filter);
            s.handle(Action::FilterChar(c));
        }
        let ids = |s: &crate::tui::state::AppState| -> Vec<String> {
            s.visible_tasks().iter().map(|t| t.id.clone()).collect()
        };
        assert_eq!(ids(&s), ["DOCS-5", "E2E-6"]);
        assert_eq!(s.visible_range(1, 10)[0].id, "E2E-6");
        assert_eq!(s.visible_task(2).map(|t| t.id.clone()), None);
        // A feed load that starts DOCS-5: counts, list and lookups follow it.
        let mut started = task(5, "DOCS-5", Status::InProgress);
        started.cost = crate::domain::Usd::from_f64(0.5);
        let plan = s.plan.clone().expect("plan");
        s.apply_feed(plan.clone(), TaskLoad::Changed(vec![started]), Vec::new());
        assert_eq!(ids(&s), ["E2E-6"]);
        assert_eq!(s.counts().running, 3);
        assert_eq!(s.counts().pending, 1);
        assert_eq!(
            s.task_by_pk(5).map(|t| t.cost),
            Some(crate::domain::Usd::from_f64(0.5))
        );
        s.handle(Action::Back);
        assert_eq!(s.visible_count(), 6);
        // A whole new list.
        s.set_data(plan, vec![task(9, "ONE-9", Status::Blocked)], Vec::new());
        assert_eq!(s.counts().total, 1);
        assert_eq!(s.counts().held, 1);
        assert_eq!(s.task_by_pk(1).map(|t| t.id.clone()), None);
        assert_eq!(s.inbox_len(), 1);
    }

    #[test]
    fn the_inbox_note_follows_events_once_their_count_is_capped() {
        let mut s = demo_state(fixed_now());
        let plan = s.plan.clone().expect("plan");
        let mut tasks = s.tasks.clone();
        tasks[4].status = Status::HumanLoop;
        let filler: Vec<_> = (100..100 + MAX_EVENTS as i64)
            .map(|id| event(id, et::TASK_COST, "AUTH-1", None, None))
            .collect();
        s.set_data(plan.clone(), tasks, filler);
        assert_eq!(s.events.len(), MAX_EVENTS);
        assert_eq!(s.inbox()[0].note, "");
        let mut parked = event(
            5000,
            et::TASK_HUMAN_LOOP,
            "DOCS-5",
            Some(Status::InProgress),
            Some(Status::HumanLoop),
        );
        parked.payload = serde_json::json!({"message": "which one?"});
        s.apply_feed(plan, TaskLoad::Changed(Vec::new()), vec![parked]);
        assert_eq!(s.events.len(), MAX_EVENTS);
        assert_eq!(s.inbox()[0].note, "which one?");
    }

    #[test]
    fn the_leased_tasks_held_elsewhere_are_listed_without_a_pane() {
        let mut s = demo_state(fixed_now());
        let plan = s.plan.clone().expect("plan");
        let mut tasks = s.tasks.clone();
        tasks[1].worker_id = Some("there".into());
        s.set_data(plan, tasks, Vec::new());
        s.own_worker = Some("here".into());
        s.set_panes(Vec::new());
        let ids: Vec<_> = s
            .tasks_held_elsewhere()
            .iter()
            .map(|t| t.id.clone())
            .collect();
        assert_eq!(ids, ["API-2"]);
    }
}
