//! `whilly plan import gh:OWNER/REPO[:LABEL]`: the open issues with the label as the tasks of one
//! plan (`gh-owner-repo`), merged idempotently on every re-run (see `forge::import`).

use super::context::Context;
use super::exit;
use crate::engine::configure;
use crate::forge::import::{IssueSet, numbers_to_look_up, plan_from_issues};
use crate::forge::intake::UpstreamIssue;
use crate::forge::refs::IssueSource;
use crate::plan;
use crate::store::{ImportOptions, StoreError};
use anyhow::Context as _;

pub async fn import(
    ctx: &Context,
    source: &str,
    strict: bool,
    budget: Option<f64>,
    json: bool,
) -> anyhow::Result<i32> {
    let source: IssueSource = source.parse()?;
    let cfg = ctx.config()?;
    let gh = match configure::github_client(&cfg)? {
        Some(gh) => gh,
        None => {
            errln!("{}", configure::NO_GITHUB_TOKEN);
            return Ok(exit::ENVIRONMENT);
        }
    };
    let open: Vec<UpstreamIssue> = match gh
        .client
        .open_issues_with_label(&source.repo, &source.label)
        .await
    {
        Ok(list) => list,
        Err(e) => {
            errln!("{e}");
            return Ok(e.exit_code());
        }
    };
    let store = ctx.store().await?;
    let plan_id = source.plan_id();
    let stored = match store.export_plan(&plan_id).await {
        Ok(spec) => spec.tasks,
        Err(StoreError::NotFound { .. }) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    let mut others = Vec::new();
    for n in numbers_to_look_up(&open, &stored) {
        match gh.client.upstream_issue(&source.repo, n, false).await {
            Ok(i) => others.push(i),
            Err(e) if e.is_not_found() => {}
            Err(e) => {
                errln!("{e}");
                return Ok(e.exit_code());
            }
        }
    }
    let built = plan_from_issues(
        &source,
        &IssueSet {
            open,
            others,
            stored,
        },
    );
    for r in &built.refused {
        errln!("refused: {r}");
    }
    for (task, n) in &built.satisfied {
        errln!("note: {task}: #{n} is closed, so that dependency is met");
    }
    let mut skip = built.skip.clone();
    for t in &built.spec.tasks {
        if skip.contains_key(&t.id) {
            continue;
        }
        let failures = plan::gate_failures(t);
        if failures.is_empty() {
            continue;
        }
        if strict {
            skip.insert(t.id.clone(), plan::GATE_SKIP_REASON.to_string());
        } else {
            let why: Vec<String> = failures.iter().map(|f| f.to_string()).collect();
            errln!("warning: {}: decision gate: {}", t.id, why.join("; "));
        }
    }
    let guards = crate::agent::Guards::new(&cfg.guards.injection_patterns)
        .map_err(|e| anyhow::anyhow!("[guards] injection_patterns: {e}"))?;
    for t in &built.spec.tasks {
        if let Err(reason) = guards.check_task(t) {
            errln!(
                "warning: {}: {reason}; it will be refused before any agent runs",
                t.id
            );
        }
    }
    let opts = ImportOptions {
        budget: budget.map(crate::domain::Usd::from_f64),
        plan_id: None,
        skip,
        default_max_attempts: cfg.queue.default_max_attempts,
    };
    let report = store
        .import_plan(&built.spec, &opts)
        .await
        .with_context(|| format!("importing the issues of {source}"))?;
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "source": source.to_string(),
                "report": report,
                "refused": built.refused.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
            }))?
        );
    } else {
        out!(
            "{}",
            super::plan_cmd::describe_import(&report, store.as_ref())
        );
        outln!(
            "from {} ({} open issue{} with {}); run it with `whilly run --plan {}`",
            source.repo,
            built.spec.tasks.len(),
            if built.spec.tasks.len() == 1 { "" } else { "s" },
            source.label,
            report.plan_id
        );
    }
    Ok(if built.refused.is_empty() {
        exit::OK
    } else {
        exit::FAILED
    })
}
