//! A GitHub Projects (v2) board kept in step with the queue: every task from an issue has a
//! card, in the column of the task's state ([`crate::forge::board::column_for`]). The sync is a
//! side effect that never fails a task: what fails is an event (`board.sync_failed`) and a
//! warning, retried with backoff, and any later sync fixes the drift. The engine follows the
//! events and syncs the plans they touch after a short quiet time, so a task that goes PENDING
//! → CLAIMED → IN_PROGRESS within it moves once; `whilly board sync|status|ensure` use the same
//! [`BoardSync`].

use super::pull_watch::{TaskPull, plan_pulls};
use crate::config::ProjectConfig;
use crate::forge::board::{CardFacts, column_for, columns_used};
use crate::forge::github::{Board, Card, ColumnsAdded, GitHub, GitHubError};
use crate::forge::intake::source_of;
use crate::forge::refs::RepoRef;
use crate::store::{Store, StoreError, TaskRecord, event_types as et};
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Cards are read from GitHub again this often (someone may have moved one by hand).
const CARDS_FRESH: Duration = Duration::from_secs(300);

#[derive(Debug, thiserror::Error)]
pub(crate) enum BoardError {
    #[error("no project board is configured: set [github.project] owner and number")]
    NotConfigured,
    #[error("{0}")]
    GitHub(#[from] GitHubError),
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// Where one task's card is and where it belongs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CardState {
    pub task_id: String,
    pub issue: String,
    /// The card's id; `None`: the issue is not on the board.
    pub card: Option<String>,
    /// Its column now.
    pub column: Option<String>,
    /// The task's column.
    pub wanted: String,
    /// The wanted column is not on the board (`whilly board ensure` adds it).
    pub column_missing: bool,
}

impl CardState {
    pub(crate) fn drifted(&self) -> bool {
        self.card.is_none()
            || !self
                .column
                .as_deref()
                .is_some_and(|c| c.eq_ignore_ascii_case(&self.wanted))
    }
}

/// What a sync did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SyncReport {
    pub added: Vec<String>,
    /// (issue, from, to).
    pub moved: Vec<(String, Option<String>, String)>,
    /// One line each: what could not be done.
    pub failed: Vec<String>,
    /// Cards the token cannot see.
    pub redacted: usize,
}

pub(crate) struct BoardSync {
    client: GitHub,
    cfg: ProjectConfig,
    store: Arc<dyn Store>,
    board: Option<Board>,
    /// (repo, issue number) → its card, as last read or set.
    cards: HashMap<(String, u64), Card>,
    redacted: usize,
    cards_read: Option<Instant>,
}

impl BoardSync {
    pub(crate) fn new(
        client: GitHub,
        cfg: ProjectConfig,
        store: Arc<dyn Store>,
    ) -> Result<BoardSync, BoardError> {
        if cfg.owner.is_none() || cfg.number.is_none() {
            return Err(BoardError::NotConfigured);
        }
        Ok(BoardSync {
            client,
            cfg,
            store,
            board: None,
            cards: HashMap::new(),
            redacted: 0,
            cards_read: None,
        })
    }

    /// The board (read once).
    pub(crate) async fn board(&mut self) -> Result<Board, BoardError> {
        if let Some(b) = &self.board {
            return Ok(b.clone());
        }
        let (Some(owner), Some(number)) = (self.cfg.owner.clone(), self.cfg.number) else {
            return Err(BoardError::NotConfigured);
        };
        let b = self
            .client
            .board(&owner, number, &self.cfg.status_field)
            .await?;
        self.board = Some(b.clone());
        Ok(b)
    }

    async fn read_cards(&mut self) -> Result<(), BoardError> {
        let board = self.board().await?;
        let cards = self.client.cards(&board).await?;
        self.cards.clear();
        self.redacted = 0;
        for c in cards {
            match (&c.repo, c.number) {
                (Some(repo), Some(n)) => {
                    self.cards
                        .insert((repo.to_string().to_ascii_lowercase(), n), c);
                }
                _ if c.kind == "REDACTED" => self.redacted += 1,
                _ => {}
            }
        }
        if self.redacted > 0 {
            tracing::warn!(
                "board {}: {} card(s) the token cannot see were skipped",
                board.title,
                self.redacted
            );
        }
        self.cards_read = Some(Instant::now());
        Ok(())
    }

    /// Adds the columns the mapping uses that the board lacks; every card is put back in its
    /// column after (GitHub clears them all when the columns change): what was added and how
    /// many cards were put back.
    pub(crate) async fn ensure(&mut self) -> Result<ColumnsAdded, BoardError> {
        let board = self.board().await?;
        let missing: Vec<String> = columns_used(&self.cfg.columns)
            .into_iter()
            .filter(|c| board.column_id(c).is_none())
            .collect();
        if missing.is_empty() {
            return Ok(ColumnsAdded {
                board,
                added: Vec::new(),
                cards_reset: 0,
            });
        }
        let done = self
            .client
            .add_columns_keeping_cards(&board, &missing)
            .await?;
        self.board = Some(done.board.clone());
        Ok(done)
    }

    /// Each task from an issue in `plan_id`: its card and its column, read fresh from GitHub.
    pub(crate) async fn status(&mut self, plan_id: &str) -> Result<Vec<CardState>, BoardError> {
        self.read_cards().await?;
        self.states(plan_id, true).await
    }

    /// `ask_pulls`: ask GitHub where the pull requests stand (a merge moves a card to Done),
    /// rather than trusting the events alone.
    async fn states(
        &mut self,
        plan_id: &str,
        ask_pulls: bool,
    ) -> Result<Vec<CardState>, BoardError> {
        let board = self.board().await?;
        let plan = self.store.get_plan(plan_id).await?;
        let tasks = self.store.list_tasks(plan_id).await?;
        let mut pulls = plan_pulls(&*self.store, plan_id).await?;
        if ask_pulls {
            for f in super::pull_watch::refresh(&self.client, &mut pulls).await {
                tracing::warn!("board: pull request state: {f}");
            }
        }
        Ok(tasks
            .iter()
            .filter_map(|t| self.state_of(&board, t, plan.paused, &pulls))
            .collect())
    }

    fn state_of(
        &self,
        board: &Board,
        t: &TaskRecord,
        paused: bool,
        pulls: &BTreeMap<String, TaskPull>,
    ) -> Option<CardState> {
        let (repo, n, _) = source_of(&t.spec)?;
        let wanted = column_for(
            &CardFacts {
                status: t.status,
                reason: t.reason.as_deref(),
                paused,
                pull: pulls.get(&t.id).map(|p| p.state),
            },
            &self.cfg.columns,
        )
        .to_string();
        let card = self.cards.get(&(repo.to_string().to_ascii_lowercase(), n));
        Some(CardState {
            task_id: t.id.clone(),
            issue: format!("{repo}#{n}"),
            card: card.map(|c| c.id.clone()),
            column: card.and_then(|c| c.column.clone()),
            column_missing: board.column_id(&wanted).is_none(),
            wanted,
        })
    }

    /// Puts every task's card in its column; `fresh`: read the cards from GitHub first.
    pub(crate) async fn sync(
        &mut self,
        plan_id: &str,
        fresh: bool,
    ) -> Result<SyncReport, BoardError> {
        let stale = self.cards_read.is_none_or(|at| at.elapsed() > CARDS_FRESH);
        if fresh || stale {
            self.read_cards().await?;
        }
        let mut states = self.states(plan_id, fresh).await?;
        // An issue added to the board by someone else since the cards were read.
        if !fresh && !stale && states.iter().any(|s| s.card.is_none()) {
            self.read_cards().await?;
            states = self.states(plan_id, false).await?;
        }
        let board = self.board().await?;
        let mut report = SyncReport {
            redacted: self.redacted,
            ..SyncReport::default()
        };
        for s in states.into_iter().filter(CardState::drifted) {
            if let Err(e) = self.bring(&board, plan_id, &s, &mut report).await {
                let line = format!("{}: {e}", s.issue);
                self.event(
                    et::BOARD_SYNC_FAILED,
                    plan_id,
                    Some(&s.task_id),
                    json!({"issue": s.issue, "error": e.to_string(), "board": board.url}),
                )
                .await;
                report.failed.push(line);
            }
        }
        Ok(report)
    }

    async fn bring(
        &mut self,
        board: &Board,
        plan_id: &str,
        s: &CardState,
        report: &mut SyncReport,
    ) -> Result<(), BoardError> {
        let Some(option) = board.column_id(&s.wanted).map(str::to_string) else {
            return Err(BoardError::GitHub(GitHubError::BadAnswer {
                what: format!("board {}", board.title),
                detail: format!(
                    "it has no column {:?}: run `whilly board ensure` to add the missing columns",
                    s.wanted
                ),
            }));
        };
        let (repo, n) = parse_issue(&s.issue)?;
        let card_id = match &s.card {
            Some(id) => id.clone(),
            None => {
                let content = self.client.issue_node_id(&repo, n).await?;
                let id = self.client.add_card(board, &content).await?;
                self.event(
                    et::BOARD_CARD_ADDED,
                    plan_id,
                    Some(&s.task_id),
                    json!({"issue": s.issue, "card": id, "board": board.url}),
                )
                .await;
                report.added.push(s.issue.clone());
                id
            }
        };
        self.client.move_card(board, &card_id, &option).await?;
        self.cards.insert(
            (repo.to_string().to_ascii_lowercase(), n),
            Card {
                id: card_id,
                kind: "ISSUE".into(),
                repo: Some(repo),
                number: Some(n),
                title: String::new(),
                url: String::new(),
                body: String::new(),
                state: String::new(),
                column: Some(s.wanted.clone()),
            },
        );
        self.event(
            et::BOARD_CARD_MOVED,
            plan_id,
            Some(&s.task_id),
            json!({"issue": s.issue, "from": s.column, "to": s.wanted, "board": board.url}),
        )
        .await;
        report
            .moved
            .push((s.issue.clone(), s.column.clone(), s.wanted.clone()));
        Ok(())
    }

    async fn event(
        &self,
        kind: &str,
        plan_id: &str,
        task_id: Option<&str>,
        payload: serde_json::Value,
    ) {
        crate::store::record_event(&*self.store, kind, plan_id, task_id, payload).await;
    }
}

fn parse_issue(issue: &str) -> Result<(RepoRef, u64), BoardError> {
    let bad = || {
        BoardError::GitHub(GitHubError::BadAnswer {
            what: issue.to_string(),
            detail: "not an owner/repo#N issue".into(),
        })
    };
    let (repo, n) = issue.rsplit_once('#').ok_or_else(bad)?;
    Ok((
        repo.parse().map_err(|_| bad())?,
        n.parse().map_err(|_| bad())?,
    ))
}

#[async_trait::async_trait]
impl super::follow::PlanSync for BoardSync {
    fn name(&self) -> &'static str {
        "board"
    }

    fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    async fn sync_plan(&mut self, plan_id: &str) -> Result<Vec<String>, String> {
        match self.sync(plan_id, false).await {
            Ok(r) => Ok(r.failed),
            Err(e) => {
                self.event(
                    et::BOARD_SYNC_FAILED,
                    plan_id,
                    None,
                    json!({"error": e.to_string()}),
                )
                .await;
                Err(e.to_string())
            }
        }
    }
}
