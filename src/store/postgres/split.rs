//! Splitting an unstarted task into its subtasks: one transaction (see `Store::split_task`).
//! What is written is decided by `sql_common::plan_split`, as in the SQLite store; the rows and
//! edges go in through the import's own helpers.

use super::Inner;
use super::import::{TaskColumns, insert_edges, insert_tasks, recount_pending};
use super::lease::retrying;
use super::rows::parse_status;
use super::tx::Tx;
use crate::domain::{Status, TaskSpec, TaskSplit};
use crate::store::sql_common::{SplitRow, plan_split};
use crate::store::{SplitReport, StoreError, StoreResult};

#[derive(sqlx::FromRow)]
struct Row {
    pk: i64,
    ord: i64,
    task_id: String,
    status: String,
    spec: serde_json::Value,
}

pub(super) async fn split_task(
    inner: &Inner,
    plan_id: &str,
    split: &TaskSplit,
) -> StoreResult<SplitReport> {
    retrying(|| split_once(inner, plan_id, split)).await
}

async fn split_once(inner: &Inner, plan_id: &str, split: &TaskSplit) -> StoreResult<SplitReport> {
    let mut tx = Tx::begin(inner).await?;
    // Every task row of the plan locked, as `delete_plan` does: a claim running now is waited
    // for (and then seen as leased), a later one skips the parent and finds it gone.
    let stored: Vec<Row> = sqlx::query_as(
        "SELECT pk, ord, task_id, status, spec FROM tasks WHERE plan_id = $1 ORDER BY ord, pk \
         FOR UPDATE",
    )
    .bind(plan_id)
    .fetch_all(&mut *tx.tx)
    .await?;
    let parent = tx.task_by_id(plan_id, &split.parent).await?;
    let mut rows = Vec::with_capacity(stored.len());
    let mut parent_ord = 0;
    for r in stored {
        let what = format!("task {plan_id}/{}", r.task_id);
        if r.pk == parent.pk {
            parent_ord = r.ord;
        }
        rows.push(SplitRow {
            pk: r.pk,
            status: parse_status(&r.status, &what)?,
            spec: serde_json::from_value::<TaskSpec>(r.spec).map_err(|e| {
                StoreError::Corrupt(format!("{what}: stored spec does not parse: {e}"))
            })?,
        });
    }
    let plan = plan_split(plan_id, &parent, &rows, split)?;

    let n = i64::try_from(plan.subtasks.len()).unwrap_or(i64::MAX);
    sqlx::query("UPDATE tasks SET ord = ord + $3 WHERE plan_id = $1 AND ord > $2")
        .bind(plan_id)
        .bind(parent_ord)
        .bind(n - 1)
        .execute(&mut *tx.tx)
        .await?;
    // The parent's edges (both ways) go with its row (ON DELETE CASCADE).
    sqlx::query("DELETE FROM tasks WHERE pk = $1")
        .bind(parent.pk)
        .execute(&mut *tx.tx)
        .await?;
    let mut cols = TaskColumns::default();
    for (i, t) in plan.subtasks.iter().enumerate() {
        let ord = parent_ord + i64::try_from(i).unwrap_or(i64::MAX);
        cols.push(0, ord, t, Status::Pending, None, plan.default_max_attempts)?;
    }
    let new_pks = insert_tasks(&mut tx, plan_id, &cols).await?;
    for (pk, spec) in &plan.dependents {
        let spec = serde_json::to_value(spec)
            .map_err(|e| StoreError::Invalid(format!("task {}: {e}", spec.id)))?;
        sqlx::query("UPDATE tasks SET spec = $2, updated_at = now() WHERE pk = $1")
            .bind(pk)
            .bind(spec)
            .execute(&mut *tx.tx)
            .await?;
    }
    let mut child = Vec::new();
    let mut dep = Vec::new();
    let subtasks = plan
        .subtasks
        .iter()
        .filter_map(|t| new_pks.get(&t.id).map(|pk| (*pk, t)));
    for (pk, t) in subtasks.chain(plan.dependents.iter().map(|(pk, t)| (*pk, t))) {
        for d in &t.dependencies {
            child.push(pk);
            dep.push(d.clone());
        }
    }
    insert_edges(&mut tx, plan_id, &child, &dep).await?;
    recount_pending(&mut tx, plan_id).await?;
    tx.events_batch(plan.events).await?;
    tx.wake(plan_id);
    tx.commit(inner).await?;
    Ok(plan.report)
}
