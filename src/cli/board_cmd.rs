//! `whilly board ensure|status|sync`: the GitHub Projects (v2) board of `[github.project]`.

use super::args::BoardCommand;
use super::context::Context;
use super::exit;
use crate::engine::board_sync::{BoardError, BoardSync, CardState};
use crate::engine::configure;
use crate::forge::intake::source_of;
use crate::store::Store;
use std::sync::Arc;

pub(crate) async fn run(ctx: &Context, cmd: BoardCommand) -> anyhow::Result<i32> {
    match board(ctx, cmd).await {
        Err(e) => match e.downcast_ref::<BoardError>() {
            // GitHub's errors say what and where; their exit code says whose fault.
            Some(b) => {
                errln!("error: {b}");
                Ok(match b {
                    BoardError::GitHub(g) => g.exit_code(),
                    BoardError::Store(_) => exit::ENVIRONMENT,
                    BoardError::NotConfigured => exit::FAILED,
                })
            }
            None => Err(e),
        },
        done => done,
    }
}

async fn board(ctx: &Context, cmd: BoardCommand) -> anyhow::Result<i32> {
    let cfg = ctx.config()?;
    let p = &cfg.github.project;
    if p.owner.is_none() || p.number.is_none() {
        anyhow::bail!(
            "no project board is configured: set [github.project] owner and number in whilly.toml (see whilly.example.toml)"
        );
    }
    let Some(access) = configure::github_client(&cfg)? else {
        anyhow::bail!(configure::NO_GITHUB_TOKEN);
    };
    let store = ctx.store().await?;
    let mut sync = BoardSync::new(access.client, p.clone(), store.clone())?;
    match cmd {
        BoardCommand::Ensure => {
            let done = sync.ensure().await?;
            let board = &done.board;
            if done.added.is_empty() {
                outln!(
                    "board {} has every column: {}",
                    board.title,
                    names(&board.columns)
                );
            } else {
                outln!("board {}: added {}", board.title, done.added.join(", "));
                outln!(
                    "{} card(s) put back in their column (adding a column clears every card's on GitHub)",
                    done.cards_reset
                );
            }
            Ok(exit::OK)
        }
        BoardCommand::Status { plan, json } => {
            let mut all: Vec<(String, Vec<CardState>)> = Vec::new();
            for plan in plans(&store, plan).await? {
                let states = sync.status(&plan).await?;
                all.push((plan, states));
            }
            let drifted = all
                .iter()
                .flat_map(|(_, s)| s)
                .filter(|s| s.drifted())
                .count();
            if json {
                let v: Vec<serde_json::Value> = all
                    .iter()
                    .flat_map(|(plan, states)| {
                        states.iter().map(move |s| {
                            serde_json::json!({
                                "plan": plan, "task": s.task_id, "issue": s.issue,
                                "card": s.card, "column": s.column, "wanted": s.wanted,
                                "drifted": s.drifted(), "column_missing": s.column_missing,
                            })
                        })
                    })
                    .collect();
                outln!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                let board = sync.board().await?;
                outln!("board {} ({})", board.title, board.url);
                for (plan, states) in &all {
                    outln!("plan {plan}");
                    for s in states {
                        let now = match (&s.card, &s.column) {
                            (None, _) => "not on the board".to_string(),
                            (Some(_), None) => "no column".to_string(),
                            (Some(_), Some(c)) => c.clone(),
                        };
                        let note = if !s.drifted() {
                            String::new()
                        } else if s.column_missing {
                            format!("  → {} (no such column: whilly board ensure)", s.wanted)
                        } else {
                            format!("  → {} (drift)", s.wanted)
                        };
                        outln!("  {:<12} {:<20} {now}{note}", s.task_id, s.issue);
                    }
                }
                outln!(
                    "{drifted} card(s) out of step{}",
                    if drifted > 0 {
                        ": whilly board sync"
                    } else {
                        ""
                    }
                );
            }
            Ok(if drifted > 0 { exit::FAILED } else { exit::OK })
        }
        BoardCommand::Sync { plan } => {
            let mut failed = 0;
            for plan in plans(&store, plan).await? {
                let r = sync.sync(&plan, true).await?;
                for (issue, from, to) in &r.moved {
                    outln!(
                        "{plan}: {issue}: {} → {to}",
                        from.as_deref().unwrap_or("(no column)")
                    );
                }
                for issue in &r.added {
                    outln!("{plan}: {issue}: put on the board");
                }
                for f in &r.failed {
                    errln!("{plan}: {f}");
                }
                if r.redacted > 0 {
                    errln!(
                        "warning: {} card(s) the token cannot see were skipped",
                        r.redacted
                    );
                }
                if r.moved.is_empty() && r.failed.is_empty() {
                    outln!("{plan}: every card is in its column");
                }
                failed += r.failed.len();
            }
            Ok(if failed > 0 { exit::FAILED } else { exit::OK })
        }
    }
}

fn names(cols: &[(String, String)]) -> String {
    cols.iter()
        .map(|(_, n)| n.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The plan named, or every plan with a task from an issue.
async fn plans(store: &Arc<dyn Store>, plan: Option<String>) -> anyhow::Result<Vec<String>> {
    if let Some(p) = plan {
        store.get_plan(&p).await?;
        return Ok(vec![p]);
    }
    let mut out = Vec::new();
    for p in store.list_plans().await? {
        let tasks = store.list_tasks(&p.plan.id).await?;
        if tasks.iter().any(|t| source_of(&t.spec).is_some()) {
            out.push(p.plan.id);
        }
    }
    Ok(out)
}
