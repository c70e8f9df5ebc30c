//! The end of a plan's life: archived (hidden from lists) or deleted (plan and tasks; the
//! events stay, the audit trail is append-only).

use super::Inner;
use super::lease::retrying;
use super::rows::parse_status;
use super::tx::{Ev, Tx};
use crate::store::event_types as et;
use crate::store::{StoreError, StoreResult};
use chrono::{DateTime, Utc};
use serde_json::json;

/// Locks the plan row; its `archived_at`. `NotFound` when there is no such plan.
async fn lock_plan(tx: &mut Tx, plan_id: &str) -> StoreResult<Option<DateTime<Utc>>> {
    let row: Option<Option<DateTime<Utc>>> =
        sqlx::query_scalar("SELECT archived_at FROM plans WHERE id = $1 FOR UPDATE")
            .bind(plan_id)
            .fetch_optional(&mut *tx.tx)
            .await?;
    row.ok_or_else(|| StoreError::NotFound {
        kind: "plan",
        id: plan_id.to_string(),
    })
}

pub(super) async fn set_plan_archived(
    inner: &Inner,
    plan_id: &str,
    archived: bool,
) -> StoreResult<()> {
    retrying(|| async {
        let mut tx = Tx::begin(inner).await?;
        if lock_plan(&mut tx, plan_id).await?.is_some() == archived {
            return Ok(());
        }
        sqlx::query(
            "UPDATE plans SET archived_at = CASE WHEN $2 THEN now() END, updated_at = now() \
             WHERE id = $1",
        )
        .bind(plan_id)
        .bind(archived)
        .execute(&mut *tx.tx)
        .await?;
        let ev = if archived {
            et::PLAN_ARCHIVED
        } else {
            et::PLAN_UNARCHIVED
        };
        tx.event(Ev::plan(ev, plan_id, json!({}))).await?;
        tx.commit(inner).await?;
        Ok(())
    })
    .await
}

pub(super) async fn delete_plan(inner: &Inner, plan_id: &str) -> StoreResult<()> {
    retrying(|| async {
        let mut tx = Tx::begin(inner).await?;
        lock_plan(&mut tx, plan_id).await?;
        // Every task row locked: a claim running now is waited for (and then seen as leased),
        // a later one skips the rows and finds them gone.
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT task_id, status FROM tasks WHERE plan_id = $1 ORDER BY ord, pk FOR UPDATE",
        )
        .bind(plan_id)
        .fetch_all(&mut *tx.tx)
        .await?;
        for (task_id, status) in &rows {
            let status = parse_status(status, task_id)?;
            if status.is_leased() {
                return Err(StoreError::Refused {
                    task_id: task_id.clone(),
                    status,
                    message: format!(
                        "plan {plan_id} has work running; stop its workers (or wait for them \
                         to finish) and delete it again"
                    ),
                });
            }
        }
        // Tasks and their dependency edges go with the plan (ON DELETE CASCADE).
        sqlx::query("DELETE FROM plans WHERE id = $1")
            .bind(plan_id)
            .execute(&mut *tx.tx)
            .await?;
        tx.event(Ev::plan(
            et::PLAN_DELETED,
            plan_id,
            json!({ "tasks": rows.len() }),
        ))
        .await?;
        tx.commit(inner).await?;
        Ok(())
    })
    .await
}
