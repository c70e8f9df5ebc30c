//! `whilly report [PLAN] [--format md|json] [--out FILE]`, and the report every run writes.

use super::args::{ReportArgs, ReportFormat};
use super::context::Context;
use super::exit;
use super::plan_choice;
use crate::engine::report;
use crate::store::Store;
use std::sync::Arc;

pub(crate) async fn run(ctx: &Context, args: ReportArgs) -> anyhow::Result<i32> {
    let store = ctx.store().await?;
    let plans = store.list_plans().await?;
    let (archived, known): (Vec<_>, Vec<_>) =
        plans.iter().partition(|p| p.plan.archived_at.is_some());
    let ids = |v: Vec<&crate::store::PlanSummary>| -> Vec<String> {
        v.into_iter().map(|p| p.plan.id.clone()).collect()
    };
    let plan_id = match plan_choice::choose(
        None,
        false,
        args.plan.as_deref(),
        &ids(known),
        &ids(archived),
    )
    .map_err(|msg| anyhow::anyhow!(msg))?
    {
        plan_choice::Choice::Imported(id) => id,
        plan_choice::Choice::File => anyhow::bail!("give the id of an imported plan"),
    };
    let r = report::load(store.as_ref(), &plan_id, None).await?;
    let text = match args.format {
        ReportFormat::Md => report::render_md(&r),
        ReportFormat::Json => format!("{}\n", serde_json::to_string_pretty(&r)?),
    };
    match &args.out {
        Some(path) => {
            std::fs::write(path, &text)
                .map_err(|e| anyhow::anyhow!("--out {}: {e}", path.display()))?;
            errln!("report written to {}", path.display());
        }
        None => out!("{text}"),
    }
    store.close().await;
    Ok(exit::OK)
}

/// The newest event id now: a run's report covers what comes after it.
pub(crate) async fn run_start(store: &Arc<dyn Store>) -> Option<i64> {
    store.newest_event_id().await.ok()
}

/// At the end of a run: the report of what it did, under `.whilly/reports/`; says where on
/// stderr (stdout's last line belongs to the headless `complete` line). A report that cannot be
/// written never changes how the run ended.
pub(crate) async fn write_run_report(
    ctx: &Context,
    store: &Arc<dyn Store>,
    plan_id: &str,
    after: Option<i64>,
) {
    let written = match report::load(store.as_ref(), plan_id, after).await {
        Ok(r) => report::write(&ctx.state_dir(), &r).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    match written {
        Ok(path) => errln!("whilly: run report written to {}", path.display()),
        Err(e) => {
            tracing::warn!("run report of {plan_id}: {e}");
            errln!("whilly: the run report could not be written: {e}");
        }
    }
}
