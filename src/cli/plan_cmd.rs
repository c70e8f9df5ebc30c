//! `whilly plan …`: check, triz, decompose, import, list, show, export, reset, pause, resume, archive,
//! delete.

use super::args::PlanCommand;
use super::context::Context;
use super::exit;
use super::plan_view;
use crate::domain::{Usd, validate_id};
use crate::plan;
use crate::store::{ImportOptions, ImportReport, ResetMode, Store};
use anyhow::{Context as _, bail};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

pub async fn run(ctx: &Context, cmd: PlanCommand) -> anyhow::Result<i32> {
    match cmd {
        PlanCommand::Check { file, strict, json } => check(ctx, &file, strict, json),
        PlanCommand::Triz {
            target,
            json,
            strict,
            agent,
            agent_timeout,
        } => triz(ctx, &target, json, strict, agent.as_deref(), &agent_timeout).await,
        PlanCommand::Decompose(args) => super::plan_preflight::decompose(ctx, args).await,
        PlanCommand::Import {
            file,
            strict,
            budget,
            plan_id,
            json,
            ensure_board_statuses,
        } => {
            let text = file.to_string_lossy();
            let forge_source = crate::forge::refs::IssueSource::looks_like(&text)
                || crate::forge::refs::BoardSource::looks_like(&text);
            if crate::forge::jira::intake::JiraSource::looks_like(&text) && !file.exists() {
                if plan_id.is_some() {
                    bail!("--id: the plan of {text} is always jira-…, so re-imports find it");
                }
                return super::jira_import::import(ctx, &text, strict, budget, json).await;
            }
            if forge_source && !file.exists() {
                if plan_id.is_some() {
                    bail!(
                        "--id: the plan of {text} is always gh-OWNER-REPO[-LABEL] (ghproject-OWNER-NUMBER for a board), so re-imports find it"
                    );
                }
                let opts = super::gh_import::GhImport {
                    strict,
                    budget,
                    json,
                    ensure_board_statuses,
                };
                return super::gh_import::import(ctx, &text, &opts).await;
            }
            import(ctx, &file, strict, budget, plan_id, json).await
        }
        PlanCommand::List { json, all } => {
            let store = ctx.store().await?;
            let mut plans = store.list_plans().await?;
            let before = plans.len();
            if !all {
                plans.retain(|p| p.plan.archived_at.is_none());
            }
            if json {
                outln!("{}", serde_json::to_string_pretty(&plans)?);
            } else {
                out!(
                    "{}",
                    plan_view::render_plan_list(&plans, before - plans.len())
                );
            }
            Ok(exit::OK)
        }
        PlanCommand::Archive { plan_id, undo } => archive(ctx, &plan_id, !undo).await,
        PlanCommand::Unarchive { plan_id } => archive(ctx, &plan_id, false).await,
        PlanCommand::Delete { plan_id, yes } => delete(ctx, &plan_id, yes).await,
        PlanCommand::Show { plan_id, json } => show(ctx, &plan_id, json).await,
        PlanCommand::Export { plan_id, output } => {
            let store = ctx.store().await?;
            let spec = store.export_plan(&plan_id).await?;
            let text = plan::canonical_json(&spec);
            match output {
                Some(path) => {
                    crate::fsutil::atomic_write(&path, text.as_bytes())
                        .with_context(|| format!("cannot write {}", path.display()))?;
                    errln!(
                        "exported plan {plan_id} ({} tasks) to {}",
                        spec.tasks.len(),
                        path.display()
                    );
                }
                None => out!("{text}"),
            }
            Ok(exit::OK)
        }
        PlanCommand::Reset {
            plan_id,
            hard,
            keep_tasks,
        } => {
            if !hard && !keep_tasks {
                errln!(
                    "whilly plan reset {plan_id}: say which reset you mean:\n  --keep-tasks  every task back to PENDING (attempts, costs and reasons cleared)\n  --hard        delete the plan's tasks (the events stay)"
                );
                return Ok(exit::FAILED);
            }
            let store = ctx.store().await?;
            let mode = if hard {
                ResetMode::Hard
            } else {
                ResetMode::KeepTasks
            };
            store.reset_plan(&plan_id, mode).await?;
            outln!(
                "plan {plan_id}: {}",
                if hard {
                    "tasks deleted (events kept)"
                } else {
                    "every task back to PENDING"
                }
            );
            Ok(exit::OK)
        }
        PlanCommand::Pause { plan_id } => {
            let store = ctx.store().await?;
            store.set_plan_paused(&plan_id, true).await?;
            outln!("plan {plan_id} paused: no new tasks will be claimed (running ones finish)");
            Ok(exit::OK)
        }
        PlanCommand::Challenge {
            plan_file,
            plan,
            agent,
        } => super::prd_cmd::challenge(ctx, plan_file, plan, &agent).await,
        PlanCommand::Resume { plan_id } => {
            let store = ctx.store().await?;
            store.set_plan_paused(&plan_id, false).await?;
            outln!("plan {plan_id} resumed");
            Ok(exit::OK)
        }
    }
}

fn check(ctx: &Context, file: &Path, strict: bool, json: bool) -> anyhow::Result<i32> {
    // The agents a run could use are the configured ones. A config that does not load is the
    // config's problem, not the plan's: the plan is still checked, only without agent names.
    let agents: Option<BTreeSet<String>> = match ctx.config() {
        Ok(cfg) => Some(cfg.agents.keys().cloned().collect()),
        Err(e) => {
            errln!("warning: agent names not checked: {e:#}");
            None
        }
    };
    let mut report = plan::load_plan_file_with(file, strict, agents.as_ref())?;
    // Which test steps will run and which stay prose, and the repository's own checks: nothing
    // the engine runs after an agent is a surprise.
    let policy = ctx
        .config()
        .map(|c| crate::engine::configure::check_policy(&c))
        .unwrap_or_default();
    // A check whose program is missing cannot pass: said now, before any agent is paid.
    if let Some(p) = &report.plan {
        let text = std::fs::read_to_string(file).ok();
        let missing = super::plan_checks::missing_program_diagnostics(
            p,
            &ctx.repo_root,
            policy,
            text.as_deref(),
        );
        report.diagnostics.extend(missing);
    }
    let section = report
        .plan
        .as_ref()
        .map(|p| super::plan_checks::checks_section(p, &ctx.repo_root, policy));
    match (&section, json) {
        (Some((_, checks)), true) => {
            let mut v: serde_json::Value =
                serde_json::from_str(&plan::render_check(&report, true))?;
            v["checks"] = checks.clone();
            outln!("{}", serde_json::to_string_pretty(&v)?);
        }
        (Some((text, _)), false) => {
            out!("{}", plan::render_check(&report, false));
            out!("{text}");
        }
        (None, _) => out!("{}", plan::render_check(&report, json)),
    }
    Ok(if report.has_errors() {
        exit::FAILED
    } else {
        exit::OK
    })
}

async fn triz(
    ctx: &Context,
    target: &str,
    json: bool,
    strict: bool,
    agent: Option<&str>,
    agent_timeout: &str,
) -> anyhow::Result<i32> {
    let (spec, _) = super::plan_preflight::load(ctx, target).await?;
    let report = plan::triz_report(&spec);
    match agent {
        Some(agent) => {
            super::plan_preflight::triz_with_agent(ctx, &spec, &report, agent, agent_timeout, json)
                .await?
        }
        None => out!("{}", plan::render_triz(&report, json)),
    }
    Ok(if strict && !report.approved() {
        exit::FAILED
    } else {
        exit::OK
    })
}

async fn import(
    ctx: &Context,
    file: &Path,
    strict: bool,
    budget: Option<f64>,
    plan_id: Option<String>,
    json: bool,
) -> anyhow::Result<i32> {
    let store = ctx.store().await?;
    match import_file(ctx, &store, file, strict, budget, plan_id, json).await? {
        Ok(result) => {
            if json {
                outln!("{}", serde_json::to_string_pretty(&result)?);
            } else {
                out!("{}", describe_import(&result, store.as_ref()));
            }
            Ok(exit::OK)
        }
        Err(code) => Ok(code),
    }
}

/// `whilly run FILE`: import (or re-import) the file, report on stderr, return the plan id.
pub async fn import_for_run(
    ctx: &Context,
    store: &Arc<dyn Store>,
    file: &Path,
    budget: Option<f64>,
    plan_id: Option<String>,
) -> anyhow::Result<Result<String, i32>> {
    Ok(
        match import_file(ctx, store, file, false, budget, plan_id, false).await? {
            Ok(result) => {
                eprint!("{}", describe_import(&result, store.as_ref()));
                Ok(result.plan_id)
            }
            Err(code) => Err(code),
        },
    )
}

/// Validates and imports `file`; `Err(exit code)` when the file is refused (nothing written).
async fn import_file(
    ctx: &Context,
    store: &Arc<dyn Store>,
    file: &Path,
    strict: bool,
    budget: Option<f64>,
    plan_id: Option<String>,
    quiet_warnings: bool,
) -> anyhow::Result<Result<ImportReport, i32>> {
    // Structural errors refuse the import before anything is written; the decision gate never
    // does (`import_gate`).
    let report = plan::load_plan_file(file, false)?;
    let spec = match (&report.plan, report.has_errors()) {
        (Some(spec), false) => spec.clone(),
        _ => {
            eprint!("{}", plan::render_check(&report, false));
            errln!("nothing was imported");
            return Ok(Err(exit::FAILED));
        }
    };
    // Warnings are said on import too (an unknown key that does nothing, a check this machine
    // cannot run), not only by `plan check`; on stderr, so `--json` output stays one document.
    let policy = ctx
        .config()
        .map(|c| crate::engine::configure::check_policy(&c))
        .unwrap_or_default();
    let text = std::fs::read_to_string(file).ok();
    let missing = super::plan_checks::missing_program_diagnostics(
        &spec,
        &ctx.repo_root,
        policy,
        text.as_deref(),
    );
    for d in report.diagnostics.iter().chain(&missing) {
        errln!("{}", plan::render_diagnostic(&report.file, d));
    }
    if let Some(id) = &plan_id {
        validate_id(id).map_err(|e| anyhow::anyhow!("--id: {e}"))?;
    }
    if let Some(b) = budget
        && (!b.is_finite() || b < 0.0)
    {
        bail!("--budget {b}: expected a non-negative number of US dollars");
    }
    let mut skip = BTreeMap::new();
    let verdicts =
        super::import_gate::decision_gate(ctx, &spec, &mut skip, strict, quiet_warnings).await;
    // A budget set earlier with --budget is not in the file; re-importing the file without
    // --budget must keep it rather than silently lifting the limit.
    let target_id = plan_id.clone().unwrap_or_else(|| spec.id.clone());
    let budget = match (budget, spec.budget_usd) {
        (Some(b), _) => Some(Usd::from_f64(b)),
        (None, Some(_)) => None,
        (None, None) => match store.get_plan(&target_id).await {
            Ok(existing) => existing.budget,
            Err(_) => None,
        },
    };
    let opts = ImportOptions {
        budget,
        plan_id,
        skip,
        default_max_attempts: ctx
            .config()
            .map(|c| c.queue.default_max_attempts)
            .unwrap_or(3),
    };
    let report = store.import_plan(&spec, &opts).await?;
    verdicts.record(store.as_ref(), &report.plan_id).await;
    // Where the plan came from, for `whilly doctor`'s ghost plans; a diagnosis aid only.
    if let Err(e) = plan::sources::record(&ctx.state_dir(), &report.plan_id, file) {
        tracing::warn!("recording the source of plan {}: {e}", report.plan_id);
    }
    Ok(Ok(report))
}

pub(super) fn describe_import(r: &ImportReport, store: &dyn Store) -> String {
    let mut out = String::new();
    let backend = store.info();
    if r.created_plan {
        out.push_str(&format!(
            "imported plan {} with {} tasks into {} ({})\n",
            r.plan_id,
            r.created.len(),
            backend.backend,
            backend.location
        ));
    } else if !r.changed_anything() {
        out.push_str(&format!(
            "plan {} is already imported and unchanged; nothing to do\n",
            r.plan_id
        ));
    } else {
        out.push_str(&format!("updated plan {}\n", r.plan_id));
        if r.plan_changed {
            out.push_str("  plan settings changed\n");
        }
    }
    let list = |label: &str, ids: &[String], out: &mut String| {
        let already_said = label == "created" && r.created_plan;
        if !ids.is_empty() && !already_said {
            out.push_str(&format!("  {label} ({}): {}\n", ids.len(), abbreviate(ids)));
        }
    };
    list("created", &r.created, &mut out);
    list("updated", &r.updated, &mut out);
    list(
        "kept (already started, not changed)",
        &r.kept_started,
        &mut out,
    );
    list(
        "in the store but not in the file (left as they are)",
        &r.missing_from_file,
        &mut out,
    );
    list("skipped by the decision gate", &r.skipped, &mut out);
    out
}

fn abbreviate(ids: &[String]) -> String {
    if ids.len() <= 8 {
        ids.join(", ")
    } else {
        format!("{}, … and {} more", ids[..6].join(", "), ids.len() - 6)
    }
}

async fn show(ctx: &Context, plan_id: &str, json: bool) -> anyhow::Result<i32> {
    let store = ctx.store().await?;
    let plan = store.get_plan(plan_id).await?;
    let tasks = store.list_tasks(plan_id).await?;
    if json {
        let v = serde_json::json!({ "plan": plan, "tasks": tasks });
        outln!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(exit::OK);
    }
    let counts = store.counts(plan_id).await?;
    outln!("plan {}  ({})", plan.id, plan.project);
    let state = plan_view::plan_state(&crate::store::PlanSummary {
        plan: plan.clone(),
        counts: counts.clone(),
    });
    outln!(
        "state: {}   tasks: {} done / {} total   budget: {}",
        state,
        counts.get(crate::domain::Status::Done),
        counts.total,
        plan_view::budget_text(&plan)
    );
    outln!();
    out!("{}", plan_view::render_task_table(&tasks));
    outln!();
    outln!("dependencies:");
    out!("{}", plan_view::render_dep_tree(&tasks));
    Ok(exit::OK)
}

async fn archive(ctx: &Context, plan_id: &str, archived: bool) -> anyhow::Result<i32> {
    let store = ctx.store().await?;
    store.set_plan_archived(plan_id, archived).await?;
    if archived {
        outln!(
            "plan {plan_id} archived: hidden from `whilly plan list` (`--all` shows it; \
             `whilly plan unarchive {plan_id}` lists it again)"
        );
    } else {
        outln!("plan {plan_id} is listed again");
    }
    Ok(exit::OK)
}

/// Deletes a plan after asking on the terminal (or with `--yes`); without a terminal and
/// without `--yes` nothing is deleted.
async fn delete(ctx: &Context, plan_id: &str, yes: bool) -> anyhow::Result<i32> {
    let store = ctx.store().await?;
    let counts = store.counts(plan_id).await?;
    if !yes {
        use std::io::IsTerminal;
        if !std::io::stdin().is_terminal() {
            errln!(
                "whilly plan delete {plan_id}: not deleted; without a terminal to ask on, add \
                 --yes to delete the plan and its {} tasks",
                counts.total
            );
            return Ok(exit::FAILED);
        }
        errln!(
            "delete plan {plan_id} and its {} tasks? Its events stay in the audit trail. [y/N] ",
            counts.total
        );
        let mut answer = String::new();
        std::io::stdin()
            .read_line(&mut answer)
            .context("reading the answer")?;
        if !matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
            errln!("not deleted");
            return Ok(exit::FAILED);
        }
    }
    store.delete_plan(plan_id).await?;
    outln!(
        "plan {plan_id} deleted with its {} tasks (its events stay; the deletion is recorded)",
        counts.total
    );
    Ok(exit::OK)
}
