//! Importing a plan: one transaction, batch statements (UNNEST) so 10,000 tasks stay fast.
//!
//! What happens to each task is decided by [`crate::store::sql_common::plan_import`], the same
//! pure function the SQLite store uses.

use super::Inner;
use super::rows::{PlanRow, parse_status, plan_cols};
use super::tx::{Ev, Tx};
use crate::domain::graph::claim_keys;
use crate::domain::{PlanSpec, Status, TaskSpec};
use crate::store::event_types as et;
use crate::store::sql_common::{
    ExistingTask, effective_budget, effective_plan_id, max_attempts_for, payload, plan_changes,
    plan_import, plan_row_spec, task_writes,
};
use crate::store::{ImportOptions, ImportReport, StoreError, StoreResult};
use std::collections::HashMap;

fn to_json<T: serde::Serialize>(v: &T, what: &str) -> StoreResult<serde_json::Value> {
    serde_json::to_value(v).map_err(|e| StoreError::Invalid(format!("{what}: {e}")))
}

/// Columns of task rows as parallel arrays, for `UNNEST` (an import's rows, a split's
/// subtasks).
#[derive(Default)]
pub(super) struct TaskColumns {
    pk: Vec<i64>,
    task_id: Vec<String>,
    ord: Vec<i64>,
    status: Vec<String>,
    priority_rank: Vec<i64>,
    max_attempts: Vec<i64>,
    estimate: Vec<Option<i64>>,
    reason: Vec<Option<String>>,
    tags: Vec<String>,
    spec: Vec<String>,
    claim_keys: Vec<String>,
}

impl TaskColumns {
    pub(super) fn push(
        &mut self,
        pk: i64,
        ord: i64,
        t: &TaskSpec,
        status: Status,
        reason: Option<String>,
        default_max_attempts: u32,
    ) -> StoreResult<()> {
        self.pk.push(pk);
        self.task_id.push(t.id.clone());
        self.ord.push(ord);
        self.status.push(status.as_str().to_string());
        self.priority_rank.push(t.priority.rank());
        self.max_attempts
            .push(max_attempts_for(t, default_max_attempts));
        self.estimate.push(t.budget_usd.map(|u| u.micros()));
        self.reason.push(reason);
        self.tags.push(to_json(&t.tags, "task tags")?.to_string());
        self.spec
            .push(to_json(t, &format!("task {}", t.id))?.to_string());
        self.claim_keys
            .push(to_json(&claim_keys(t), "task claim keys")?.to_string());
        Ok(())
    }

    fn is_empty(&self) -> bool {
        self.task_id.is_empty()
    }
}

#[derive(sqlx::FromRow)]
struct ExistingRow {
    pk: i64,
    task_id: String,
    status: String,
    attempts: i64,
    spec: serde_json::Value,
}

pub(super) async fn import_plan(
    inner: &Inner,
    plan: &PlanSpec,
    opts: &ImportOptions,
) -> StoreResult<ImportReport> {
    super::lease::retrying(|| import_once(inner, plan, opts)).await
}

#[expect(
    clippy::too_many_lines,
    reason = "the import's writes are one transaction; the apply loop is shared with SQLite only in its decisions (sql_common)"
)]
async fn import_once(
    inner: &Inner,
    plan: &PlanSpec,
    opts: &ImportOptions,
) -> StoreResult<ImportReport> {
    let plan_id = effective_plan_id(plan, opts);
    let row_spec = plan_row_spec(plan, opts);
    let budget = effective_budget(plan, opts);
    let spec_json = to_json(&row_spec, &format!("plan {plan_id}"))?;
    let mut report = ImportReport {
        plan_id: plan_id.clone(),
        ..Default::default()
    };

    let mut tx = Tx::begin(inner).await?;
    let mut events: Vec<Ev> = Vec::new();

    let lock_plan = || {
        sqlx::query_as::<_, PlanRow>(concat!(
            "SELECT ",
            plan_cols!(),
            " FROM plans WHERE id = $1 FOR UPDATE"
        ))
        .bind(&plan_id)
    };
    let mut existing_plan = lock_plan().fetch_optional(&mut *tx.tx).await?;
    if existing_plan.is_none() {
        let inserted = sqlx::query(
            "INSERT INTO plans (id, project, budget_micros, spec) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(&plan_id)
        .bind(&row_spec.project)
        .bind(budget.map(|b| b.micros()))
        .bind(&spec_json)
        .execute(&mut *tx.tx)
        .await?
        .rows_affected();
        if inserted == 1 {
            report.created_plan = true;
            events.push(Ev::plan(
                et::PLAN_CREATED,
                &plan_id,
                payload::plan_created(&row_spec.project, plan.tasks.len(), budget),
            ));
        } else {
            // Another importer created it a moment ago: treat it as an existing plan.
            existing_plan = lock_plan().fetch_optional(&mut *tx.tx).await?;
        }
    }
    if let Some(old) = existing_plan {
        let old = old.into_record()?;
        let fields = plan_changes(&old.spec, &row_spec);
        if !fields.is_empty() || old.budget != budget {
            sqlx::query(
                "UPDATE plans SET project = $2, budget_micros = $3, spec = $4, updated_at = now() WHERE id = $1",
            )
            .bind(&plan_id)
            .bind(&row_spec.project)
            .bind(budget.map(|b| b.micros()))
            .bind(&spec_json)
            .execute(&mut *tx.tx)
            .await?;
            report.plan_changed = true;
            events.push(Ev::plan(
                et::PLAN_UPDATED,
                &plan_id,
                payload::fields_changed(&fields),
            ));
        }
    }

    let rows: Vec<ExistingRow> = sqlx::query_as(
        "SELECT pk, task_id, status, attempts, spec FROM tasks WHERE plan_id = $1 ORDER BY pk FOR UPDATE",
    )
    .bind(&plan_id)
    .fetch_all(&mut *tx.tx)
    .await?;
    let mut existing: HashMap<String, ExistingTask> = HashMap::with_capacity(rows.len());
    let mut stored_order: Vec<String> = Vec::with_capacity(rows.len());
    for r in rows {
        let what = format!("task {plan_id}/{}", r.task_id);
        let spec: TaskSpec = serde_json::from_value(r.spec)
            .map_err(|e| StoreError::Corrupt(format!("{what}: stored spec does not parse: {e}")))?;
        let status = parse_status(&r.status, &what)?;
        stored_order.push(r.task_id.clone());
        existing.insert(
            r.task_id,
            ExistingTask {
                pk: r.pk,
                status,
                attempts: r.attempts,
                spec,
            },
        );
    }

    let decisions = plan_import(plan, opts, &existing)?;
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
    let mut creates = TaskColumns::default();
    for w in &writes.creates {
        creates.push(0, w.ord, w.task, w.status, w.reason.clone(), max)?;
    }
    let mut updates = TaskColumns::default();
    for w in &writes.updates {
        updates.push(
            w.pk.unwrap_or_default(),
            w.ord,
            w.task,
            w.status,
            w.reason.clone(),
            max,
        )?;
    }

    let new_pks = insert_tasks(&mut tx, &plan_id, &creates).await?;
    if !updates.is_empty() {
        sqlx::query(
            "UPDATE tasks t SET ord = u.ord, status = u.status, priority_rank = u.priority_rank, \
               max_attempts = u.max_attempts, estimate_micros = u.estimate, reason = u.reason, \
               required_tags = ARRAY(SELECT jsonb_array_elements_text(u.tags::jsonb)), spec = u.spec::jsonb, \
               claim_keys = ARRAY(SELECT jsonb_array_elements_text(u.keys::jsonb)), updated_at = now() \
             FROM UNNEST($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[], \
                         $7::text[], $8::text[], $9::text[], $10::text[]) \
               AS u(pk, ord, status, priority_rank, max_attempts, estimate, reason, tags, spec, keys) \
             WHERE t.pk = u.pk",
        )
        .bind(&updates.pk)
        .bind(&updates.ord)
        .bind(&updates.status)
        .bind(&updates.priority_rank)
        .bind(&updates.max_attempts)
        .bind(&updates.estimate)
        .bind(&updates.reason)
        .bind(&updates.tags)
        .bind(&updates.spec)
        .bind(&updates.claim_keys)
        .execute(&mut *tx.tx)
        .await?;
        sqlx::query("DELETE FROM task_deps WHERE task_pk = ANY($1)")
            .bind(&updates.pk)
            .execute(&mut *tx.tx)
            .await?;
    }

    let touched = !creates.is_empty() || !updates.is_empty();
    if touched {
        // Dependency edges of every created or rewritten task, resolved by id within the plan.
        let mut child: Vec<i64> = Vec::new();
        let mut parent: Vec<String> = Vec::new();
        for w in writes.creates.iter().chain(&writes.updates) {
            let pk = match w.pk {
                Some(pk) => Some(pk),
                None => new_pks.get(&w.task.id).copied(),
            };
            let Some(pk) = pk else { continue };
            for dep in &w.task.dependencies {
                child.push(pk);
                parent.push(dep.clone());
            }
        }
        insert_edges(&mut tx, &plan_id, &child, &parent).await?;
        recount_pending(&mut tx, &plan_id).await?;
        tx.wake(&plan_id);
    }

    events.extend(writes.events);
    if events.is_empty() {
        // Nothing changed: no writes, no events (the row locks go with the rollback).
        return Ok(report);
    }
    tx.events_batch(events).await?;
    tx.commit(inner).await?;
    Ok(report)
}

/// Inserts task rows; returns their pks by task id.
pub(super) async fn insert_tasks(
    tx: &mut Tx,
    plan_id: &str,
    rows: &TaskColumns,
) -> StoreResult<HashMap<String, i64>> {
    if rows.is_empty() {
        return Ok(HashMap::new());
    }
    let inserted: Vec<(i64, String)> = sqlx::query_as(
        "INSERT INTO tasks (plan_id, task_id, ord, status, priority_rank, max_attempts, estimate_micros, \
           reason, required_tags, spec, claim_keys) \
         SELECT $1, u.task_id, u.ord, u.status, u.priority_rank, u.max_attempts, u.estimate, u.reason, \
           ARRAY(SELECT jsonb_array_elements_text(u.tags::jsonb)), u.spec::jsonb, \
           ARRAY(SELECT jsonb_array_elements_text(u.keys::jsonb)) \
         FROM UNNEST($2::text[], $3::bigint[], $4::text[], $5::bigint[], $6::bigint[], $7::bigint[], \
                     $8::text[], $9::text[], $10::text[], $11::text[]) \
           AS u(task_id, ord, status, priority_rank, max_attempts, estimate, reason, tags, spec, keys) \
         RETURNING pk, task_id",
    )
    .bind(plan_id)
    .bind(&rows.task_id)
    .bind(&rows.ord)
    .bind(&rows.status)
    .bind(&rows.priority_rank)
    .bind(&rows.max_attempts)
    .bind(&rows.estimate)
    .bind(&rows.reason)
    .bind(&rows.tags)
    .bind(&rows.spec)
    .bind(&rows.claim_keys)
    .fetch_all(&mut *tx.tx)
        .await?;
    Ok(inserted.into_iter().map(|(pk, id)| (id, pk)).collect())
}

/// Dependency edges `child[i]` → the task `dep[i]` of the plan, resolved by id.
pub(super) async fn insert_edges(
    tx: &mut Tx,
    plan_id: &str,
    child: &[i64],
    dep: &[String],
) -> StoreResult<()> {
    if child.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO task_deps (task_pk, depends_on_pk) \
         SELECT u.child, p.pk FROM UNNEST($2::bigint[], $3::text[]) AS u(child, dep) \
         JOIN tasks p ON p.plan_id = $1 AND p.task_id = u.dep \
         ON CONFLICT DO NOTHING",
    )
    .bind(plan_id)
    .bind(child)
    .bind(dep)
    .execute(&mut *tx.tx)
    .await?;
    Ok(())
}

/// `pending_deps` is data: recounted for the whole plan, writing only rows that differ.
pub(super) async fn recount_pending(tx: &mut Tx, plan_id: &str) -> StoreResult<()> {
    sqlx::query(
        "UPDATE tasks t SET pending_deps = c.n FROM ( \
           SELECT t2.pk, count(p.pk) FILTER (WHERE p.status <> 'DONE') AS n \
           FROM tasks t2 LEFT JOIN task_deps d ON d.task_pk = t2.pk \
           LEFT JOIN tasks p ON p.pk = d.depends_on_pk \
           WHERE t2.plan_id = $1 GROUP BY t2.pk) c \
         WHERE t.pk = c.pk AND t.pending_deps <> c.n",
    )
    .bind(plan_id)
    .execute(&mut *tx.tx)
    .await?;
    Ok(())
}
