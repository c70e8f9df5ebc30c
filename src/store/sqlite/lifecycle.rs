//! The end of a plan's life: archived (hidden from lists) or deleted (plan and tasks; the
//! events stay, the audit trail is append-only).

use super::Shared;
use super::tx::{Ev, WriteTx};
use crate::store::error::{StoreError, StoreResult};
use crate::store::event_types as et;
use crate::store::sql_common::parse_status;
use serde_json::json;

/// `archived_at` of the plan; `NotFound` when there is no such plan.
async fn archived_at(tx: &mut WriteTx<'_>, plan_id: &str) -> StoreResult<Option<i64>> {
    let row: Option<Option<i64>> = sqlx::query_scalar("SELECT archived_at FROM plans WHERE id = ?")
        .bind(plan_id)
        .fetch_optional(tx.conn())
        .await?;
    row.ok_or_else(|| StoreError::NotFound {
        kind: "plan",
        id: plan_id.to_string(),
    })
}

pub(super) async fn set_plan_archived(
    s: &Shared,
    plan_id: &str,
    archived: bool,
) -> StoreResult<()> {
    let mut tx = WriteTx::begin(s).await?;
    if archived_at(&mut tx, plan_id).await?.is_some() == archived {
        return Ok(());
    }
    let at = archived.then_some(tx.now);
    sqlx::query("UPDATE plans SET archived_at = ?, updated_at = ? WHERE id = ?")
        .bind(at)
        .bind(tx.now)
        .bind(plan_id)
        .execute(tx.conn())
        .await?;
    let ev = if archived {
        et::PLAN_ARCHIVED
    } else {
        et::PLAN_UNARCHIVED
    };
    tx.event(Ev::plan(ev, plan_id, json!({}))).await?;
    tx.commit().await?;
    Ok(())
}

pub(super) async fn delete_plan(s: &Shared, plan_id: &str) -> StoreResult<()> {
    let mut tx = WriteTx::begin(s).await?;
    archived_at(&mut tx, plan_id).await?;
    // BEGIN IMMEDIATE holds the writer lock: no claim can slip in between this check and the
    // delete.
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT task_id, status FROM tasks WHERE plan_id = ? ORDER BY ord, pk")
            .bind(plan_id)
            .fetch_all(tx.conn())
            .await?;
    for (task_id, status) in &rows {
        let status = parse_status(status, task_id)?;
        if status.is_leased() {
            return Err(StoreError::Refused {
                task_id: task_id.clone(),
                status,
                message: format!(
                    "plan {plan_id} has work running; stop its workers (or wait for them to \
                     finish) and delete it again"
                ),
            });
        }
    }
    // Tasks and their dependency edges go with the plan (ON DELETE CASCADE).
    sqlx::query("DELETE FROM plans WHERE id = ?")
        .bind(plan_id)
        .execute(tx.conn())
        .await?;
    tx.event(Ev::plan(
        et::PLAN_DELETED,
        plan_id,
        json!({ "tasks": rows.len() }),
    ))
    .await?;
    tx.commit().await?;
    Ok(())
}
