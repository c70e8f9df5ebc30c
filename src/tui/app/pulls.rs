//! The console's look at its plan's pull requests: now and then (and at once on opening), the
//! plan's `github.pr_*` events are read — only those, so an idle console costs one small query
//! a minute — and GitHub is asked where each open one stands. The answers arrive as
//! [`Msg::Pulls`]. A plan without pull requests never looks for a GitHub token.

use super::Msg;
use crate::config::Config;
use crate::engine::pull_watch::{plan_pulls, refresh};
use crate::forge::github::GitHub;
use crate::store::Store;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// How often GitHub is asked again: a reviewer's merge shows within a minute, and an unchanged
/// pull request costs nothing (its ETag answers 304).
const REFRESH: Duration = Duration::from_secs(60);

pub(super) async fn watch(
    store: Arc<dyn Store>,
    plan_id: String,
    cfg: Config,
    tx: mpsc::UnboundedSender<Msg>,
) {
    let mut client: Option<GitHub> = None;
    let mut looked_for_token = false;
    let mut tick = tokio::time::interval(REFRESH);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let mut pulls = match plan_pulls(&*store, &plan_id).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("reading the plan's pull requests: {e}");
                continue;
            }
        };
        if pulls.is_empty() {
            continue;
        }
        if !looked_for_token {
            looked_for_token = true;
            // `gh auth token` may take a moment: not on the console's thread.
            let cfg = cfg.clone();
            client =
                tokio::task::spawn_blocking(move || crate::engine::configure::github_client(&cfg))
                    .await
                    .ok()
                    .and_then(|found| match found {
                        Ok(access) => access.map(|a| a.client),
                        Err(e) => {
                            tracing::warn!("pull request states: {e}");
                            None
                        }
                    });
        }
        if let Some(c) = &client {
            for failed in refresh(c, &mut pulls).await {
                tracing::warn!("pull request state: {failed}");
            }
        }
        if tx.send(Msg::Pulls(pulls)).is_err() {
            return;
        }
    }
}
