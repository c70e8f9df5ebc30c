//! Stacked work: a task whose dependencies were delivered for review (delivery `branch` or
//! `pr`) and not merged starts from their work (`Workspaces::stack_start` decides what is
//! merged and makes the start), and its pull request goes on top of theirs. What each
//! dependency delivered is read from its DONE event: the push (remote branch and commit) and
//! the pull request.

use crate::domain::TaskSpec;
use crate::store::{EventFilter, Store, StoreResult, event_types as et};
use crate::workspace::DeliveredDep;
use serde_json::{Value, json};

/// One dependency's delivery.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Delivered {
    pub dep: DeliveredDep,
    /// Its pull request as the attempt recorded it (`number`, `url`, …), if one was opened.
    pub pull: Option<Value>,
}

/// The pushed deliveries of `task`'s dependencies, in the order the task lists them. A
/// dependency that landed by merging (no push recorded) is not among them.
pub(crate) async fn delivered_deps(
    store: &dyn Store,
    plan_id: &str,
    task: &TaskSpec,
) -> StoreResult<Vec<Delivered>> {
    let mut out = Vec::new();
    for dep in &task.dependencies {
        let done = store
            .events(&EventFilter {
                plan_id: Some(plan_id.to_string()),
                task_id: Some(dep.clone()),
                event_types: vec![et::TASK_DONE.to_string(), et::TASK_APPROVED.to_string()],
                limit: Some(1),
                newest: true,
                ..Default::default()
            })
            .await?;
        if let Some(d) = done.last().and_then(|e| delivered(dep, &e.payload)) {
            out.push(d);
        }
    }
    Ok(out)
}

/// What a DONE event's payload says was pushed.
fn delivered(task_id: &str, payload: &Value) -> Option<Delivered> {
    let pushed = &payload["pushed"];
    let (branch, commit) = (pushed["branch"].as_str()?, pushed["commit"].as_str()?);
    Some(Delivered {
        dep: DeliveredDep {
            task_id: task_id.to_string(),
            branch: branch.to_string(),
            commit: commit.to_string(),
        },
        pull: payload
            .get("pull_request")
            .filter(|p| p["number"].is_u64())
            .cloned(),
    })
}

/// The evidence entry naming what a task was stacked on: each dependency's branch, commit and
/// pull request, in `stacked_on`'s order.
pub(crate) fn evidence(delivered: &[Delivered], stacked_on: &[String]) -> Value {
    Value::Array(
        stacked_on
            .iter()
            .filter_map(|id| delivered.iter().find(|d| &d.dep.task_id == id))
            .map(|d| {
                json!({
                    "task": d.dep.task_id,
                    "branch": d.dep.branch,
                    "commit": d.dep.commit,
                    "pull_request": d.pull,
                })
            })
            .collect(),
    )
}

/// The branch a stacked task's pull request goes into: the one dependency's branch it was
/// stacked on; `None` (the usual base) when on none, or on several (a pull request has one
/// base; the body names them all).
pub(crate) fn pull_base(evidence: &Value) -> Option<String> {
    match evidence["stacked_on"].as_array().map(Vec::as_slice) {
        Some([one]) => one["branch"].as_str().map(str::to_string),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_push_is_a_delivery_and_a_merge_is_not() {
        let pushed = json!({"pushed": {"remote": "origin", "branch": "whilly/p/T-1", "commit": "abc"},
                            "pull_request": {"number": 7, "url": "u"}});
        let d = delivered("T-1", &pushed).unwrap();
        assert_eq!(d.dep.branch, "whilly/p/T-1");
        assert_eq!(d.pull.unwrap()["number"], 7);
        assert!(delivered("T-1", &json!({"delivery": {"kind": "merged"}})).is_none());
    }

    #[test]
    fn one_stacked_dependency_is_the_base_several_are_not() {
        let d = |id: &str| Delivered {
            dep: DeliveredDep {
                task_id: id.into(),
                branch: format!("whilly/p/{id}"),
                commit: "c".into(),
            },
            pull: None,
        };
        let all = [d("T-1"), d("T-2")];
        let one = json!({"stacked_on": evidence(&all, &["T-2".into()])});
        assert_eq!(pull_base(&one).as_deref(), Some("whilly/p/T-2"));
        let two = json!({"stacked_on": evidence(&all, &["T-1".into(), "T-2".into()])});
        assert_eq!(pull_base(&two), None);
        assert_eq!(pull_base(&json!({})), None);
    }
}
