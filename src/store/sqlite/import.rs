//! Importing a plan: one transaction, multi-row inserts, idempotent on the plan id.

use super::Shared;
use super::tx::{Ev, WriteTx};
use crate::domain::graph::claim_keys;
use crate::domain::{PlanSpec, Status, TaskSpec};
use crate::store::error::StoreResult;
use crate::store::event_types as et;
use crate::store::sql_common::{
    ExistingTask, decode_json, effective_budget, effective_plan_id, encode_json, max_attempts_for,
    parse_status, payload, plan_changes, plan_import, plan_row_spec, task_writes,
};
use crate::store::types::{ImportOptions, ImportReport};
use sqlx::sqlite::Sqlite;
use sqlx::{QueryBuilder, Row};
use std::collections::HashMap;

/// A task row to insert (an import's new task, a split's subtask).
pub(super) struct NewRow<'t> {
    task: &'t TaskSpec,
    ord: i64,
    status: Status,
    reason: Option<String>,
    max_attempts: i64,
    tags: String,
    spec: String,
    claim_keys: String,
}

impl<'t> NewRow<'t> {
    pub(super) fn new(
        t: &'t TaskSpec,
        ord: i64,
        status: Status,
        reason: Option<String>,
        default_max_attempts: u32,
    ) -> StoreResult<NewRow<'t>> {
        Ok(NewRow {
            task: t,
            ord,
            status,
            reason,
            max_attempts: max_attempts_for(t, default_max_attempts),
            tags: encode_json(&t.tags, "task tags")?,
            spec: encode_json(t, "task spec")?,
            claim_keys: encode_json(&claim_keys(t), "task claim keys")?,
        })
    }
}

#[expect(
    clippy::too_many_lines,
    reason = "the import's writes are one transaction; the apply loop is shared with Postgres only in its decisions (sql_common)"
)]
pub(super) async fn import_plan(
    s: &Shared,
    plan: &PlanSpec,
    opts: &ImportOptions,
) -> StoreResult<ImportReport> {
    let plan_id = effective_plan_id(plan, opts);
    let row_spec = plan_row_spec(plan, opts);
    let row_spec_text = encode_json(&row_spec, "plan spec")?;
    let budget = effective_budget(plan, opts).map(|b| b.micros());

    let mut tx = WriteTx::begin(s).await?;
    let old_spec: Option<String> = sqlx::query_scalar("SELECT spec FROM plans WHERE id = ?")
        .bind(&plan_id)
        .fetch_optional(tx.conn())
        .await?;
    let mut existing = HashMap::new();
    let mut stored_order = Vec::new();
    let stored = sqlx::query(
        "SELECT pk, task_id, status, attempts, reason, spec FROM tasks WHERE plan_id = ? ORDER BY ord, pk",
    )
    .bind(&plan_id)
    .fetch_all(tx.conn())
    .await?;
    for r in &stored {
        let id: String = r.try_get("task_id")?;
        let spec: String = r.try_get("spec")?;
        existing.insert(
            id.clone(),
            ExistingTask {
                pk: r.try_get("pk")?,
                status: parse_status(&r.try_get::<String, _>("status")?, "tasks.status")?,
                attempts: r.try_get("attempts")?,
                spec: decode_json::<TaskSpec>(&spec, "tasks.spec")?,
            },
        );
        stored_order.push(id);
    }
    let decisions = plan_import(plan, opts, &existing)?;

    let mut report = ImportReport {
        plan_id: plan_id.clone(),
        ..Default::default()
    };
    let mut evs = Vec::new();
    match old_spec {
        None => {
            sqlx::query(
                "INSERT INTO plans (id, project, paused, budget_micros, spent_micros, \
                 reserved_micros, spec, created_at, updated_at) VALUES (?, ?, 0, ?, 0, 0, ?, ?, ?)",
            )
            .bind(&plan_id)
            .bind(&plan.project)
            .bind(budget)
            .bind(&row_spec_text)
            .bind(tx.now)
            .bind(tx.now)
            .execute(tx.conn())
            .await?;
            report.created_plan = true;
            evs.push(Ev::plan(
                et::PLAN_CREATED,
                &plan_id,
                payload::plan_created(&plan.project, plan.tasks.len(), row_spec.budget_usd),
            ));
        }
        Some(old) => {
            let old: PlanSpec = decode_json(&old, "plans.spec")?;
            let changed = plan_changes(&old, &row_spec);
            if !changed.is_empty() {
                sqlx::query(
                    "UPDATE plans SET project = ?, budget_micros = ?, spec = ?, updated_at = ? WHERE id = ?",
                )
                .bind(&plan.project)
                .bind(budget)
                .bind(&row_spec_text)
                .bind(tx.now)
                .bind(&plan_id)
                .execute(tx.conn())
                .await?;
                report.plan_changed = true;
                evs.push(Ev::plan(
                    et::PLAN_UPDATED,
                    &plan_id,
                    payload::fields_changed(&changed),
                ));
            }
        }
    }

    // Rows first (creates in bulk, updates one by one), then edges and readiness, then events:
    // the plan's, the updates', then the creations' (each group in file order).
    let writes = task_writes(
        &plan_id,
        plan,
        &decisions,
        &existing,
        stored_order,
        opts,
        &mut report,
    );
    let max = opts.default_max_attempts;
    let mut creates = Vec::with_capacity(writes.creates.len());
    for w in &writes.creates {
        creates.push(NewRow::new(w.task, w.ord, w.status, w.reason.clone(), max)?);
    }
    for w in &writes.updates {
        let (t, pk) = (w.task, w.pk.unwrap_or_default());
        sqlx::query(
            "UPDATE tasks SET status = ?, priority_rank = ?, max_attempts = ?, \
             estimate_micros = ?, reason = ?, required_tags = ?, spec = ?, claim_keys = ?, \
             updated_at = ? WHERE pk = ?",
        )
        .bind(w.status.as_str())
        .bind(t.priority.rank())
        .bind(max_attempts_for(t, max))
        .bind(t.budget_usd.map(|b| b.micros()))
        .bind(&w.reason)
        .bind(encode_json(&t.tags, "task tags")?)
        .bind(encode_json(t, "task spec")?)
        .bind(encode_json(&claim_keys(t), "task claim keys")?)
        .bind(tx.now)
        .bind(pk)
        .execute(tx.conn())
        .await?;
        if w.rewire {
            sqlx::query("DELETE FROM task_deps WHERE task_pk = ?")
                .bind(pk)
                .execute(tx.conn())
                .await?;
        }
    }
    let rewire: Vec<&TaskSpec> = writes
        .creates
        .iter()
        .chain(&writes.updates)
        .filter(|w| w.rewire)
        .map(|w| w.task)
        .collect();
    insert_tasks(&mut tx, &plan_id, &creates).await?;
    if !rewire.is_empty() {
        let pks: HashMap<String, i64> =
            sqlx::query_as("SELECT task_id, pk FROM tasks WHERE plan_id = ?")
                .bind(&plan_id)
                .fetch_all(tx.conn())
                .await?
                .into_iter()
                .collect();
        let mut edges = Vec::new();
        for t in &rewire {
            let Some(&child) = pks.get(&t.id) else {
                continue;
            };
            for d in &t.dependencies {
                if let Some(&parent) = pks.get(d) {
                    edges.push((child, parent));
                }
            }
        }
        insert_edges(&mut tx, &edges).await?;
    }
    if !report.created.is_empty() || !report.updated.is_empty() {
        recount_pending(&mut tx, &plan_id).await?;
        tx.wake();
    }
    evs.extend(writes.events);
    tx.events_bulk(evs).await?;
    tx.commit().await?;
    Ok(report)
}

/// `pending_deps` is data: recounted for the whole plan from its edges and their statuses.
pub(super) async fn recount_pending(tx: &mut WriteTx<'_>, plan_id: &str) -> StoreResult<()> {
    sqlx::query(
        "UPDATE tasks SET pending_deps = (SELECT COUNT(*) FROM task_deps d \
           JOIN tasks p ON p.pk = d.depends_on_pk WHERE d.task_pk = tasks.pk AND p.status != 'DONE') \
         WHERE plan_id = ?",
    )
    .bind(plan_id)
    .execute(tx.conn())
    .await?;
    Ok(())
}

pub(super) async fn insert_tasks(
    tx: &mut WriteTx<'_>,
    plan_id: &str,
    rows: &[NewRow<'_>],
) -> StoreResult<()> {
    // 13 values per row: well under SQLite's 32,766 bound parameters.
    const CHUNK: usize = 2_000;
    let now = tx.now;
    for chunk in rows.chunks(CHUNK) {
        let mut qb = QueryBuilder::<Sqlite>::new(
            "INSERT INTO tasks (plan_id, task_id, ord, status, priority_rank, max_attempts, \
             estimate_micros, reason, required_tags, spec, claim_keys, updated_at, pending_deps) ",
        );
        qb.push_values(chunk, |mut b, r| {
            let t = r.task;
            b.push_bind(plan_id.to_string())
                .push_bind(t.id.clone())
                .push_bind(r.ord)
                .push_bind(r.status.as_str())
                .push_bind(t.priority.rank())
                .push_bind(r.max_attempts)
                .push_bind(t.budget_usd.map(|b| b.micros()))
                .push_bind(r.reason.clone())
                .push_bind(r.tags.clone())
                .push_bind(r.spec.clone())
                .push_bind(r.claim_keys.clone())
                .push_bind(now)
                .push_bind(0i64);
        });
        qb.build().execute(tx.conn()).await?;
    }
    Ok(())
}

pub(super) async fn insert_edges(tx: &mut WriteTx<'_>, edges: &[(i64, i64)]) -> StoreResult<()> {
    const CHUNK: usize = 10_000;
    for chunk in edges.chunks(CHUNK) {
        let mut qb = QueryBuilder::<Sqlite>::new(
            "INSERT OR IGNORE INTO task_deps (task_pk, depends_on_pk) ",
        );
        qb.push_values(chunk, |mut b, (child, parent)| {
            b.push_bind(*child).push_bind(*parent);
        });
        qb.build().execute(tx.conn()).await?;
    }
    Ok(())
}
