//! Where each task's pull request stands: first as the plan's `github.pr_*` events tell it (the
//! moment it was opened or marked ready), then as GitHub says when asked again — a reviewer may
//! have merged, closed or un-drafted it since. Asking again is cheap: the client sends the last
//! ETag, and an unchanged pull request answers 304, which GitHub does not count against the
//! rate limit. Merged and closed are final, so they are not asked about again.

use crate::forge::github::{GitHub, PrState};
use crate::forge::refs::RepoRef;
use crate::store::{Event, EventFilter, Store, StoreResult, event_types as et};
use std::collections::BTreeMap;

/// One task's pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskPull {
    /// `owner/name`; empty when the event did not say (older events), then it is not refreshed.
    pub repo: String,
    pub number: u64,
    pub url: String,
    pub state: PrState,
}

/// The event types that tell of a task's pull request.
pub(crate) const PULL_EVENTS: [&str; 3] = [
    et::GITHUB_PR_OPENED,
    et::GITHUB_PR_UPDATED,
    et::GITHUB_PR_READY,
];

/// Folds `events` (oldest first) into `pulls`, by task id: the newest word on each wins.
pub(crate) fn apply_events<'a>(
    pulls: &mut BTreeMap<String, TaskPull>,
    events: impl IntoIterator<Item = &'a Event>,
) {
    for e in events {
        let Some(task) = e.task_id.as_deref() else {
            continue;
        };
        let p = &e.payload;
        match e.event_type.as_str() {
            et::GITHUB_PR_OPENED | et::GITHUB_PR_UPDATED => {
                let Some(number) = p["number"].as_u64() else {
                    continue;
                };
                let state = if p["draft"].as_bool().unwrap_or(false) {
                    PrState::Draft
                } else {
                    PrState::Open
                };
                pulls.insert(
                    task.to_string(),
                    TaskPull {
                        repo: p["repo"]
                            .as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| repo_of_url(p["url"].as_str().unwrap_or_default())),
                        number,
                        url: p["url"].as_str().unwrap_or_default().to_string(),
                        state,
                    },
                );
            }
            et::GITHUB_PR_READY => {
                if let Some(pull) = pulls.get_mut(task) {
                    pull.state = PrState::Open;
                }
            }
            _ => {}
        }
    }
}

/// `owner/name` of `https://HOST/owner/name/pull/N`; empty when it is not such a URL.
fn repo_of_url(url: &str) -> String {
    let path = url.split("://").nth(1).unwrap_or_default();
    let parts: Vec<&str> = path.split('/').collect();
    match parts.as_slice() {
        [_, owner, name, "pull", _n, ..] => format!("{owner}/{name}"),
        _ => String::new(),
    }
}

/// Every pull request of the plan's tasks, from its events (only those types are read).
pub(crate) async fn plan_pulls(
    store: &dyn Store,
    plan_id: &str,
) -> StoreResult<BTreeMap<String, TaskPull>> {
    let events = store
        .events(&EventFilter {
            plan_id: Some(plan_id.to_string()),
            event_types: PULL_EVENTS.iter().map(|t| t.to_string()).collect(),
            ..EventFilter::default()
        })
        .await?;
    let mut pulls = BTreeMap::new();
    apply_events(&mut pulls, &events);
    Ok(pulls)
}

/// Asks GitHub where each open (or draft) pull request stands now; returns what could not be
/// asked, one line per pull request. Merged and closed ones are left alone.
pub(crate) async fn refresh(
    client: &GitHub,
    pulls: &mut BTreeMap<String, TaskPull>,
) -> Vec<String> {
    let mut failed = Vec::new();
    for pull in pulls.values_mut() {
        if matches!(pull.state, PrState::Merged | PrState::Closed) {
            continue;
        }
        let Ok(repo) = pull.repo.parse::<RepoRef>() else {
            continue;
        };
        match client.pull(&repo, pull.number).await {
            Ok(now) => pull.state = now.pr_state(),
            Err(e) => failed.push(format!("{repo}#{}: {e}", pull.number)),
        }
    }
    failed
}

/// How the console names a pull request's state.
pub(crate) fn state_label(state: PrState) -> &'static str {
    match state {
        PrState::Draft => "draft",
        PrState::Open => "ready",
        PrState::Merged => "merged",
        PrState::Closed => "closed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(kind: &str, task: &str, payload: serde_json::Value) -> Event {
        Event {
            id: 1,
            ts: chrono::Utc::now(),
            event_type: kind.into(),
            plan_id: Some("p".into()),
            task_id: Some(task.into()),
            worker_id: None,
            epoch: None,
            from_status: None,
            to_status: None,
            payload,
        }
    }

    #[test]
    fn the_newest_event_of_each_task_wins() {
        let events = [
            event(
                et::GITHUB_PR_OPENED,
                "T-1",
                json!({"number": 4, "url": "https://github.com/o/r/pull/4", "draft": true, "repo": "o/r"}),
            ),
            event(
                et::GITHUB_PR_OPENED,
                "T-2",
                json!({"number": 5, "url": "https://github.com/o/r/pull/5", "draft": true}),
            ),
            event(et::GITHUB_PR_READY, "T-1", json!({"number": 4})),
            event(et::GITHUB_LABEL_CHANGED, "T-2", json!({})),
        ];
        let mut pulls = BTreeMap::new();
        apply_events(&mut pulls, &events);
        assert_eq!(pulls["T-1"].state, PrState::Open);
        assert_eq!(pulls["T-2"].state, PrState::Draft);
        assert_eq!(pulls["T-2"].repo, "o/r", "read from the URL when not said");
        assert_eq!(state_label(pulls["T-1"].state), "ready");
    }

    #[test]
    fn a_url_that_is_not_a_pull_request_names_no_repository() {
        assert_eq!(
            repo_of_url("https://ghe.example/acme/api/pull/9"),
            "acme/api"
        );
        assert_eq!(repo_of_url("https://github.com/acme/api/issues/9"), "");
        assert_eq!(repo_of_url("nonsense"), "");
    }
}
