//! `whilly handoff list|show|complete`: answering tasks a human does.

use super::args::HandoffCommand;
use super::context::Context;
use super::exit;
use super::plan_view::table;
use crate::agent::handoff::{complete, poll_dir, read_meta, read_prompt};
use crate::agent::{HandoffDir, HandoffPoll, HandoffStatus};
use crate::domain::Usd;

pub(crate) async fn run(ctx: &Context, cmd: HandoffCommand) -> anyhow::Result<i32> {
    let dir = HandoffDir::in_project(&ctx.repo_root);
    match cmd {
        HandoffCommand::List { json, plan } => {
            let mut entries = dir.list()?;
            if let Some(plan) = &plan {
                entries.retain(|e| e.meta.as_ref().is_ok_and(|m| &m.plan_id == plan));
            }
            if json {
                let v: Vec<_> = entries
                    .iter()
                    .map(|e| {
                        serde_json::json!({
                            "dir": e.dir,
                            "meta": e.meta.as_ref().ok(),
                            "meta_error": e.meta.as_ref().err(),
                            "state": state_text(&e.state),
                        })
                    })
                    .collect();
                outln!("{}", serde_json::to_string_pretty(&v)?);
                return Ok(exit::OK);
            }
            if entries.is_empty() {
                outln!("No task is waiting for a human.");
                return Ok(exit::OK);
            }
            let mut rows = vec![vec![
                "TASK".to_string(),
                "PLAN".into(),
                "WAITING SINCE".into(),
                "STATE".into(),
            ]];
            for e in &entries {
                match &e.meta {
                    Ok(m) => rows.push(vec![
                        m.task_id.clone(),
                        m.plan_id.clone(),
                        m.started_at.format("%Y-%m-%d %H:%M").to_string(),
                        match &m.bounced {
                            // The answer before this one was approved, then a check failed.
                            Some(b) => format!(
                                "{} — {}",
                                state_text(&e.state),
                                b.lines().next().unwrap_or_default()
                            ),
                            None => state_text(&e.state),
                        },
                    ]),
                    Err(err) => rows.push(vec![
                        e.dir.display().to_string(),
                        "?".into(),
                        "?".into(),
                        err.clone(),
                    ]),
                }
            }
            out!("{}", table(&rows));
            outln!(
                "\nAnswer one with: whilly handoff complete TASK_ID [--plan ID] --status complete|failed|blocked|human_loop|partial [--message …]"
            );
            Ok(exit::OK)
        }
        HandoffCommand::Show {
            task_id,
            plan,
            prompt,
        } => show(ctx, &dir, &task_id, plan.as_deref(), prompt).await,
        HandoffCommand::Complete {
            task_id,
            plan,
            status,
            message,
            cost_usd,
        } => {
            let status: HandoffStatus = status
                .parse()
                .map_err(|e: String| anyhow::anyhow!("--status: {e}"))?;
            if let Some(c) = cost_usd
                && (!c.is_finite() || c < 0.0)
            {
                anyhow::bail!("--cost-usd {c}: expected a non-negative number of US dollars");
            }
            let task_dir = dir.find(&task_id, plan.as_deref())?;
            // The same record the console's inbox writes, before the answer is given: the audit
            // trail says who decided, and a send-back comment reaches the next attempt.
            let meta = read_meta(&task_dir)?;
            let verb = match status {
                HandoffStatus::Complete => "approve",
                HandoffStatus::Failed => "reject",
                HandoffStatus::Partial => "send_back",
                HandoffStatus::Blocked => "block",
                HandoffStatus::HumanLoop => "human_loop",
            };
            let store = ctx.store().await?;
            crate::engine::decision::record(
                store.as_ref(),
                &meta.plan_id,
                &meta.task_id,
                verb,
                message.as_deref().unwrap_or(""),
                "handoff",
                crate::engine::decision::Source::Cli,
            )
            .await?;
            let path = complete(
                &task_dir,
                status,
                message.as_deref().unwrap_or(""),
                cost_usd.map(Usd::from_f64),
            )?;
            outln!(
                "wrote {}; the waiting worker applies it within a second",
                path.display()
            );
            Ok(exit::OK)
        }
    }
}

fn state_text(p: &HandoffPoll) -> String {
    match p {
        HandoffPoll::Waiting => "waiting for result.json".into(),
        HandoffPoll::Malformed(why) => format!("result.json is malformed: {why}"),
        HandoffPoll::Result(r) => format!("answered: {}", r.status),
    }
}

/// `whilly handoff show`: the waiting task for a person, and the commands that answer it.
async fn show(
    ctx: &Context,
    dir: &HandoffDir,
    task_id: &str,
    plan: Option<&str>,
    prompt: bool,
) -> anyhow::Result<i32> {
    let task_dir = dir.find(task_id, plan)?;
    let meta = read_meta(&task_dir)?;
    if prompt {
        out!("{}", read_prompt(&task_dir).unwrap_or_default());
        return Ok(exit::OK);
    }
    outln!(
        "task {}  plan {}  waiting since {}",
        meta.task_id,
        meta.plan_id,
        meta.started_at.format("%Y-%m-%d %H:%M")
    );
    outln!("work in: {}", meta.cwd.display());
    outln!("state:   {}\n", state_text(&poll_dir(&task_dir)));
    // The task as written, for a person; the agent's envelope is behind --prompt. And when
    // an earlier answer was approved but its checks failed, that comes first.
    let (brief, bounced) = match ctx.store().await {
        Ok(store) => {
            let brief = store
                .get_task(&meta.plan_id, &meta.task_id)
                .await
                .map(|t| t.spec.brief())
                .ok();
            let events = store
                .events(&crate::store::EventFilter {
                    plan_id: Some(meta.plan_id.clone()),
                    task_id: Some(meta.task_id.clone()),
                    ..Default::default()
                })
                .await
                .unwrap_or_default();
            let refs: Vec<&crate::store::Event> = events.iter().collect();
            (
                brief,
                meta.bounced
                    .clone()
                    .or_else(|| crate::engine::trail::bounced(&refs)),
            )
        }
        Err(_) => (None, meta.bounced.clone()),
    };
    if let Some(b) = bounced {
        let mut lines = b.lines();
        if let Some(head) = lines.next() {
            outln!("bounced: {head}");
        }
        for l in lines {
            outln!("  {l}");
        }
        outln!();
    }
    match brief {
        Some(b) => outln!("{b}\n"),
        None => outln!(
            "(the task is not in the queue any more; `--prompt` prints what was handed over)\n"
        ),
    }
    let plan_flag = format!(" --plan {}", meta.plan_id);
    outln!(
        "when it is done:   whilly handoff complete {}{plan_flag} --status complete --message \"…\"",
        meta.task_id
    );
    outln!(
        "if you cannot:     whilly handoff complete {}{plan_flag} --status blocked --message \"why\"",
        meta.task_id
    );
    outln!(
        "the agent's prompt: whilly handoff show {}{plan_flag} --prompt",
        meta.task_id
    );
    Ok(exit::OK)
}
