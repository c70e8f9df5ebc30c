//! Shell completion of what lives in the queue: plan ids and task ids, read from the store of
//! the repository the shell is in (clap_complete's dynamic engine: `source <(COMPLETE=bash
//! whilly)`). A completion never creates a queue, and a queue that does not answer in a
//! moment completes nothing rather than hanging the shell.

use super::context::Context;
use super::global_args::GlobalArgs;
use crate::store::open::{self, DatabaseTarget};
use crate::store::{PlanSummary, Store};
use clap_complete::engine::{CompletionCandidate, PathCompleter, ValueCompleter};
use std::ffi::OsStr;
use std::sync::Arc;
use std::time::Duration;

/// Ids of the imported plans that are not archived.
pub(crate) fn plan_ids(current: &OsStr) -> Vec<CompletionCandidate> {
    let prefix = current.to_string_lossy();
    read_queue(|store| async move { store.list_plans().await })
        .into_iter()
        .filter(|p| p.plan.archived_at.is_none() && p.plan.id.starts_with(prefix.as_ref()))
        .map(plan_candidate)
        .collect()
}

/// A PLAN: a plan file, or an imported plan's id.
pub(crate) fn plan_or_file(current: &OsStr) -> Vec<CompletionCandidate> {
    let mut out = plan_ids(current);
    out.extend(PathCompleter::any().complete(current));
    out
}

/// Ids of the tasks of the plans that are not archived; the plan is the candidate's help.
pub(crate) fn task_ids(current: &OsStr) -> Vec<CompletionCandidate> {
    let prefix = current.to_string_lossy().into_owned();
    let tasks = read_queue(|store| async move {
        let mut out = Vec::new();
        for p in store.list_plans().await? {
            if p.plan.archived_at.is_some() {
                continue;
            }
            for t in store.list_tasks(&p.plan.id).await? {
                if t.id.starts_with(&prefix) {
                    out.push((t.id, p.plan.id.clone()));
                }
            }
        }
        Ok(out)
    });
    tasks
        .into_iter()
        .map(|(task, plan)| CompletionCandidate::new(task).help(Some(plan.into())))
        .collect()
}

fn plan_candidate(p: PlanSummary) -> CompletionCandidate {
    let help = format!(
        "{} · {}/{} done",
        p.plan.project,
        p.counts.get(crate::domain::Status::Done),
        p.counts.total
    );
    CompletionCandidate::new(p.plan.id).help(Some(help.into()))
}

/// Runs `f` on the queue of the repository around the current directory; nothing when there
/// is no repository, no queue yet, or no answer within a second.
fn read_queue<T, F, Fut>(f: F) -> Vec<T>
where
    F: FnOnce(Arc<dyn Store>) -> Fut,
    Fut: std::future::Future<Output = crate::store::StoreResult<Vec<T>>>,
{
    let global = GlobalArgs {
        repo: None,
        database_url: None,
        overrides: Vec::new(),
    };
    let Ok(ctx) = Context::new(global) else {
        return Vec::new();
    };
    if !ctx.in_repo {
        return Vec::new();
    }
    let Ok(target) = ctx.database_target() else {
        return Vec::new();
    };
    if let DatabaseTarget::Sqlite(path) = &target
        && !path.is_file()
    {
        return Vec::new();
    }
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return Vec::new();
    };
    rt.block_on(async {
        let opened =
            tokio::time::timeout(Duration::from_secs(1), open::open(&target, &ctx.repo_root)).await;
        let Ok(Ok(store)) = opened else {
            return Vec::new();
        };
        let out = tokio::time::timeout(Duration::from_secs(2), f(store.clone()))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        store.close().await;
        out
    })
}
