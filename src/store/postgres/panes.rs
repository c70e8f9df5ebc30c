//! Remote panes on Postgres: watches, output chunks and typed keys (see migration 0005). Plain
//! statements: none of this is audit, so no events; times are the database's clock.

use super::Inner;
use crate::store::sql_common::millis;
use crate::store::{PaneChunk, PaneInput, PaneWatch, StoreResult};
use sqlx::Row;
use std::time::Duration;

pub(super) async fn watch_pane(inner: &Inner, task_pk: i64, viewer: &str) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO pane_watchers (task_pk, viewer) VALUES ($1, $2) \
         ON CONFLICT (task_pk, viewer) DO UPDATE SET seen_at = now()",
    )
    .bind(task_pk)
    .bind(viewer)
    .execute(&inner.pool)
    .await?;
    Ok(())
}

pub(super) async fn unwatch_pane(inner: &Inner, task_pk: i64, viewer: &str) -> StoreResult<()> {
    sqlx::query("DELETE FROM pane_watchers WHERE task_pk = $1 AND viewer = $2")
        .bind(task_pk)
        .bind(viewer)
        .execute(&inner.pool)
        .await?;
    Ok(())
}

pub(super) async fn pane_watches(
    inner: &Inner,
    task_pks: &[i64],
    ttl: Duration,
) -> StoreResult<Vec<PaneWatch>> {
    if task_pks.is_empty() {
        return Ok(Vec::new());
    }
    let rows = sqlx::query(
        "SELECT task_pk, viewer, since, seen_at >= now() - $2 * interval '1 millisecond' AS live \
         FROM pane_watchers WHERE task_pk = ANY($1) ORDER BY task_pk, viewer",
    )
    .bind(task_pks)
    .bind(millis(ttl))
    .fetch_all(&inner.pool)
    .await?;
    let mut live = Vec::new();
    let mut stale = false;
    for r in rows {
        if !r.try_get::<bool, _>("live")? {
            stale = true;
            continue;
        }
        live.push(PaneWatch {
            task_pk: r.try_get("task_pk")?,
            viewer: r.try_get("viewer")?,
            since: r.try_get("since")?,
        });
    }
    if stale {
        sqlx::query(
            "DELETE FROM pane_watchers WHERE seen_at < now() - $1 * interval '1 millisecond'",
        )
        .bind(millis(ttl))
        .execute(&inner.pool)
        .await?;
    }
    Ok(live)
}

pub(super) async fn publish_pane(inner: &Inner, c: &PaneChunk) -> StoreResult<i64> {
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO pane_chunks (task_pk, attempt, snapshot, rows, cols, compressed, data) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
    )
    .bind(c.task_pk)
    .bind(c.attempt)
    .bind(c.snapshot)
    .bind(i32::from(c.rows))
    .bind(i32::from(c.cols))
    .bind(c.compressed)
    .bind(&c.data)
    .fetch_one(&inner.pool)
    .await?;
    Ok(id)
}

pub(super) async fn pane_chunks(
    inner: &Inner,
    cursors: &[(i64, i64)],
    limit: i64,
) -> StoreResult<Vec<PaneChunk>> {
    if cursors.is_empty() {
        return Ok(Vec::new());
    }
    let pks: Vec<i64> = cursors.iter().map(|c| c.0).collect();
    let afters: Vec<i64> = cursors.iter().map(|c| c.1).collect();
    let rows = sqlx::query(
        "SELECT p.id, p.task_pk, p.attempt, p.snapshot, p.rows, p.cols, p.compressed, p.data \
         FROM pane_chunks p JOIN unnest($1::bigint[], $2::bigint[]) AS c(task_pk, after_id) \
           ON p.task_pk = c.task_pk AND p.id > c.after_id \
         ORDER BY p.id LIMIT $3",
    )
    .bind(&pks)
    .bind(&afters)
    .bind(limit.max(1))
    .fetch_all(&inner.pool)
    .await?;
    rows.iter()
        .map(|r| {
            let rows: i32 = r.try_get("rows")?;
            let cols: i32 = r.try_get("cols")?;
            Ok(PaneChunk {
                id: r.try_get("id")?,
                task_pk: r.try_get("task_pk")?,
                attempt: r.try_get("attempt")?,
                snapshot: r.try_get("snapshot")?,
                rows: u16::try_from(rows).unwrap_or(u16::MAX),
                cols: u16::try_from(cols).unwrap_or(u16::MAX),
                compressed: r.try_get("compressed")?,
                data: r.try_get("data")?,
            })
        })
        .collect()
}

pub(super) async fn latest_pane_snapshot(inner: &Inner, task_pk: i64) -> StoreResult<Option<i64>> {
    let id: Option<i64> =
        sqlx::query_scalar("SELECT MAX(id) FROM pane_chunks WHERE task_pk = $1 AND snapshot")
            .bind(task_pk)
            .fetch_one(&inner.pool)
            .await?;
    Ok(id)
}

pub(super) async fn prune_pane(
    inner: &Inner,
    task_pk: i64,
    before_id: Option<i64>,
) -> StoreResult<u64> {
    let done = match before_id {
        Some(before) => {
            sqlx::query("DELETE FROM pane_chunks WHERE task_pk = $1 AND id < $2")
                .bind(task_pk)
                .bind(before)
                .execute(&inner.pool)
                .await?
        }
        None => {
            sqlx::query("DELETE FROM pane_input WHERE task_pk = $1")
                .bind(task_pk)
                .execute(&inner.pool)
                .await?;
            sqlx::query("DELETE FROM pane_chunks WHERE task_pk = $1")
                .bind(task_pk)
                .execute(&inner.pool)
                .await?
        }
    };
    Ok(done.rows_affected())
}

pub(super) async fn send_pane_input(
    inner: &Inner,
    task_pk: i64,
    viewer: &str,
    data: &[u8],
) -> StoreResult<()> {
    sqlx::query("INSERT INTO pane_input (task_pk, viewer, data) VALUES ($1, $2, $3)")
        .bind(task_pk)
        .bind(viewer)
        .bind(data)
        .execute(&inner.pool)
        .await?;
    Ok(())
}

pub(super) async fn take_pane_input(
    inner: &Inner,
    task_pks: &[i64],
) -> StoreResult<Vec<PaneInput>> {
    if task_pks.is_empty() {
        return Ok(Vec::new());
    }
    let rows = sqlx::query(
        "DELETE FROM pane_input WHERE task_pk = ANY($1) RETURNING id, task_pk, viewer, data",
    )
    .bind(task_pks)
    .fetch_all(&inner.pool)
    .await?;
    let mut out = rows
        .iter()
        .map(|r| {
            Ok(PaneInput {
                id: r.try_get("id")?,
                task_pk: r.try_get("task_pk")?,
                viewer: r.try_get("viewer")?,
                data: r.try_get("data")?,
            })
        })
        .collect::<StoreResult<Vec<_>>>()?;
    out.sort_by_key(|i| i.id);
    Ok(out)
}
