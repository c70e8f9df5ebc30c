//! `whilly plan import jira:"JQL"` / `jira:ABC-123`: Jira issues as the tasks of one plan
//! (the same source, the same plan), merged idempotently on every re-run: tasks keep their
//! status, changed issues update their pending tasks, and issues done (or gone) upstream turn
//! their pending tasks SKIPPED (`closed_upstream`).

use super::context::Context;
use super::exit;
use crate::domain::PlanSpec;
use crate::engine::configure;
use crate::forge::intake::CLOSED_UPSTREAM;
use crate::forge::jira::intake::{JiraSource, source_of, to_task};
use crate::forge::jira::{JiraError, JiraIssue};
use crate::store::{ImportOptions, StoreError};
use anyhow::Context as _;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

pub async fn import(
    ctx: &Context,
    text: &str,
    strict: bool,
    budget: Option<f64>,
    json: bool,
) -> anyhow::Result<i32> {
    let source: JiraSource = text.parse()?;
    let cfg = ctx.config()?;
    let Some(jira) = configure::jira_client(&cfg)? else {
        errln!("{}", JiraError::NotConfigured);
        return Ok(exit::ENVIRONMENT);
    };
    let extra: Vec<String> = cfg.jira.acceptance_field.iter().cloned().collect();
    let found: Vec<JiraIssue> = match jira.search(&source.jql(), cfg.jira.page_size, &extra).await {
        Ok(f) => f,
        Err(e) => {
            errln!("error: {e}");
            return Ok(e.exit_code());
        }
    };
    if let JiraSource::Key(k) = &source
        && found.is_empty()
    {
        errln!(
            "error: {}",
            JiraError::NotFound {
                what: format!("issue {k}"),
                user: cfg.jira.user.clone().unwrap_or_default(),
            }
        );
        return Ok(exit::FAILED);
    }
    let store = ctx.store().await?;
    let plan_id = source.plan_id();
    let stored = match store.export_plan(&plan_id).await {
        Ok(spec) => spec.tasks,
        Err(StoreError::NotFound { .. }) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    let mut tasks = Vec::new();
    let mut skip: BTreeMap<String, String> = BTreeMap::new();
    let mut refused = Vec::new();
    let mut seen = BTreeSet::new();
    for issue in &found {
        seen.insert(issue.key.clone());
        match to_task(issue, cfg.jira.acceptance_field.as_deref()) {
            Ok(t) => {
                if issue.is_done() {
                    skip.insert(t.id.clone(), CLOSED_UPSTREAM.to_string());
                }
                tasks.push(t);
            }
            Err(e) => refused.push(e.to_string()),
        }
    }
    // Tasks of earlier imports the search no longer finds: done upstream (or deleted) → their
    // pending tasks are skipped; otherwise they stay as they are.
    for mut t in stored {
        let Some((key, _)) = source_of(&t) else {
            continue;
        };
        if seen.contains(&key) {
            continue;
        }
        let upstream = match jira.issue(&key, &extra).await {
            Ok(i) if !i.is_done() => None,
            Ok(i) => Some(i.status),
            Err(JiraError::NotFound { .. }) => Some("deleted".to_string()),
            Err(e) => {
                errln!("error: {e}");
                return Ok(e.exit_code());
            }
        };
        if let Some(status) = upstream {
            // The source records where the issue went, so the task counts as changed and
            // the import applies the skip (unchanged tasks are left alone).
            if let Some(serde_json::Value::Object(src)) = t.extra.get_mut("source") {
                src.insert("status".into(), json!(status));
            }
            skip.insert(t.id.clone(), CLOSED_UPSTREAM.to_string());
        }
        tasks.push(t);
    }
    for r in &refused {
        errln!("refused: {r}");
    }
    let mut spec = PlanSpec {
        id: plan_id.clone(),
        project: cfg.jira.url.clone().unwrap_or_default(),
        tasks,
        ..PlanSpec::default()
    };
    spec.extra.insert(
        "source".into(),
        json!({"type": "jira", "query": source.jql()}),
    );
    let verdicts = super::import_gate::decision_gate(ctx, &spec, &mut skip, strict, false).await;
    super::plan_checks::warn_guarded_tasks(&spec.tasks, &cfg)?;
    let opts = ImportOptions {
        budget: budget.map(crate::domain::Usd::from_f64),
        plan_id: None,
        skip,
        default_max_attempts: cfg.queue.default_max_attempts,
    };
    let report = store
        .import_plan(&spec, &opts)
        .await
        .with_context(|| format!("importing the issues of {source}"))?;
    verdicts.record(store.as_ref(), &report.plan_id).await;
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "source": source.to_string(),
                "report": report,
                "refused": refused,
            }))?
        );
    } else {
        out!(
            "{}",
            super::plan_cmd::describe_import(&report, store.as_ref())
        );
        outln!(
            "from Jira ({} issue{} for {}); run it with `whilly run --plan {}`",
            found.len(),
            if found.len() == 1 { "" } else { "s" },
            source.jql(),
            report.plan_id
        );
    }
    Ok(if refused.is_empty() {
        exit::OK
    } else {
        exit::FAILED
    })
}
