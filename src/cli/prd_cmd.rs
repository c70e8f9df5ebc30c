//! `whilly prd new|plan` and `whilly plan challenge`: the PRD wizard and the challenge for
//! scripts and the terminal. This drives the same `prd::Wizard` as the console's `n`, with
//! answers read from a file or the terminal and every step reported on stdout/stderr.

use super::args::{OneShotArgs, PlanOutArgs, PrdCommand};
use super::context::Context;
use super::exit::{self, EnvironmentError, Interrupted};
use crate::domain::Usd;
use crate::prd::{
    self, Applied, Effect, Input, Job, JobContext, JobDone, OneShot, OneShotError, PlanOptions,
    PrdError, Stage, Wizard, WizardOptions,
};
use anyhow::{Context as _, bail};
use std::collections::VecDeque;
use std::io::{BufRead, IsTerminal};
use std::path::{Path, PathBuf};

pub(crate) async fn run(ctx: &Context, cmd: PrdCommand) -> anyhow::Result<i32> {
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
                (None, true) => Answers::File(VecDeque::new()),
                (None, false) if std::io::stdin().is_terminal() => Answers::Terminal,
                (None, false) => bail!(
                    "stdin is not a terminal: give the answers with --answers-file FILE, or --no-interview"
                ),
            };
            // No answers to give: no questions to ask.
            let none = matches!(&answers, Answers::File(a) if a.is_empty());
            let opts = WizardOptions {
                max_questions: if none { 0 } else { max_questions },
                plan: plan_options(&out),
            };
            let agent = one_shot(ctx, &agent)?;
            let mut driver = Driver::new(ctx, &agent, &out, answers, no_plan);
            let code = driver.drive(Wizard::new(opts), Input::Idea(idea)).await?;
            outln!("cost: {}", driver.cost);
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
                plan: plan_options(&out),
                ..WizardOptions::default()
            };
            let agent = one_shot(ctx, &agent)?;
            let answers = Answers::File(VecDeque::new());
            let mut driver = Driver::new(ctx, &agent, &out, answers, false);
            let code = driver
                .drive(Wizard::new(opts), Input::UsePrd(prd_file))
                .await?;
            outln!("cost: {}", driver.cost);
            Ok(code)
        }
    }
}

fn plan_options(out: &PlanOutArgs) -> PlanOptions {
    PlanOptions {
        repair_rounds: out.repair_rounds,
        plan_id: out.plan_id.clone(),
        project: None,
    }
}

/// The agent for one-shot calls: `--agent` or `run.agent`, read-only, with the configured prices.
pub(crate) fn one_shot(ctx: &Context, args: &OneShotArgs) -> anyhow::Result<OneShot> {
    let timeout = humantime::parse_duration(&args.agent_timeout)
        .with_context(|| format!("--agent-timeout {:?}", args.agent_timeout))?;
    one_shot_from_config(
        &ctx.config()?,
        &ctx.repo_root,
        args.agent.as_deref(),
        timeout,
    )
}

/// The read-only agent `agent` (default `run.agent`) of `cfg` (see
/// [`crate::engine::configure::read_only_agent`]).
pub(crate) fn one_shot_from_config(
    cfg: &crate::config::Config,
    repo_root: &Path,
    agent: Option<&str>,
    timeout: std::time::Duration,
) -> anyhow::Result<OneShot> {
    Ok(crate::engine::configure::read_only_agent(
        cfg, repo_root, agent, timeout,
    )?)
}

/// A missing or unstartable agent is an environment problem (exit 4).
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
pub(super) async fn interruptible<T>(
    fut: impl std::future::Future<Output = Result<T, PrdError>>,
) -> anyhow::Result<T> {
    tokio::select! {
        r = fut => r.map_err(lift),
        _ = tokio::signal::ctrl_c() => Err(Interrupted.into()),
    }
}

enum Answers {
    /// From a file, in order; the interview ends when they run out.
    File(VecDeque<String>),
    Terminal,
}

fn read_answers(path: &Path) -> anyhow::Result<VecDeque<String>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read answers file {}", path.display()))?;
    Ok(text.lines().map(|l| l.trim().to_string()).collect())
}

/// The wizard on stdin/stdout: questions answered from the file or the terminal, jobs run here
/// one at a time, the plan placed as the flags say.
struct Driver<'a> {
    ctx: &'a Context,
    agent: &'a OneShot,
    out: &'a PlanOutArgs,
    answers: Answers,
    /// Stop once the PRD is written.
    no_plan: bool,
    /// Every agent call's cost so far.
    cost: Usd,
    /// Agent calls the last job took.
    last_calls: u32,
}

impl<'a> Driver<'a> {
    fn new(
        ctx: &'a Context,
        agent: &'a OneShot,
        out: &'a PlanOutArgs,
        answers: Answers,
        no_plan: bool,
    ) -> Driver<'a> {
        Driver {
            ctx,
            agent,
            out,
            answers,
            no_plan,
            cost: Usd::ZERO,
            last_calls: 0,
        }
    }

    /// Feeds `first` and everything that follows from it to the wizard until it is over;
    /// returns the exit code.
    async fn drive(&mut self, mut wizard: Wizard, first: Input) -> anyhow::Result<i32> {
        let mut inputs = VecDeque::from([first]);
        while let Some(input) = inputs.pop_front() {
            for effect in wizard.handle(input) {
                match effect {
                    Effect::Run(job) => match self.run(&wizard, job).await? {
                        Some(done) => inputs.push_back(Input::Reply(done.reply)),
                        None => return Ok(exit::FAILED),
                    },
                    Effect::ShowQuestion(q) => inputs.push_back(self.ask(&wizard, &q).await?),
                    Effect::ShowPrd { path, .. } => {
                        outln!("prd: {}", path.display());
                        if self.no_plan {
                            return Ok(exit::OK);
                        }
                        inputs.push_back(Input::MakePlan { edited: None });
                    }
                    Effect::ShowPlan => {
                        self.report_plan(&wizard)?;
                        inputs.push_back(self.placement(&wizard)?);
                    }
                    Effect::Refused(why) if *wizard.stage() == Stage::PlanReady => {
                        return self.keep_refused_plan(&mut wizard, &why).await;
                    }
                    Effect::Refused(why) if *wizard.stage() == Stage::Idea => {
                        bail!("--idea: {why}")
                    }
                    Effect::Refused(why) => bail!("{why}"),
                    Effect::Failed { message, .. } => bail!("{message}"),
                    Effect::Done(applied) => {
                        report_applied(&applied)?;
                        return Ok(exit::OK);
                    }
                }
            }
        }
        bail!("the PRD wizard stopped before its end")
    }

    /// Runs one job, saying what it waits for. `None`: no usable plan came (already reported).
    async fn run(&mut self, wizard: &Wizard, job: Job) -> anyhow::Result<Option<JobDone>> {
        match &job {
            Job::Ask { .. } => errln!(
                "asking the agent for question {}…",
                wizard.answers().len() + 1
            ),
            Job::WritePrd { .. } => errln!("writing the PRD…"),
            Job::MakePlan { .. } => errln!("asking the agent for the plan…"),
            Job::Merge(_) | Job::Import { .. } | Job::WritePlan { .. } => {}
        }
        // The queue is opened only for the jobs that need it.
        let store = match &job {
            Job::Merge(_) | Job::Import { .. } => Some(self.ctx.store().await?),
            _ => None,
        };
        let cx = JobContext {
            agent: self.agent,
            root: &self.ctx.repo_root,
            store: store.as_deref(),
            merge_into: self.out.merge_into.as_deref(),
        };
        match interruptible(prd::run_job(&cx, job)).await {
            Ok(done) => {
                self.cost += done.spent.cost;
                self.last_calls = done.spent.calls;
                Ok(Some(done))
            }
            Err(e) if matches!(e.downcast_ref(), Some(PrdError::PlanInvalid { .. })) => {
                errln!("error: {}", exit::describe(&e));
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// The operator's answer to `question`, from the file or the terminal.
    async fn ask(&mut self, wizard: &Wizard, question: &str) -> anyhow::Result<Input> {
        let n = wizard.answers().len() + 1;
        let (answer, last) = match &mut self.answers {
            Answers::File(queue) => match queue.pop_front() {
                Some(a) => (a, queue.is_empty()),
                None => return Ok(Input::EndInterview),
            },
            Answers::Terminal => {
                errln!(
                    "Q{n}: {question}\n(answer on one line; empty: let the agent decide; Ctrl-D: enough questions)"
                );
                match read_terminal_line().await? {
                    Some(a) => (a, false),
                    None => return Ok(Input::EndInterview),
                }
            }
        };
        outln!("Q{n}: {question}");
        outln!("A{n}: {answer}");
        // The last answer of the file ends the interview: no question nobody will answer.
        Ok(if last {
            Input::LastAnswer(answer)
        } else {
            Input::Answer(answer)
        })
    }

    fn report_plan(&self, wizard: &Wizard) -> anyhow::Result<()> {
        let Some(spec) = wizard.plan() else {
            return Ok(());
        };
        outln!(
            "plan {}: {} tasks ({} agent call{})",
            spec.id,
            spec.tasks.len(),
            self.last_calls,
            if self.last_calls == 1 { "" } else { "s" }
        );
        for g in wizard.gate() {
            let why: Vec<String> = g.failures.iter().map(|f| f.to_string()).collect();
            outln!("gate: {} fails: {}", g.task_id, why.join("; "));
        }
        Ok(())
    }

    /// Where the plan goes: `--merge-into` (the file too with `--plan-out`), `--import`, or
    /// only the file.
    fn placement(&self, wizard: &Wizard) -> anyhow::Result<Input> {
        let plan_out = self
            .out
            .plan_out
            .as_deref()
            .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()));
        if self.out.merge_into.is_some() {
            if let (Some(path), Some(spec)) = (&plan_out, wizard.plan()) {
                prd::write_plan_file(path, spec)?;
                outln!("plan file: {}", path.display());
            }
            return Ok(Input::Merge);
        }
        if self.out.import {
            return Ok(Input::Import(plan_out));
        }
        Ok(Input::WritePlan(plan_out))
    }

    /// The plan may not enter the queue (tasks fail the decision gate): it is written to its
    /// file for the operator to fix, and the command fails.
    async fn keep_refused_plan(&mut self, wizard: &mut Wizard, why: &str) -> anyhow::Result<i32> {
        errln!("error: {why}; nothing entered the queue");
        let plan_out = self
            .out
            .plan_out
            .as_deref()
            .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()));
        let mut inputs = VecDeque::from([Input::WritePlan(plan_out)]);
        while let Some(input) = inputs.pop_front() {
            for effect in wizard.handle(input) {
                match effect {
                    Effect::Run(job) => {
                        if let Some(done) = self.run(wizard, job).await? {
                            inputs.push_back(Input::Reply(done.reply));
                        }
                    }
                    Effect::Done(Applied::Written { path, .. }) => {
                        outln!("plan file: {}", path.display());
                        errln!(
                            "fix those tasks in {p} and import it with `whilly plan import {p}`",
                            p = path.display()
                        );
                    }
                    Effect::Refused(why) | Effect::Failed { message: why, .. } => {
                        errln!("error: the plan could not be kept either: {why}");
                    }
                    _ => {}
                }
            }
        }
        Ok(exit::FAILED)
    }
}

fn report_applied(applied: &Applied) -> anyhow::Result<()> {
    match applied {
        Applied::Merged {
            into,
            added,
            renamed,
        } => {
            for (from, to) in renamed {
                outln!("renamed: {from} -> {to}");
            }
            outln!(
                "merged into plan {into}: {} tasks added ({})",
                added.len(),
                added.join(", ")
            );
        }
        Applied::Imported {
            path,
            plan_id,
            tasks,
        } => {
            outln!("plan file: {}", path.display());
            outln!("imported plan {plan_id} with {tasks} tasks");
        }
        Applied::Written { path, .. } => outln!("plan file: {}", path.display()),
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

/// `whilly plan challenge`: the agent's critique of a plan file or an imported plan, on stdout.
pub(crate) async fn challenge(
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
