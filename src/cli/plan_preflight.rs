//! Pre-flight with a read-only agent: `whilly plan decompose` and `whilly plan triz --agent` (the
//! decision gate's agent pass at import is `engine::intake`'s).
//! The agent's splits are made by `prd::decompose` (the same flow as the console's split key),
//! shown as a unified diff of the plan's canonical JSON, and written only with `--write` /
//! `--out` or a yes on a terminal: to the plan file, or, for an imported plan, into the queue
//! (`Store::split_task`, one transaction per split).

use super::args::{DecomposeArgs, OneShotArgs};
use super::context::Context;
use super::exit;
use super::prd_cmd::{interruptible, one_shot};
use crate::domain::PlanSpec;
use crate::plan::{self, decompose};
use crate::prd::{self, preflight};
use anyhow::{Context as _, bail};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// Where the plan came from, which decides where it may be written.
pub(super) enum Source {
    File(PathBuf),
    Queue,
}

/// A plan file (checked, refused with its errors) or an imported plan's id.
pub(super) async fn load(ctx: &Context, target: &str) -> anyhow::Result<(PlanSpec, Source)> {
    let path = Path::new(target);
    if path.is_file() {
        let report = plan::load_plan_file(path, false)?;
        return match report.valid_plan() {
            Some(p) => Ok((p.clone(), Source::File(path.to_path_buf()))),
            None => {
                eprint!("{}", plan::render_check(&report, false));
                bail!("{target}: the plan could not be read; fix the errors above");
            }
        };
    }
    let store = ctx.store().await?;
    let spec = store.export_plan(target).await.with_context(|| {
        format!(
            "{target:?} is neither a plan file nor an imported plan id (see `whilly plan list`)"
        )
    })?;
    Ok((spec, Source::Queue))
}

pub(crate) async fn decompose(ctx: &Context, a: DecomposeArgs) -> anyhow::Result<i32> {
    let (spec, source) = load(ctx, &a.target).await?;
    // Where a yes writes: the --out file, else the plan file, else the queue the plan is in.
    let file_dest = match (&a.out, &source) {
        (Some(out), _) => Some(out.clone()),
        (None, Source::File(f)) => Some(f.clone()),
        (None, Source::Queue) => None,
    };
    let to_queue = file_dest.is_none();
    let mut picked = decompose::candidates(&spec, &a.tasks).map_err(anyhow::Error::msg)?;
    if to_queue {
        // The queue splits only tasks that have not started: say so before paying an agent.
        if let Some(t) = a
            .tasks
            .iter()
            .filter_map(|id| spec.task(id))
            .find(|t| !unstarted(t))
        {
            bail!(
                "--task {}: the task is {} in the queue; only a task that has not started can be \
                 split there (write the split plan to a file with --out FILE instead)",
                t.id,
                t.status.map_or("started", |s| s.as_str())
            );
        }
        picked.retain(|(id, _)| spec.task(id).is_some_and(unstarted));
    }
    if picked.is_empty() {
        errln!(
            "no task of plan {} looks too big (more than {} key files, {} acceptance criteria or \
             {} characters of description){}; name one with --task ID",
            spec.id,
            decompose::MAX_KEY_FILES,
            decompose::MAX_CRITERIA,
            decompose::MAX_DESCRIPTION_CHARS,
            if to_queue {
                " among those not started"
            } else {
                ""
            }
        );
        return Ok(exit::OK);
    }
    let agent = one_shot(ctx, &a.agent)?;
    let raw_dir = ctx.repo_root.join(prd::STATE_DIR);
    let call = preflight::Call {
        agent: &agent,
        cwd: &ctx.repo_root,
        raw_dir: &raw_dir,
    };
    let rules = decompose::SplitRules {
        allow_new_key_files: a.allow_new_files,
    };
    let name = agent.agent_name().to_string();
    let done = interruptible(prd::decompose::decompose_tasks(
        call,
        &spec,
        &picked,
        rules,
        |id, why| errln!("asking {name} to split {id} ({why})…"),
    ))
    .await?;
    let mut splits = Vec::new();
    for s in &done.splits {
        for g in decompose::subtask_gate(&done.after, &s.task) {
            let why: Vec<String> = g.failures.iter().map(|f| f.to_string()).collect();
            errln!("warning: {}: decision gate: {}", g.task_id, why.join("; "));
        }
        splits.push(serde_json::json!({
            "task": s.task, "reason": s.reason, "subtasks": s.change.subtask_ids(),
            "dependents_on": s.split.dependents_on, "calls": s.calls,
        }));
    }
    let diff = done.diff(&a.target);
    // Asked only on a terminal, and only once.
    let ask = !a.json && !a.write && a.out.is_none() && stdin_is_terminal();
    let write = a.out.is_some() || a.write || (ask && confirm(&diff, to_queue)?);
    if !a.json && !ask {
        // When asked, the diff was shown with the question already.
        out!("{diff}");
    }
    let mut written = Vec::new();
    if let (true, Some(dest)) = (write, &file_dest) {
        crate::fsutil::atomic_write(dest, plan::canonical_json(&done.after).as_bytes())
            .with_context(|| format!("cannot write {}", dest.display()))?;
        errln!("wrote the split plan to {}", dest.display());
    } else if write {
        let store = ctx.store().await?;
        let (reports, failed) = match prd::decompose::write_to_queue(&*store, &spec.id, &done).await
        {
            Ok(r) => (r, None),
            Err((r, e)) => (r, Some(e)),
        };
        for r in &reports {
            errln!("split in the queue: {}", prd::decompose::describe(r));
        }
        written = reports;
        if let Some(e) = failed {
            return Err(anyhow::Error::new(e).context(format!(
                "writing the split into plan {} ({} of {} split(s) written)",
                spec.id,
                written.len(),
                done.splits.len()
            )));
        }
    } else if !a.json {
        errln!(
            "not written; {}",
            match source {
                Source::File(_) => "add --write to write it (or --out FILE)",
                Source::Queue => "add --write to split it in the queue (or --out FILE)",
            }
        );
    }
    if a.json {
        let v = serde_json::json!({
            "plan_id": spec.id, "splits": splits, "written": write,
            "queue": written, "plan": plan::canonical_value(&done.after),
        });
        outln!("{}", serde_json::to_string_pretty(&v)?);
    }
    errln!("cost: {}", done.cost);
    Ok(exit::OK)
}

/// A task the queue may still split: PENDING (the export's live status) or no status at all.
fn unstarted(t: &crate::domain::TaskSpec) -> bool {
    t.status.is_none_or(|s| s == crate::domain::Status::Pending)
}

fn stdin_is_terminal() -> bool {
    std::io::stdin().is_terminal()
}

/// Shows the diff and asks on the terminal whether to write it.
fn confirm(diff: &str, to_queue: bool) -> anyhow::Result<bool> {
    out!("{diff}");
    if to_queue {
        errln!("split these tasks in the queue? [y/N] ");
    } else {
        errln!("write this plan? [y/N] ");
    }
    let mut answer = String::new();
    std::io::stdin()
        .read_line(&mut answer)
        .context("reading the answer")?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "Yes" | "YES"))
}

/// `whilly plan triz TARGET --agent[=NAME]`: the deterministic report, then the agent's.
pub(crate) async fn triz_with_agent(
    ctx: &Context,
    spec: &PlanSpec,
    report: &plan::TrizReport,
    agent: &str,
    agent_timeout: &str,
    json: bool,
) -> anyhow::Result<()> {
    let args = OneShotArgs {
        agent: (!agent.is_empty()).then(|| agent.to_string()),
        agent_timeout: agent_timeout.to_string(),
    };
    let agent = one_shot(ctx, &args)?;
    let raw_dir = ctx.repo_root.join(prd::STATE_DIR);
    let call = preflight::Call {
        agent: &agent,
        cwd: &ctx.repo_root,
        raw_dir: &raw_dir,
    };
    errln!(
        "asking {} for its contradiction analysis…",
        agent.agent_name()
    );
    let answer = interruptible(preflight::triz_analysis(call, spec)).await?;
    if json {
        let mut v = serde_json::to_value(report)?;
        v["agent_analysis"] = serde_json::json!({
            "agent": agent.agent_name(), "calls": answer.calls, "cost_usd": answer.cost.as_f64(),
            "analysis": answer.value,
        });
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        out!("{}", plan::render_triz(report, false));
        out!(
            "{}",
            plan::agent_review::render_agent_triz(agent.agent_name(), &answer.value)
        );
    }
    errln!("cost: {}", answer.cost);
    Ok(())
}
