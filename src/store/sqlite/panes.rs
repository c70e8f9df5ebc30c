//! Remote panes on SQLite: watches, output chunks and typed keys (see migration 0005). Plain
//! statements on the writer pool: none of this is audit, so no events and no transactions
//! beyond the statement's own.

use super::Shared;
use super::rows::time;
use crate::store::sql_common::millis;
use crate::store::{PaneChunk, PaneInput, PaneWatch, StoreResult};
use sqlx::Row;
use std::time::Duration;

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

pub(super) async fn watch_pane(s: &Shared, task_pk: i64, viewer: &str) -> StoreResult<()> {
    let now = now_ms();
    sqlx::query(
        "INSERT INTO pane_watchers (task_pk, viewer, since, seen_at) VALUES (?1, ?2, ?3, ?3) \
         ON CONFLICT (task_pk, viewer) DO UPDATE SET seen_at = excluded.seen_at",
    )
    .bind(task_pk)
    .bind(viewer)
    .bind(now)
    .execute(&s.writer)
    .await?;
    Ok(())
}

pub(super) async fn unwatch_pane(s: &Shared, task_pk: i64, viewer: &str) -> StoreResult<()> {
    sqlx::query("DELETE FROM pane_watchers WHERE task_pk = ? AND viewer = ?")
        .bind(task_pk)
        .bind(viewer)
        .execute(&s.writer)
        .await?;
    Ok(())
}

/// A list of task pks as one bound JSON array (read with `json_each`): the statements stay
/// static whatever the list's length.
fn pk_list(task_pks: &[i64]) -> String {
    serde_json::Value::from(task_pks.to_vec()).to_string()
}

pub(super) async fn pane_watches(
    s: &Shared,
    task_pks: &[i64],
    ttl: Duration,
) -> StoreResult<Vec<PaneWatch>> {
    if task_pks.is_empty() {
        return Ok(Vec::new());
    }
    let cutoff = now_ms() - millis(ttl);
    // Stale watches are read past, and removed only when there are any (a read most times).
    let rows = sqlx::query(
        "SELECT task_pk, viewer, since, seen_at FROM pane_watchers \
         WHERE task_pk IN (SELECT value FROM json_each(?)) ORDER BY task_pk, viewer",
    )
    .bind(pk_list(task_pks))
    .fetch_all(&s.reader)
    .await?;
    let mut live = Vec::new();
    let mut stale = false;
    for r in rows {
        let seen: i64 = r.try_get("seen_at")?;
        if seen < cutoff {
            stale = true;
            continue;
        }
        live.push(PaneWatch {
            task_pk: r.try_get("task_pk")?,
            viewer: r.try_get("viewer")?,
            since: time(r.try_get("since")?)?,
        });
    }
    if stale {
        sqlx::query("DELETE FROM pane_watchers WHERE seen_at < ?")
            .bind(cutoff)
            .execute(&s.writer)
            .await?;
    }
    Ok(live)
}

pub(super) async fn publish_pane(s: &Shared, c: &PaneChunk) -> StoreResult<i64> {
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO pane_chunks (task_pk, attempt, snapshot, rows, cols, compressed, data, created_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
    )
    .bind(c.task_pk)
    .bind(c.attempt)
    .bind(c.snapshot)
    .bind(i64::from(c.rows))
    .bind(i64::from(c.cols))
    .bind(c.compressed)
    .bind(&c.data)
    .bind(now_ms())
    .fetch_one(&s.writer)
    .await?;
    Ok(id)
}

pub(super) async fn pane_chunks(
    s: &Shared,
    cursors: &[(i64, i64)],
    limit: i64,
) -> StoreResult<Vec<PaneChunk>> {
    if cursors.is_empty() {
        return Ok(Vec::new());
    }
    let pairs = serde_json::Value::from(
        cursors
            .iter()
            .map(|(pk, after)| serde_json::json!([pk, after]))
            .collect::<Vec<_>>(),
    )
    .to_string();
    let rows = sqlx::query(
        "SELECT p.id, p.task_pk, p.attempt, p.snapshot, p.rows, p.cols, p.compressed, p.data \
         FROM json_each(?1) AS c JOIN pane_chunks p \
           ON p.task_pk = json_extract(c.value, '$[0]') AND p.id > json_extract(c.value, '$[1]') \
         ORDER BY p.id LIMIT ?2",
    )
    .bind(pairs)
    .bind(limit.max(1))
    .fetch_all(&s.reader)
    .await?;
    rows.iter().map(chunk).collect()
}

fn chunk(r: &sqlx::sqlite::SqliteRow) -> StoreResult<PaneChunk> {
    let rows: i64 = r.try_get("rows")?;
    let cols: i64 = r.try_get("cols")?;
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
}

pub(super) async fn latest_pane_snapshot(s: &Shared, task_pk: i64) -> StoreResult<Option<i64>> {
    let id: Option<i64> =
        sqlx::query_scalar("SELECT MAX(id) FROM pane_chunks WHERE task_pk = ? AND snapshot = 1")
            .bind(task_pk)
            .fetch_one(&s.reader)
            .await?;
    Ok(id)
}

pub(super) async fn prune_pane(
    s: &Shared,
    task_pk: i64,
    before_id: Option<i64>,
) -> StoreResult<u64> {
    let done = match before_id {
        Some(before) => {
            sqlx::query("DELETE FROM pane_chunks WHERE task_pk = ? AND id < ?")
                .bind(task_pk)
                .bind(before)
                .execute(&s.writer)
                .await?
        }
        None => {
            sqlx::query("DELETE FROM pane_input WHERE task_pk = ?")
                .bind(task_pk)
                .execute(&s.writer)
                .await?;
            sqlx::query("DELETE FROM pane_chunks WHERE task_pk = ?")
                .bind(task_pk)
                .execute(&s.writer)
                .await?
        }
    };
    Ok(done.rows_affected())
}

pub(super) async fn send_pane_input(
    s: &Shared,
    task_pk: i64,
    viewer: &str,
    data: &[u8],
) -> StoreResult<()> {
    sqlx::query("INSERT INTO pane_input (task_pk, viewer, data, created_at) VALUES (?, ?, ?, ?)")
        .bind(task_pk)
        .bind(viewer)
        .bind(data)
        .bind(now_ms())
        .execute(&s.writer)
        .await?;
    Ok(())
}

pub(super) async fn take_pane_input(s: &Shared, task_pks: &[i64]) -> StoreResult<Vec<PaneInput>> {
    if task_pks.is_empty() {
        return Ok(Vec::new());
    }
    // Most polls find nothing: look on the reader first, delete only what is there.
    let any: Option<i64> = sqlx::query_scalar(
        "SELECT id FROM pane_input WHERE task_pk IN (SELECT value FROM json_each(?)) LIMIT 1",
    )
    .bind(pk_list(task_pks))
    .fetch_optional(&s.reader)
    .await?;
    if any.is_none() {
        return Ok(Vec::new());
    }
    let mut out = sqlx::query(
        "DELETE FROM pane_input WHERE task_pk IN (SELECT value FROM json_each(?)) \
         RETURNING id, task_pk, viewer, data",
    )
    .bind(pk_list(task_pks))
    .fetch_all(&s.writer)
    .await?
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
