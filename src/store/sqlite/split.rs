//! Splitting an unstarted task into its subtasks: one transaction (see `Store::split_task`).
//! What is written is decided by `sql_common::plan_split`, as in the Postgres store; the rows
//! and edges go in through the import's own helpers.

use super::Shared;
use super::import::{NewRow, insert_edges, insert_tasks, recount_pending};
use super::tx::WriteTx;
use crate::domain::{Status, TaskSpec, TaskSplit};
use crate::store::error::StoreResult;
use crate::store::sql_common::{SplitRow, decode_json, encode_json, parse_status, plan_split};
use crate::store::types::SplitReport;
use std::collections::HashMap;

pub(super) async fn split_task(
    s: &Shared,
    plan_id: &str,
    split: &TaskSplit,
) -> StoreResult<SplitReport> {
    // BEGIN IMMEDIATE holds the writer lock: no claim can take the parent between the check
    // and the delete.
    let mut tx = WriteTx::begin(s).await?;
    let parent = tx.task_by_id(plan_id, &split.parent).await?;
    let stored: Vec<(i64, i64, String, String)> = sqlx::query_as(
        "SELECT pk, ord, status, spec FROM tasks WHERE plan_id = ? ORDER BY ord, pk",
    )
    .bind(plan_id)
    .fetch_all(tx.conn())
    .await?;
    let mut rows = Vec::with_capacity(stored.len());
    let mut parent_ord = 0;
    for (pk, ord, status, spec) in &stored {
        if *pk == parent.pk {
            parent_ord = *ord;
        }
        rows.push(SplitRow {
            pk: *pk,
            status: parse_status(status, "tasks.status")?,
            spec: decode_json::<TaskSpec>(spec, "tasks.spec")?,
        });
    }
    let plan = plan_split(plan_id, &parent, &rows, split)?;

    let n = i64::try_from(plan.subtasks.len()).unwrap_or(i64::MAX);
    sqlx::query("UPDATE tasks SET ord = ord + ? WHERE plan_id = ? AND ord > ?")
        .bind(n - 1)
        .bind(plan_id)
        .bind(parent_ord)
        .execute(tx.conn())
        .await?;
    // The parent's edges (both ways) go with its row (ON DELETE CASCADE).
    sqlx::query("DELETE FROM tasks WHERE pk = ?")
        .bind(parent.pk)
        .execute(tx.conn())
        .await?;
    let mut new_rows = Vec::with_capacity(plan.subtasks.len());
    for (i, t) in plan.subtasks.iter().enumerate() {
        let ord = parent_ord + i64::try_from(i).unwrap_or(i64::MAX);
        new_rows.push(NewRow::new(
            t,
            ord,
            Status::Pending,
            None,
            plan.default_max_attempts,
        )?);
    }
    insert_tasks(&mut tx, plan_id, &new_rows).await?;
    for (pk, spec) in &plan.dependents {
        sqlx::query("UPDATE tasks SET spec = ?, updated_at = ? WHERE pk = ?")
            .bind(encode_json(spec, "task spec")?)
            .bind(tx.now)
            .bind(pk)
            .execute(tx.conn())
            .await?;
    }
    let pks: HashMap<String, i64> =
        sqlx::query_as("SELECT task_id, pk FROM tasks WHERE plan_id = ?")
            .bind(plan_id)
            .fetch_all(tx.conn())
            .await?
            .into_iter()
            .collect();
    let mut edges = Vec::new();
    let rewired = plan
        .subtasks
        .iter()
        .chain(plan.dependents.iter().map(|(_, t)| t));
    for t in rewired {
        let Some(&child) = pks.get(&t.id) else {
            continue;
        };
        edges.extend(
            t.dependencies
                .iter()
                .filter_map(|d| pks.get(d).map(|&p| (child, p))),
        );
    }
    insert_edges(&mut tx, &edges).await?;
    recount_pending(&mut tx, plan_id).await?;
    tx.events_bulk(plan.events).await?;
    tx.wake();
    tx.commit().await?;
    Ok(plan.report)
}
