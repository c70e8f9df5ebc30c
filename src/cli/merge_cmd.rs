//! `whilly merge`: landing the work of tasks parked as ready to merge, the same way the
//! console's inbox does it (`engine::landing`).

use super::args::MergeArgs;
use super::context::Context;
use super::exit;
use crate::engine::configure::{merge_mode, workspace_config};
use crate::engine::decision::Source;
use crate::engine::landing::{self, LandError};
use crate::workspace::Workspaces;
use std::sync::Arc;

pub(crate) async fn run(ctx: &Context, args: MergeArgs) -> anyhow::Result<i32> {
    let cfg = ctx.config()?;
    let store = ctx.store().await?;
    let workspaces = Arc::new(
        Workspaces::new(&ctx.repo_root, workspace_config(&cfg))
            .map_err(|e| anyhow::anyhow!("{}: {e}", ctx.repo_root.display()))?,
    );
    // (plan, task) pairs to land.
    let mut targets: Vec<(String, String)> = Vec::new();
    let plans: Vec<String> = match &args.plan {
        Some(p) => {
            store.get_plan(p).await?;
            vec![p.clone()]
        }
        None => store
            .list_plans()
            .await?
            .into_iter()
            .map(|p| p.plan.id)
            .collect(),
    };
    let mut waiting = Vec::new();
    for plan in &plans {
        for t in store.list_tasks(plan).await? {
            if landing::waits_to_merge(&t) {
                waiting.push((plan.clone(), t.id.clone()));
            }
        }
    }
    if args.all {
        if waiting.is_empty() {
            outln!("No task is waiting to be merged.");
            return Ok(exit::OK);
        }
        targets = waiting;
    } else {
        for task in &args.tasks {
            let matches: Vec<_> = waiting.iter().filter(|(_, t)| t == task).collect();
            match matches.as_slice() {
                [one] => targets.push((*one).clone()),
                [] => {
                    // Say what the task is instead, when it exists.
                    if let Some(t) = store
                        .find_task(args.plan.as_deref(), task)
                        .await?
                        .into_iter()
                        .next()
                    {
                        anyhow::bail!(
                            "{task} (plan {}) is not waiting to be merged: it is {}{}",
                            t.plan_id,
                            t.status,
                            t.reason.map(|r| format!(" ({r})")).unwrap_or_default()
                        );
                    }
                    anyhow::bail!(
                        "no task {task:?} waits to be merged{}; `whilly plan show PLAN` lists the tasks",
                        args.plan
                            .as_deref()
                            .map(|p| format!(" in plan {p}"))
                            .unwrap_or_default()
                    );
                }
                many => anyhow::bail!(
                    "{task} waits to be merged in several plans ({}): name one with --plan",
                    many.iter()
                        .map(|(p, _)| p.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        }
    }
    let mode = merge_mode(&cfg);
    let mut code = exit::OK;
    for (plan, task) in targets {
        match landing::merge_parked(&store, &workspaces, &plan, &task, mode, Source::Cli).await {
            Ok(m) => outln!("{} — {} is DONE", m.text, m.task.id),
            Err(e @ (LandError::NotYet { .. } | LandError::NotWaiting { .. })) => {
                errln!("whilly: {e}");
                code = exit::FAILED;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(code)
}
