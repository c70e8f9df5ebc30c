//! `whilly plan import gh:OWNER/REPO[:LABEL]`: the open issues with the label as the tasks of one
//! plan (`gh-owner-repo`), merged idempotently on every re-run (see `forge::import`).

use super::context::Context;
use super::exit;
use crate::engine::configure;
use crate::forge::github::{GitHub, GitHubError};
use crate::forge::import::{IssueSet, numbers_to_look_up, plan_from_issues};
use crate::forge::intake::UpstreamIssue;
use crate::forge::refs::{BoardSource, IssueSource};
use crate::store::{ImportOptions, StoreError};
use anyhow::Context as _;

/// How `plan import gh:…|ghproject:…` was asked.
pub struct GhImport {
    pub strict: bool,
    pub budget: Option<f64>,
    pub json: bool,
    pub ensure_board_statuses: bool,
}

pub async fn import(ctx: &Context, text: &str, o: &GhImport) -> anyhow::Result<i32> {
    let (strict, budget, json) = (o.strict, o.budget, o.json);
    // A misspelt source is the operator's to fix before any token matters.
    let board_source: Option<BoardSource> = if BoardSource::looks_like(text) {
        Some(text.parse()?)
    } else {
        text.parse::<IssueSource>()?;
        None
    };
    let cfg = ctx.config()?;
    let gh = match configure::github_client(&cfg)? {
        Some(gh) => gh,
        None => {
            errln!("{}", configure::NO_GITHUB_TOKEN);
            return Ok(exit::ENVIRONMENT);
        }
    };
    let found = if let Some(board) = &board_source {
        board_issues(&cfg, &gh.client, board, o.ensure_board_statuses).await
    } else {
        let source: IssueSource = text.parse()?;
        gh.client
            .open_issues_with_label(&source.repo, &source.label)
            .await
            .map(|open| (source, open))
    };
    let (source, open): (IssueSource, Vec<UpstreamIssue>) = match found {
        Ok(found) => found,
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
    let verdicts =
        super::import_gate::decision_gate(ctx, &built.spec, &mut skip, strict, false).await;
    super::plan_checks::warn_guarded_tasks(&built.spec.tasks, &cfg)?;
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
    verdicts.record(store.as_ref(), &report.plan_id).await;
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
        let (from, with) = match &source.board {
            Some((owner, number)) => (format!("board {owner}/{number}"), "in column"),
            None => (source.repo.to_string(), "with"),
        };
        outln!(
            "from {from} ({} open issue{} {with} {}); run it with `whilly run --plan {}`",
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

/// The open issues in a board's column, as the source they are imported under. The issues of
/// one board column must come from one repository (task ids are `GH-<n>`).
async fn board_issues(
    cfg: &crate::config::Config,
    client: &GitHub,
    source: &BoardSource,
    ensure: bool,
) -> Result<(IssueSource, Vec<UpstreamIssue>), GitHubError> {
    let p = &cfg.github.project;
    let column = source
        .column
        .clone()
        .unwrap_or_else(|| p.columns.todo.clone());
    let mut board = client
        .board(&source.owner, source.number, &p.status_field)
        .await?;
    if ensure {
        let missing: Vec<String> = crate::forge::board::columns_used(&p.columns)
            .into_iter()
            .filter(|c| board.column_id(c).is_none())
            .collect();
        if !missing.is_empty() {
            let done = client.add_columns_keeping_cards(&board, &missing).await?;
            board = done.board;
            if !done.added.is_empty() {
                errln!(
                    "board {}: added {}; {} card(s) put back in their column",
                    board.title,
                    done.added.join(", "),
                    done.cards_reset
                );
            }
        }
    }
    if board.column_id(&column).is_none() {
        return Err(GitHubError::BadAnswer {
            what: format!("board {}/{}", source.owner, source.number),
            detail: format!(
                "it has no column {column:?} (it has: {})",
                board
                    .columns
                    .iter()
                    .map(|(_, n)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    let cards = client.cards(&board).await?;
    let redacted = cards.iter().filter(|c| c.kind == "REDACTED").count();
    if redacted > 0 {
        errln!("warning: {redacted} card(s) of the board the token cannot see were skipped");
    }
    let picked: Vec<_> = cards
        .into_iter()
        .filter(|c| c.kind == "ISSUE" && c.state == "OPEN")
        .filter(|c| {
            c.column
                .as_deref()
                .is_some_and(|n| n.eq_ignore_ascii_case(&column))
        })
        .filter_map(|c| Some((c.repo?, c.number?)))
        .collect();
    let mut repos: Vec<String> = picked.iter().map(|(r, _)| r.to_string()).collect();
    repos.sort();
    repos.dedup();
    if repos.len() > 1 {
        return Err(GitHubError::BadAnswer {
            what: format!("board {}/{} column {column:?}", source.owner, source.number),
            detail: format!(
                "its issues come from several repositories ({}): import each with gh:OWNER/REPO:LABEL",
                repos.join(", ")
            ),
        });
    }
    let repo = match picked.first() {
        Some((r, _)) => r.clone(),
        // An empty column: the repository of the configured [github] repo, else a placeholder
        // that only names the plan (nothing is imported from it).
        None => cfg
            .github
            .repo
            .as_deref()
            .and_then(|r| r.parse().ok())
            .unwrap_or_else(|| crate::forge::refs::RepoRef::new(&source.owner, "board")),
    };
    let mut open = Vec::new();
    for (r, n) in &picked {
        open.push(client.upstream_issue(r, *n, false).await?);
    }
    Ok((
        IssueSource {
            repo,
            label: column,
            board: Some((source.owner.clone(), source.number)),
        },
        open,
    ))
}
