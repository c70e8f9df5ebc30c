//! The console's view of the queue. It loads the plan and all its tasks once, then follows the
//! plan's events: after each change it reads the events after the last one seen and reloads only
//! the tasks they name (with their children when one moved into or out of DONE, since their
//! `pending_deps` changed) and the plan row (spend). A full reload happens again only after a gap:
//! more events than one read takes, an event about a task not loaded, a plan-wide change (reset,
//! re-import) or a failed read. The trigger is the store's event watch (Postgres LISTEN/NOTIFY,
//! SQLite's in-process wakeup plus a cheap look at the newest event id for other processes), so
//! an idle console costs next to nothing however big its plan. The waiting handoffs (files) and
//! the workers (one query) are reloaded now and then, without reading events or the plan row:
//! those come with the watch.

use super::msg::{FeedData, Msg, TaskLoad};
use crate::agent::HandoffDir;
use crate::domain::Status;
use crate::store::{
    Event as StoreEvent, EventFilter, PlanRecord, Store, StoreResult, TaskRecord, event_types,
};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Notify, mpsc};

/// How often the handoff directories are looked at (the filesystem, not the database).
const HANDOFF_RELOAD: Duration = Duration::from_secs(10);
/// How often the workers list is reloaded. Beats come only every 30 s (see `engine::presence`),
/// but a worker joining or leaving shows at once in the list: one small query every few seconds
/// keeps the workers view current (it is also reloaded when an event names a worker it lacks).
const WORKERS_RELOAD: Duration = Duration::from_secs(5);
/// The longest the console waits without looking at the events, whatever the watch says.
const SAFETY_POLL: Duration = Duration::from_secs(30);
/// Events read at once; a read that fills it is a gap (a full reload follows).
const BATCH: i64 = 2_000;
/// How far back (in event ids) each read looks again: on Postgres an id is taken at insert and
/// a transaction may commit after one with a higher id; its events are not skipped as long as it
/// commits within this many ids.
const LOOKBACK: i64 = 256;

/// Follows the store (see the module comment). `reload` asks for a look at once, with the
/// workers and handoffs (the engine ended, or ran out of work).
pub(crate) async fn load_loop(
    store: Arc<dyn Store>,
    plan_id: String,
    handoff: HandoffDir,
    tx: mpsc::Sender<Msg>,
    reload: Arc<Notify>,
) {
    let mut watch = store.watch_events().await;
    let mut follow = Follow::default();
    let mut full = true;
    // Whether events may be new: the watch said so, the app asked, or the safety poll is due.
    let mut look = true;
    let now = Instant::now();
    let (mut next_handoffs, mut next_workers) = (now, now);
    let mut next_look = now + SAFETY_POLL;
    let mut known_workers: HashSet<String> = HashSet::new();
    loop {
        let now = Instant::now();
        let handoffs_due = full || now >= next_handoffs;
        let workers_due = full || now >= next_workers;
        look |= now >= next_look;
        let loaded = if full {
            follow.full(&*store, &plan_id).await.map(Some)
        } else if look {
            follow.incremental(&*store, &plan_id).await
        } else {
            Ok(None)
        };
        let loaded = match loaded {
            Ok(None) if handoffs_due || workers_due => follow.quiet().ok_or(Gap::Full).map(Some),
            other => other,
        };
        let send = match loaded {
            Ok(Some(mut d)) => {
                full = false;
                // A worker the list lacks did something: it joined since the last reload.
                let workers_due = workers_due
                    || d.events.iter().any(|e| {
                        e.worker_id
                            .as_ref()
                            .is_some_and(|w| !known_workers.contains(w))
                    });
                if look {
                    look = false;
                    next_look = Instant::now() + SAFETY_POLL;
                }
                if workers_due {
                    next_workers = Instant::now() + WORKERS_RELOAD;
                    d.workers = Some(match store.list_workers().await {
                        Ok(w) => {
                            known_workers = w.iter().map(|w| w.id.clone()).collect();
                            w
                        }
                        Err(e) => {
                            full = true;
                            let _ = tx.send(Msg::FeedFailed(e.to_string())).await;
                            continue;
                        }
                    });
                }
                if handoffs_due {
                    next_handoffs = Instant::now() + HANDOFF_RELOAD;
                    let (dir, plan) = (handoff.clone(), plan_id.clone());
                    d.handoffs = tokio::task::spawn_blocking(move || waiting_handoffs(&dir, &plan))
                        .await
                        .ok();
                }
                Some(Msg::Data(Box::new(d)))
            }
            Ok(None) => {
                look = false;
                next_look = Instant::now() + SAFETY_POLL;
                None
            }
            Err(Gap::Full) => {
                full = true;
                continue;
            }
            Err(Gap::Failed(e)) => {
                // A failed read may have lost track: the next one starts over.
                full = true;
                Some(Msg::FeedFailed(e))
            }
        };
        if let Some(m) = send
            && tx.send(m).await.is_err()
        {
            return;
        }
        // A change seen, the safety poll, a reload's time, or the app asking: look.
        let until = next_handoffs
            .min(next_workers)
            .min(next_look)
            .saturating_duration_since(Instant::now());
        tokio::select! {
            changed = watch.changed(until.max(Duration::from_millis(1))) => look |= changed,
            _ = reload.notified() => {
                look = true;
                let now = Instant::now();
                (next_handoffs, next_workers) = (now, now);
            }
        }
        if full {
            // After a failure, not in a tight loop.
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

impl TaskLoad {
    /// Whether the load brings no task at all (nothing to put in place).
    pub fn is_empty(&self) -> bool {
        matches!(self, TaskLoad::Changed(c) if c.is_empty())
    }

    /// The task list after this load: all of it, or `current` with the changed tasks put in
    /// place (matched by pk; one the list does not have is added at the end).
    pub fn apply(self, current: &mut Vec<TaskRecord>) {
        let changed = match self {
            TaskLoad::All(all) => {
                *current = all;
                return;
            }
            TaskLoad::Changed(changed) => changed,
        };
        if changed.is_empty() {
            return;
        }
        let at: HashMap<i64, usize> = if changed.len() > 8 {
            current.iter().enumerate().map(|(i, t)| (t.pk, i)).collect()
        } else {
            HashMap::new()
        };
        for t in changed {
            let i = if at.is_empty() {
                current.iter().position(|c| c.pk == t.pk)
            } else {
                at.get(&t.pk).copied()
            };
            match i {
                Some(i) => current[i] = t,
                None => current.push(t),
            }
        }
    }
}

/// Why a load did not bring data.
enum Gap {
    /// Track was lost: load everything.
    Full,
    Failed(String),
}

impl From<crate::store::StoreError> for Gap {
    fn from(e: crate::store::StoreError) -> Self {
        Gap::Failed(e.to_string())
    }
}

/// What the feed knows between loads.
#[derive(Default)]
struct Follow {
    /// The newest event id seen.
    after: i64,
    /// Events up to this id are not news (the last full load covered them).
    floor: i64,
    /// Ids seen within [`LOOKBACK`] of `after` (the overlap read again each time).
    recent: BTreeSet<i64>,
    /// The plan's task ids, and for each the ids of the tasks that depend on it.
    known: HashSet<String>,
    children: HashMap<String, Vec<String>>,
    /// The plan row as last read (its spend changes only with events, which bring it again).
    plan: Option<PlanRecord>,
}

impl Follow {
    /// The plan, all its tasks and the recent past of its events.
    async fn full(&mut self, store: &dyn Store, plan_id: &str) -> Result<FeedData, Gap> {
        // The newest events first, so nothing written during the load is missed: what comes
        // after them is read by the next incremental look.
        let events = store
            .events(&EventFilter {
                plan_id: Some(plan_id.to_string()),
                limit: Some(super::model::MAX_EVENTS as i64),
                newest: true,
                ..Default::default()
            })
            .await?;
        let plan = store.get_plan(plan_id).await?;
        self.plan = Some(plan.clone());
        let tasks = store.list_tasks(plan_id).await?;
        self.known = tasks.iter().map(|t| t.id.clone()).collect();
        self.children.clear();
        for t in &tasks {
            for d in &t.spec.dependencies {
                self.children
                    .entry(d.clone())
                    .or_default()
                    .push(t.id.clone());
            }
        }
        self.recent.clear();
        // A reload after a gap sends only the events the console has not seen.
        let events: Vec<StoreEvent> = events.into_iter().filter(|e| e.id > self.after).collect();
        self.note(&events);
        // Older events are history, even those the overlap of the next read finds.
        self.floor = self.after;
        Ok(FeedData {
            plan,
            tasks: TaskLoad::All(tasks),
            events,
            workers: None,
            handoffs: None,
        })
    }

    /// The events after the last seen, and the tasks they name; `None` when nothing is new.
    async fn incremental(
        &mut self,
        store: &dyn Store,
        plan_id: &str,
    ) -> Result<Option<FeedData>, Gap> {
        let fetched = store
            .events(&EventFilter {
                plan_id: Some(plan_id.to_string()),
                after_id: Some((self.after - LOOKBACK).max(0)),
                limit: Some(BATCH),
                ..Default::default()
            })
            .await?;
        if fetched.len() as i64 >= BATCH {
            return Err(Gap::Full);
        }
        let events: Vec<StoreEvent> = fetched
            .into_iter()
            .filter(|e| e.id > self.floor && !self.recent.contains(&e.id))
            .collect();
        if events.is_empty() {
            return Ok(None);
        }
        let ids = match self.touched(&events) {
            Some(ids) => ids,
            None => return Err(Gap::Full),
        };
        self.note(&events);
        let plan = store.get_plan(plan_id).await?;
        self.plan = Some(plan.clone());
        let tasks = if ids.is_empty() {
            Vec::new()
        } else {
            load_tasks(store, plan_id, &ids).await?
        };
        Ok(Some(FeedData {
            plan,
            tasks: TaskLoad::Changed(tasks),
            events,
            workers: None,
            handoffs: None,
        }))
    }

    /// A load with nothing new, for the workers and handoffs to ride on; `None` before the first
    /// full load.
    fn quiet(&self) -> Option<FeedData> {
        Some(FeedData {
            plan: self.plan.clone()?,
            tasks: TaskLoad::Changed(Vec::new()),
            events: Vec::new(),
            workers: None,
            handoffs: None,
        })
    }

    /// The ids of the tasks `events` changed (with the children of those that moved into or out
    /// of DONE); `None` when they need a full reload.
    fn touched(&self, events: &[StoreEvent]) -> Option<Vec<String>> {
        let mut ids = BTreeSet::new();
        for e in events {
            if matches!(
                e.event_type.as_str(),
                // A split deletes a task: only a full load drops it from the list.
                event_types::PLAN_RESET | event_types::PLAN_UPDATED | event_types::TASK_SPLIT
            ) {
                return None;
            }
            let Some(id) = &e.task_id else { continue };
            if !self.known.contains(id) {
                return None;
            }
            ids.insert(id.clone());
            let done = |s: Option<Status>| s == Some(Status::Done);
            if done(e.from_status) || done(e.to_status) {
                ids.extend(self.children.get(id).into_iter().flatten().cloned());
            }
        }
        Some(ids.into_iter().collect())
    }

    fn note(&mut self, events: &[StoreEvent]) {
        for e in events {
            self.recent.insert(e.id);
            self.after = self.after.max(e.id);
        }
        let floor = self.after - LOOKBACK;
        self.recent = self.recent.split_off(&floor);
    }
}

async fn load_tasks(
    store: &dyn Store,
    plan_id: &str,
    ids: &[String],
) -> StoreResult<Vec<TaskRecord>> {
    store.tasks_by_ids(plan_id, ids).await
}

/// The ids of `plan_id`'s tasks whose handoff directory has no answer yet. Unreadable
/// directories are left out (the inbox shows what can be answered).
fn waiting_handoffs(dir: &HandoffDir, plan_id: &str) -> BTreeSet<String> {
    dir.waiting(plan_id)
        .into_iter()
        .map(|m| m.task_id)
        .collect()
}
