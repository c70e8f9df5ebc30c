//! `whilly worktrees list|prune`: the task worktrees of this repository and their disk usage.

use super::args::WorktreesCommand;
use super::context::Context;
use super::exit::{self, EnvironmentError};
use super::plan_view::table;
use crate::domain::doctor::human_size;
use crate::engine::configure::workspace_config;
use crate::workspace::{PruneSelection, Workspaces, WorktreeInfo};
use std::collections::HashSet;

pub(crate) async fn run(ctx: &Context, cmd: WorktreesCommand) -> anyhow::Result<i32> {
    let cfg = ctx.config()?;
    let ws = Workspaces::new(&ctx.repo_root, workspace_config(&cfg))
        .map_err(|e| EnvironmentError(e.to_string()))?;
    match cmd {
        WorktreesCommand::List { json } => {
            let list = ws.list()?;
            if json {
                let v: Vec<_> = list.iter().map(info_json).collect();
                outln!("{}", serde_json::to_string_pretty(&v)?);
                return Ok(exit::OK);
            }
            if list.is_empty() {
                outln!(
                    "No whilly worktrees for {} (they live under {}).",
                    ctx.repo_root.display(),
                    ws.worktrees_dir().display()
                );
                return Ok(exit::OK);
            }
            let mut rows = vec![vec![
                "PLAN/TASK".to_string(),
                "BRANCH".into(),
                "SIZE".into(),
                "STATE".into(),
                "PATH".into(),
            ]];
            let mut total = 0;
            for w in &list {
                total += w.size_bytes;
                rows.push(vec![
                    if w.pooled {
                        "(pool)".to_string()
                    } else {
                        format!(
                            "{}/{}",
                            w.plan_id.as_deref().unwrap_or("?"),
                            w.task_id.as_deref().unwrap_or("?")
                        )
                    },
                    w.branch.clone().unwrap_or_default(),
                    human_size(w.size_bytes),
                    if w.prunable {
                        "stale".into()
                    } else if !w.registered {
                        "stray".into()
                    } else if w.pooled {
                        "pooled (idle)".into()
                    } else {
                        "kept".into()
                    },
                    w.path.display().to_string(),
                ]);
            }
            out!("{}", table(&rows));
            let pooled = list.iter().filter(|w| w.pooled).count();
            outln!(
                "{} worktree{} ({pooled} idle in the pool of {}), {} on disk",
                list.len(),
                if list.len() == 1 { "" } else { "s" },
                ws.config().pool,
                human_size(total)
            );
            Ok(exit::OK)
        }
        WorktreesCommand::Prune {
            all,
            delete_branches,
        } => {
            // Without --all, a worktree is kept while its task may still run (not terminal).
            let mut active: HashSet<String> = HashSet::new();
            if !all && let Ok(store) = ctx.store().await {
                for p in store.list_plans().await? {
                    for t in store.list_tasks(&p.plan.id).await? {
                        if !t.status.is_terminal() {
                            active.insert(t.id.clone());
                        }
                    }
                }
            }
            let which = if all {
                PruneSelection::All
            } else {
                PruneSelection::KeepTasks(&active)
            };
            let report = ws.prune(which, delete_branches)?;
            let freed: u64 = report.removed.iter().map(|w| w.size_bytes).sum();
            for w in &report.removed {
                outln!("removed {}", w.path.display());
            }
            outln!(
                "{} removed ({} freed), {} kept{}",
                report.removed.len(),
                human_size(freed),
                report.kept.len(),
                if report.pruned_entries.is_empty() {
                    String::new()
                } else {
                    format!(", {} stale git entries pruned", report.pruned_entries.len())
                }
            );
            Ok(exit::OK)
        }
    }
}

fn info_json(w: &WorktreeInfo) -> serde_json::Value {
    serde_json::json!({
        "name": w.name, "path": w.path, "branch": w.branch, "plan_id": w.plan_id, "task_id": w.task_id,
        "size_bytes": w.size_bytes, "prunable": w.prunable, "registered": w.registered, "locked": w.locked, "pooled": w.pooled,
    })
}
