//! GitHub as a source: the open issues with a label (`gh:OWNER/REPO[:LABEL]`), or the issues in
//! a Projects board's column (`ghproject:OWNER/NUMBER[:COLUMN]`), as the tasks of one plan merged
//! idempotently on every re-run (see `forge::import`).

use super::{Fetched, IntakeEnv, IntakeError, IntakeOptions, Note, Source, stored_tasks};
use crate::config::Config;
use crate::engine::configure;
use crate::forge::github::{GitHub, GitHubError};
use crate::forge::import::{IssueSet, numbers_to_look_up, plan_from_issues};
use crate::forge::intake::UpstreamIssue;
use crate::forge::refs::{BoardSource, IssueSource, RepoRef};

/// Where on GitHub the tasks are.
pub(crate) enum GitHubSource {
    Issues(IssueSource),
    Board {
        board: BoardSource,
        /// Columns the whilly statuses need that the board lacks are added first.
        ensure_statuses: bool,
    },
}

impl GitHubSource {
    /// `text` as written after `plan import` (a misspelt source is the operator's to fix before
    /// any token matters).
    pub(crate) fn parse(text: &str, ensure_statuses: bool) -> Result<GitHubSource, IntakeError> {
        let bad = |e: crate::forge::refs::RefError| IntakeError::Input(e.to_string());
        Ok(if BoardSource::looks_like(text) {
            GitHubSource::Board {
                board: text.parse().map_err(bad)?,
                ensure_statuses,
            }
        } else {
            GitHubSource::Issues(text.parse().map_err(bad)?)
        })
    }

    /// Whether `text` names a GitHub source rather than a file.
    pub(crate) fn looks_like(text: &str) -> bool {
        IssueSource::looks_like(text) || BoardSource::looks_like(text)
    }
}

#[async_trait::async_trait]
impl Source for GitHubSource {
    fn describe(&self) -> String {
        match self {
            GitHubSource::Issues(s) => s.to_string(),
            GitHubSource::Board { board, .. } => format!(
                "ghproject:{}/{}{}",
                board.owner,
                board.number,
                board
                    .column
                    .as_deref()
                    .map(|c| format!(":{c}"))
                    .unwrap_or_default()
            ),
        }
    }

    async fn fetch(
        &self,
        env: &IntakeEnv<'_>,
        _opts: &IntakeOptions,
    ) -> Result<Fetched, IntakeError> {
        let cfg = env.config()?;
        let Some(gh) = configure::github_client(cfg)? else {
            return Err(IntakeError::Environment(
                configure::NO_GITHUB_TOKEN.to_string(),
            ));
        };
        let (source, open) = match self {
            GitHubSource::Board {
                board,
                ensure_statuses,
            } => board_issues(env, cfg, &gh.client, board, *ensure_statuses).await?,
            GitHubSource::Issues(source) => {
                let open = gh
                    .client
                    .open_issues_with_label(&source.repo, &source.label)
                    .await?;
                (source.clone(), open)
            }
        };
        let stored = stored_tasks(self, env.store, &source.plan_id()).await?;
        let mut others = Vec::new();
        for n in numbers_to_look_up(&open, &stored) {
            match gh.client.upstream_issue(&source.repo, n, false).await {
                Ok(i) => others.push(i),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e.into()),
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
            (env.notes)(Note::Refused(r.to_string()));
        }
        for (task, n) in &built.satisfied {
            (env.notes)(Note::Info(format!(
                "{task}: #{n} is closed, so that dependency is met"
            )));
        }
        let (from, with) = match &source.board {
            Some((owner, number)) => (format!("board {owner}/{number}"), "in column"),
            None => (source.repo.to_string(), "with"),
        };
        let n = built.spec.tasks.len();
        Ok(Fetched {
            origin: Some(format!(
                "from {from} ({n} open issue{} {with} {})",
                if n == 1 { "" } else { "s" },
                source.label,
            )),
            spec: built.spec,
            skip: built.skip,
            refused: built.refused.iter().map(|r| r.to_string()).collect(),
        })
    }
}

/// The open issues in a board's column, as the source they are imported under. The issues of
/// one board column must come from one repository (task ids are `GH-<n>`).
async fn board_issues(
    env: &IntakeEnv<'_>,
    cfg: &Config,
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
                (env.notes)(Note::Line(format!(
                    "board {}: added {}; {} card(s) put back in their column",
                    board.title,
                    done.added.join(", "),
                    done.cards_reset
                )));
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
        (env.notes)(Note::Warning(format!(
            "{redacted} card(s) of the board the token cannot see were skipped"
        )));
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
            .unwrap_or_else(|| RepoRef::new(&source.owner, "board")),
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
