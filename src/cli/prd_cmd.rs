//! `whilly prd new|plan` and `whilly plan challenge`: the PRD wizard and the challenge for
//! scripts and tests (the console drives the same `crate::prd` API step by step).

use super::args::{OneShotArgs, PlanOutArgs, PrdCommand};
use super::context::Context;
use super::exit::{self, EnvironmentError, Interrupted};
use crate::prd::{
    self, Collisions, GeneratedPlan, OneShot, OneShotError, PrdError, Step, Wizard, WizardOptions,
};
use anyhow::{Context as _, bail};
use std::io::{BufRead, IsTerminal};
use std::path::{Path, PathBuf};

pub async fn run(ctx: &Context, cmd: PrdCommand) -> anyhow::Result<i32> {
    match cmd {
        PrdCommand::New {
            idea,
            answers_file,
            no_interview,
            max_questions,
            no_plan,
            agent,
            out,
        } => {
            let answers = match (&answers_file, no_interview) {
                (Some(f), _) => Answers::File(read_answers(f)?),
                (None, true) => Answers::File(Vec::new()),
                (None, false) if std::io::stdin().is_terminal() => Answers::Terminal,
                (None, false) => bail!(
                    "stdin is not a terminal: give the answers with --answers-file FILE, or --no-interview"
                ),
            };
            let opts = WizardOptions {
                max_questions: if no_interview { 0 } else { max_questions },
                repair_rounds: out.repair_rounds,
                plan_id: out.plan_id.clone(),
                project: None,
            };
            let agent = one_shot(ctx, &agent)?;
            let mut wizard = Wizard::new(agent, &ctx.repo_root, idea.clone(), opts);
            interview(&mut wizard, answers).await?;
            errln!("writing the PRD…");
            let prd_path = interruptible(wizard.write_prd()).await?;
            outln!("prd: {}", prd_path.display());
            if no_plan {
                outln!("cost: {}", wizard.cost());
                return Ok(exit::OK);
            }
            let code = plan_and_place(ctx, &mut wizard, &out).await?;
            outln!("cost: {}", wizard.cost());
            Ok(code)
        }
        PrdCommand::Plan {
            prd_file,
            agent,
            out,
        } => {
            if !prd_file.is_file() {
                bail!("{}: no such PRD file", prd_file.display());
            }
            let prd_file = std::path::absolute(&prd_file).unwrap_or(prd_file);
            let opts = WizardOptions {
                repair_rounds: out.repair_rounds,
                plan_id: out.plan_id.clone(),
                ..WizardOptions::default()
            };
            let agent = one_shot(ctx, &agent)?;
            let mut wizard = Wizard::new(agent, &ctx.repo_root, "", opts);
            wizard.use_prd_file(&prd_file);
            let code = plan_and_place(ctx, &mut wizard, &out).await?;
            outln!("cost: {}", wizard.cost());
            Ok(code)
        }
    }
}

/// The agent for one-shot calls: `--agent` or `run.agent`, read-only, with the configured prices.
pub fn one_shot(ctx: &Context, args: &OneShotArgs) -> anyhow::Result<OneShot> {
    let timeout = humantime::parse_duration(&args.agent_timeout)
        .with_context(|| format!("--agent-timeout {:?}", args.agent_timeout))?;
    one_shot_from_config(
        &ctx.config()?,
        &ctx.repo_root,
        args.agent.as_deref(),
        timeout,
    )
}

/// The console's way to the same agent: `agent` (default `run.agent`) from `cfg`, read-only,
/// prompt files under `<repo_root>/.whilly/prd/`. A missing binary is an `EnvironmentError`.
pub fn one_shot_from_config(
    cfg: &crate::config::Config,
    repo_root: &Path,
    agent: Option<&str>,
    timeout: std::time::Duration,
) -> anyhow::Result<OneShot> {
    let name = agent.unwrap_or(&cfg.run.agent);
    let settings = crate::engine::configure::agent_settings(cfg, name)?;
    let agent = OneShot::new(&settings, &repo_root.join(prd::STATE_DIR)).map_err(lift_agent)?;
    Ok(agent
        .with_timeout(timeout)
        .with_prices(crate::engine::configure::price_table(cfg)))
}

/// A missing or unstartable agent is an environment problem (exit 2).
fn lift_agent(e: OneShotError) -> anyhow::Error {
    match e {
        OneShotError::Agent(crate::agent::AgentError::BinaryNotFound { .. })
        | OneShotError::Spawn { .. } => EnvironmentError(e.to_string()).into(),
        other => other.into(),
    }
}

fn lift(e: PrdError) -> anyhow::Error {
    match e {
        PrdError::Agent(a) => lift_agent(a),
        other => other.into(),
    }
}

/// Runs an agent call; Ctrl-C drops it, which kills the agent's process group.
async fn interruptible<T>(
    fut: impl std::future::Future<Output = Result<T, PrdError>>,
) -> anyhow::Result<T> {
    tokio::select! {
        r = fut => r.map_err(lift),
        _ = tokio::signal::ctrl_c() => Err(Interrupted.into()),
    }
}

enum Answers {
    File(Vec<String>),
    Terminal,
}

fn read_answers(path: &Path) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read answers file {}", path.display()))?;
    Ok(text.lines().map(|l| l.trim().to_string()).collect())
}

async fn interview(wizard: &mut Wizard, answers: Answers) -> anyhow::Result<()> {
    let mut file_answers = match &answers {
        Answers::File(a) => Some(a.iter()),
        Answers::Terminal => None,
    };
    if file_answers.as_ref().is_some_and(|a| a.len() == 0) {
        wizard.finish_interview();
        return Ok(());
    }
    loop {
        errln!(
            "asking the agent for question {}…",
            wizard.answers().len() + 1
        );
        let question = match interruptible(wizard.next_question()).await? {
            Step::Done => break,
            Step::Question(q) => q,
        };
        let n = wizard.answers().len() + 1;
        let answer = match &mut file_answers {
            Some(it) => match it.next() {
                Some(a) => a.clone(),
                None => {
                    wizard.finish_interview();
                    break;
                }
            },
            None => {
                errln!(
                    "Q{n}: {question}\n(answer on one line; empty: let the agent decide; Ctrl-D: enough questions)"
                );
                match read_terminal_line().await? {
                    Some(a) => a,
                    None => {
                        wizard.finish_interview();
                        break;
                    }
                }
            }
        };
        outln!("Q{n}: {question}");
        outln!("A{n}: {answer}");
        wizard.answer(answer)?;
        if file_answers.as_ref().is_some_and(|a| a.len() == 0) {
            wizard.finish_interview();
            break;
        }
    }
    Ok(())
}

async fn read_terminal_line() -> anyhow::Result<Option<String>> {
    let line = tokio::task::spawn_blocking(|| {
        let mut s = String::new();
        match std::io::stdin().lock().read_line(&mut s) {
            Ok(0) => Ok(None),
            Ok(_) => Ok(Some(s.trim().to_string())),
            Err(e) => Err(e),
        }
    });
    tokio::select! {
        r = line => Ok(r.context("reading the terminal")??),
        _ = tokio::signal::ctrl_c() => Err(Interrupted.into()),
    }
}

/// Generates the plan, reports the gate, writes it and imports or merges it as asked.
async fn plan_and_place(
    ctx: &Context,
    wizard: &mut Wizard,
    out: &PlanOutArgs,
) -> anyhow::Result<i32> {
    errln!("asking the agent for the plan…");
    let generated: GeneratedPlan = match interruptible(wizard.generate_plan()).await {
        Ok(g) => g.clone(),
        Err(e) => {
            if let Some(PrdError::PlanInvalid { .. }) = e.downcast_ref::<PrdError>() {
                errln!("error: {}", exit::describe(&e));
                return Ok(exit::FAILED);
            }
            return Err(e);
        }
    };
    outln!(
        "plan {}: {} tasks ({} agent call{})",
        generated.spec.id,
        generated.spec.tasks.len(),
        generated.calls,
        if generated.calls == 1 { "" } else { "s" }
    );
    for g in &generated.gate {
        let why: Vec<String> = g.failures.iter().map(|f| f.to_string()).collect();
        outln!("gate: {} fails: {}", g.task_id, why.join("; "));
    }
    if let Some(target) = &out.merge_into {
        if let Some(path) = &out.plan_out {
            crate::fsutil::atomic_write(
                path,
                crate::plan::canonical_json(&generated.spec).as_bytes(),
            )
            .with_context(|| format!("cannot write {}", path.display()))?;
            outln!("plan file: {}", path.display());
        }
        let store = ctx.store().await?;
        let (merged, report) = wizard
            .merge_into(store.as_ref(), target, Collisions::Rename)
            .await
            .map_err(lift)?;
        for (from, to) in &merged.renamed {
            outln!("renamed: {from} -> {to}");
        }
        outln!(
            "merged into plan {}: {} tasks added ({})",
            report.plan_id,
            merged.added.len(),
            merged.added.join(", ")
        );
        return Ok(exit::OK);
    }
    if out.import {
        let store = ctx.store().await?;
        let (path, spec, report) = wizard
            .save_as_new_plan(store.as_ref(), out.plan_out.as_deref())
            .await
            .map_err(lift)?;
        outln!("plan file: {}", path.display());
        outln!(
            "imported plan {} with {} tasks",
            spec.id,
            report.created.len()
        );
        return Ok(exit::OK);
    }
    let path: PathBuf = match (&out.plan_out, wizard.prd_path()) {
        (Some(p), _) => p.clone(),
        (None, Some(prd)) => prd::default_plan_path(prd),
        (None, None) => bail!("--plan-out is needed"),
    };
    crate::fsutil::atomic_write(
        &path,
        crate::plan::canonical_json(&generated.spec).as_bytes(),
    )
    .with_context(|| format!("cannot write {}", path.display()))?;
    outln!("plan file: {}", path.display());
    Ok(exit::OK)
}

/// `whilly plan challenge`: the agent's critique of a plan file or an imported plan, on stdout.
pub async fn challenge(
    ctx: &Context,
    plan_file: Option<PathBuf>,
    plan_id: Option<String>,
    agent: &OneShotArgs,
) -> anyhow::Result<i32> {
    let spec = match (plan_file, plan_id) {
        (Some(file), _) => {
            let report = crate::plan::load_plan_file(&file, false)?;
            match report.valid_plan() {
                Some(p) => p.clone(),
                None => {
                    eprint!("{}", crate::plan::render_check(&report, false));
                    bail!("{}: fix the errors above first", file.display());
                }
            }
        }
        (None, Some(id)) => ctx.store().await?.export_plan(&id).await?,
        (None, None) => bail!("give a plan file or --plan ID"),
    };
    let agent = one_shot(ctx, agent)?;
    errln!(
        "asking {} to challenge plan {}…",
        agent.agent_name(),
        spec.id
    );
    let challenge = interruptible(prd::challenge_plan(&agent, &ctx.repo_root, &spec)).await?;
    outln!("{}", challenge.text.trim_end());
    errln!("cost: {}", challenge.cost);
    Ok(exit::OK)
}
