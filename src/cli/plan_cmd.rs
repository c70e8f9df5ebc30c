//! `whilly plan …`: check, triz, decompose, import, list, show, export, reset, pause, resume, archive,
//! delete.

use super::args::PlanCommand;
use super::context::Context;
use super::exit;
use super::plan_view;
use crate::engine::intake::{self, IntakeOptions};
use crate::forge::jira::intake::JiraSource;
use crate::plan;
use crate::store::{ImportReport, ResetMode, Store};
use anyhow::{Context as _, bail};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

pub(crate) async fn run(ctx: &Context, cmd: PlanCommand) -> anyhow::Result<i32> {
    match cmd {
        PlanCommand::Check { file, strict, json } => check(ctx, &file, strict, json),
        PlanCommand::New {
            file,
            project,
            force,
        } => super::plan_new::new_plan(ctx, &file, project.as_deref(), force),
        PlanCommand::Schema => {
            out!("{}", plan::starter::PLAN_SCHEMA);
            Ok(exit::OK)
        }
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
            let opts = IntakeOptions {
                strict,
                budget,
                plan_id,
                quiet_gate: false,
            };
            import(ctx, &file, &opts, json, ensure_board_statuses).await
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
        let missing = intake::plan_file::missing_program_diagnostics(
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

/// `plan import SOURCE`: a plan file, the GitHub issues with a label or a board's column, a
/// Jira search (see [`crate::engine::intake`]).
async fn import(
    ctx: &Context,
    file: &Path,
    opts: &IntakeOptions,
    json: bool,
    ensure_board_statuses: bool,
) -> anyhow::Result<i32> {
    let text = file.to_string_lossy();
    let tracker = !file.exists()
        && (JiraSource::looks_like(&text) || intake::github::GitHubSource::looks_like(&text));
    let source: Box<dyn intake::Source> = if !tracker {
        Box::new(intake::plan_file::PlanFile(file.to_path_buf()))
    } else if JiraSource::looks_like(&text) {
        if opts.plan_id.is_some() {
            bail!("--id: the plan of {text} is always jira-…, so re-imports find it");
        }
        Box::new(intake::jira::Jira::parse(&text)?)
    } else {
        if opts.plan_id.is_some() {
            bail!(
                "--id: the plan of {text} is always gh-OWNER-REPO[-LABEL] (ghproject-OWNER-NUMBER for a board), so re-imports find it"
            );
        }
        Box::new(intake::github::GitHubSource::parse(
            &text,
            ensure_board_statuses,
        )?)
    };
    // A tracker needs its configuration; a plan file imports with the defaults.
    let cfg = if tracker {
        Some(ctx.config()?)
    } else {
        ctx.config().ok()
    };
    let store = ctx.store().await?;
    let done = match run_intake(ctx, &store, cfg.as_ref(), source.as_ref(), opts).await? {
        Ok(done) => done,
        Err(code) => return Ok(code),
    };
    let report = &done.report;
    if json && tracker {
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "source": source.describe(),
                "report": report,
                "refused": done.refused,
            }))?
        );
    } else if json {
        outln!("{}", serde_json::to_string_pretty(report)?);
    } else {
        out!("{}", describe_import(report, store.as_ref()));
        if let Some(origin) = &done.origin {
            outln!(
                "{origin}; run it with `whilly run --plan {}`",
                report.plan_id
            );
        }
    }
    Ok(if done.refused.is_empty() {
        exit::OK
    } else {
        exit::FAILED
    })
}

/// `whilly run FILE`: import (or re-import) the file, report on stderr, return the plan id.
pub(crate) async fn import_for_run(
    ctx: &Context,
    store: &Arc<dyn Store>,
    file: &Path,
    budget: Option<f64>,
    plan_id: Option<String>,
) -> anyhow::Result<Result<String, i32>> {
    let opts = IntakeOptions {
        strict: false,
        budget,
        plan_id,
        quiet_gate: true,
    };
    let cfg = ctx.config().ok();
    let source = intake::plan_file::PlanFile(file.to_path_buf());
    Ok(
        match run_intake(ctx, store, cfg.as_ref(), &source, &opts).await? {
            Ok(done) => {
                eprint!("{}", describe_import(&done.report, store.as_ref()));
                Ok(done.report.plan_id)
            }
            Err(code) => Err(code),
        },
    )
}

/// The import pipeline with its notes on stderr; `Err(exit code)` when nothing was imported
/// (the reason said).
async fn run_intake(
    ctx: &Context,
    store: &Arc<dyn Store>,
    cfg: Option<&crate::config::Config>,
    source: &dyn intake::Source,
    opts: &IntakeOptions,
) -> anyhow::Result<Result<intake::Imported, i32>> {
    let state_dir = ctx.state_dir();
    let say = |n: intake::Note| errln!("{n}");
    let env = intake::IntakeEnv {
        store: store.as_ref(),
        cfg,
        repo_root: &ctx.repo_root,
        state_dir: &state_dir,
        notes: &say,
    };
    match intake::import(source, &env, opts).await {
        Ok(done) => Ok(Ok(done)),
        Err(intake::IntakeError::Refused { rendered }) => {
            eprint!("{rendered}");
            errln!("nothing was imported");
            Ok(Err(exit::FAILED))
        }
        Err(e) => {
            let code = e.exit_code();
            errln!("error: {}", exit::describe(&e.into()));
            Ok(Err(code))
        }
    }
}

fn describe_import(r: &ImportReport, store: &dyn Store) -> String {
    let mut out = String::new();
    let backend = store.info();
    if r.created_plan {
        out.push_str(&format!(
            "imported plan {} with {} task{} into {} ({})\n",
            r.plan_id,
            r.created.len(),
            if r.created.len() == 1 { "" } else { "s" },
            backend.backend,
            backend.location
        ));
    } else if !r.changed_anything() {
        out.push_str(&format!(
            "plan {} is already imported and unchanged (the queue keeps its state)\n",
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
