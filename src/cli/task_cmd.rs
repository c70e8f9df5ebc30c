//! `whilly task show|retry|skip ID`: one task's story, and steering it from the shell (what the
//! console's `r` and `S` do, without the console).

use super::args::TaskCommand;
use super::context::Context;
use super::exit;
use crate::engine::trail::event_line;
use crate::store::{EventFilter, Store, TaskRecord};

pub(crate) async fn run(ctx: &Context, cmd: TaskCommand) -> anyhow::Result<i32> {
    let store = ctx.store().await?;
    let (TaskCommand::Show { task_id, plan, .. }
    | TaskCommand::Retry { task_id, plan, .. }
    | TaskCommand::Skip { task_id, plan, .. }) = &cmd;
    let Some(task) = one_task(store.as_ref(), plan.as_deref(), task_id).await? else {
        return Ok(exit::FAILED);
    };
    match cmd {
        TaskCommand::Show { json, .. } => show(store.as_ref(), &task, json).await,
        TaskCommand::Retry { reason, .. } => {
            let t = store.reset_task(&task.plan_id, &task.id, &reason).await?;
            outln!(
                "{} (plan {}) is {} again: it runs at the next claim (was {})",
                t.id,
                t.plan_id,
                t.status,
                task.status
            );
            Ok(exit::OK)
        }
        TaskCommand::Skip { reason, .. } => {
            let t = store.skip_task(&task.plan_id, &task.id, &reason).await?;
            // A dependency is met only when DONE: the work a dependant builds on is not there.
            let waiting: Vec<String> = store
                .list_tasks(&t.plan_id)
                .await?
                .into_iter()
                .filter(|d| !d.status.is_terminal() && d.spec.dependencies.contains(&t.id))
                .map(|d| d.id)
                .collect();
            outln!(
                "{} (plan {}) is {}: it will not run",
                t.id,
                t.plan_id,
                t.status
            );
            if !waiting.is_empty() {
                let (verb, wait) = if waiting.len() == 1 {
                    ("depends", "waits")
                } else {
                    ("depend", "wait")
                };
                outln!(
                    "{} {verb} on it and {wait} (a dependency is met only when DONE): skip {} too, or `whilly task retry {}` later",
                    waiting.join(", "),
                    if waiting.len() == 1 { "it" } else { "them" },
                    t.id
                );
            }
            Ok(exit::OK)
        }
    }
}

/// The task `task_id` of `plan`, or of the one plan that has it; `None` (said on stderr) when
/// there is none, or several and no `--plan`.
async fn one_task(
    store: &dyn Store,
    plan: Option<&str>,
    task_id: &str,
) -> anyhow::Result<Option<TaskRecord>> {
    let mut found = store.find_task(plan, task_id).await?;
    match found.len() {
        1 => Ok(found.pop()),
        0 => {
            match plan {
                Some(p) => errln!(
                    "error: plan {p} has no task {task_id} (`whilly plan show {p}` lists them)"
                ),
                None => errln!(
                    "error: no plan has a task {task_id} (`whilly plan list`, then `whilly plan show PLAN`)"
                ),
            }
            Ok(None)
        }
        _ => {
            let plans: Vec<&str> = found.iter().map(|t| t.plan_id.as_str()).collect();
            errln!(
                "error: task {task_id} is in plans {}: say which with --plan",
                plans.join(", ")
            );
            Ok(None)
        }
    }
}

async fn show(store: &dyn Store, t: &TaskRecord, json: bool) -> anyhow::Result<i32> {
    let events = store
        .events(&EventFilter {
            plan_id: Some(t.plan_id.clone()),
            task_id: Some(t.id.clone()),
            ..EventFilter::default()
        })
        .await?;
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "task": t, "events": events }))?
        );
        return Ok(exit::OK);
    }
    outln!(
        "{}  (plan {})  {}  attempts {}  cost ${:.2}  priority {}",
        t.id,
        t.plan_id,
        t.status,
        t.tries_text(),
        t.cost.as_f64(),
        t.priority
    );
    if let Some(r) = &t.reason {
        outln!("why: {r}");
    }
    if let Some(a) = &t.spec.agent {
        outln!("agent: {a}");
    }
    if let Some(w) = &t.worker_id {
        outln!("held by: {w}");
    }
    outln!(
        "what: {}",
        t.spec.description.lines().next().unwrap_or_default()
    );
    if !t.spec.dependencies.is_empty() {
        let mut deps = Vec::new();
        let mut status_of = std::collections::HashMap::new();
        for d in &t.spec.dependencies {
            let status = match store.get_task(&t.plan_id, d).await {
                Ok(dep) => {
                    status_of.insert(d.as_str(), dep.status);
                    dep.status.to_string()
                }
                Err(_) => "not in the plan".to_string(),
            };
            deps.push(format!("{d} ({status})"));
        }
        outln!("depends on: {}", deps.join(", "));
        if t.status == crate::domain::Status::Pending
            && let Some(why) = crate::engine::stuck::why_stuck(t, &status_of)
        {
            let first = t
                .spec
                .dependencies
                .iter()
                .find(|d| status_of.get(d.as_str()).is_some_and(|s| s.is_terminal()))
                .map_or("DEP", String::as_str);
            outln!(
                "{why}; it runs once that is DONE (`whilly task retry {first}`), or give it up too (`whilly task skip {}`)",
                t.id
            );
        }
    }
    outln!("events ({}):", events.len());
    for e in &events {
        outln!("  {}", event_line(e));
    }
    Ok(exit::OK)
}
