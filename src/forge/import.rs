//! The plan `plan import gh:OWNER/REPO[:LABEL]` writes, from the issues GitHub answered: pure,
//! so a re-import's idempotence is tested without a network. Tasks keep their status (the
//! store's import rewrites only tasks that have not started); an issue closed upstream turns
//! its unstarted task SKIPPED with [`CLOSED_UPSTREAM`].

use super::intake::{CLOSED_UPSTREAM, IntakeError, UpstreamIssue, issue_number, task_id, to_task};
use super::refs::IssueSource;
use crate::domain::{PlanSpec, TaskSpec};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// What is known when the plan is built.
#[derive(Debug, Clone, Default)]
pub(crate) struct IssueSet {
    /// The open issues carrying the label.
    pub open: Vec<UpstreamIssue>,
    /// Issues of tasks already in the plan that are no longer in `open`, and issues named by a
    /// `Depends:` line outside `open`, as GitHub answered for each.
    pub others: Vec<UpstreamIssue>,
    /// The stored plan's tasks (empty on a first import).
    pub stored: Vec<TaskSpec>,
}

/// Why an issue's task was left out.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Refusal {
    Intake(IntakeError),
    /// It depends on an open issue that is not part of the import.
    OpenDependency {
        number: u64,
        depends_on: u64,
    },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Intake(e) => write!(f, "{e}"),
            Refusal::OpenDependency { number, depends_on } => write!(
                f,
                "issue #{number} depends on #{depends_on}, which is open but not labelled for this import; label #{depends_on} too, or remove it from the Depends line"
            ),
        }
    }
}

/// The plan, and what the store's import needs besides it.
#[derive(Debug, Clone)]
pub(crate) struct IssuePlan {
    pub spec: PlanSpec,
    /// Tasks to import as SKIPPED, with the reason.
    pub skip: BTreeMap<String, String>,
    pub refused: Vec<Refusal>,
    /// Dependencies dropped because the issue they name is closed (done upstream).
    pub satisfied: Vec<(String, u64)>,
}

/// The plan of `source` from `set`.
pub(crate) fn plan_from_issues(source: &IssueSource, set: &IssueSet) -> IssuePlan {
    let plan_id = source.plan_id();
    let mut refused = Vec::new();
    let mut satisfied = Vec::new();
    let mut skip = BTreeMap::new();
    let mut tasks: Vec<TaskSpec> = Vec::new();
    let open: BTreeSet<u64> = set.open.iter().map(|i| i.number).collect();
    let stored: BTreeMap<&str, &TaskSpec> = set.stored.iter().map(|t| (t.id.as_str(), t)).collect();
    let other = |n: u64| set.others.iter().find(|i| i.number == n);
    let mut sorted: Vec<&UpstreamIssue> = set.open.iter().collect();
    sorted.sort_by_key(|i| i.number);
    for issue in sorted {
        let mut task = match to_task(&source.repo, issue, false) {
            Ok(t) => t,
            Err(e) => {
                refused.push(Refusal::Intake(e));
                continue;
            }
        };
        let mut deps = Vec::new();
        let mut blocked = None;
        for d in std::mem::take(&mut task.dependencies) {
            let Some(n) = issue_number(&d) else {
                continue;
            };
            if open.contains(&n) || stored.contains_key(d.as_str()) {
                deps.push(d);
            } else if other(n).is_some_and(UpstreamIssue::is_closed) {
                satisfied.push((task.id.clone(), n));
            } else {
                blocked = Some(n);
            }
        }
        if let Some(depends_on) = blocked {
            refused.push(Refusal::OpenDependency {
                number: issue.number,
                depends_on,
            });
            continue;
        }
        task.dependencies = deps;
        tasks.push(task);
    }
    // A dependency on a task refused above would dangle: refuse its dependents too.
    loop {
        let present: BTreeSet<String> = tasks
            .iter()
            .map(|t| t.id.clone())
            .chain(stored.keys().map(|k| k.to_string()))
            .collect();
        let Some(pos) = tasks
            .iter()
            .position(|t| t.dependencies.iter().any(|d| !present.contains(d)))
        else {
            break;
        };
        let t = tasks.remove(pos);
        let dep = t
            .dependencies
            .iter()
            .find(|d| !present.contains(*d))
            .and_then(|d| issue_number(d))
            .unwrap_or(0);
        refused.push(Refusal::OpenDependency {
            number: issue_number(&t.id).unwrap_or(0),
            depends_on: dep,
        });
    }
    // Stored tasks whose issue was closed on GitHub: their spec says so (which changes it, so
    // the import rewrites an unstarted one) and they are skipped.
    for t in &set.stored {
        let Some(n) = issue_number(&t.id) else {
            continue;
        };
        if open.contains(&n) {
            continue;
        }
        if let Some(issue) = other(n).filter(|i| i.is_closed()) {
            let mut closed = t.clone();
            if let Some(Value::Object(src)) = closed.extra.get_mut("source") {
                src.insert("state".into(), json!(issue.state.to_ascii_lowercase()));
            }
            skip.insert(t.id.clone(), CLOSED_UPSTREAM.to_string());
            tasks.push(closed);
        }
    }
    let mut extra = serde_json::Map::new();
    extra.insert(
        "source".into(),
        json!({"type": "github", "repo": source.repo.to_string(), "label": source.label}),
    );
    IssuePlan {
        spec: PlanSpec {
            id: plan_id,
            project: source.repo.to_string(),
            extra,
            tasks,
            ..PlanSpec::default()
        },
        skip,
        refused,
        satisfied,
    }
}

/// The issue numbers the plan's import must also ask GitHub about: stored tasks gone from the
/// open list (closed, or unlabelled) and dependencies outside it.
pub(crate) fn numbers_to_look_up(open: &[UpstreamIssue], stored: &[TaskSpec]) -> Vec<u64> {
    let open_set: BTreeSet<u64> = open.iter().map(|i| i.number).collect();
    let mut want = BTreeSet::new();
    for t in stored {
        if let Some(n) = issue_number(&t.id)
            && !open_set.contains(&n)
        {
            want.insert(n);
        }
    }
    for i in open {
        for n in super::intake::parse_body(&i.body).depends {
            if !open_set.contains(&n) && !stored.iter().any(|t| t.id == task_id(n)) {
                want.insert(n);
            }
        }
    }
    want.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issue(n: u64, body: &str, state: &str) -> UpstreamIssue {
        UpstreamIssue {
            number: n,
            title: format!("Issue number {n}"),
            body: body.into(),
            labels: vec!["whilly:ready".into()],
            url: format!("https://github.com/o/r/issues/{n}"),
            state: state.into(),
            comments: vec![],
        }
    }

    fn source() -> IssueSource {
        "gh:o/r".parse().unwrap()
    }

    #[test]
    fn open_issues_become_tasks_and_closed_dependencies_are_satisfied() {
        let set = IssueSet {
            open: vec![
                issue(3, "**Depends:** #1, #2", "open"),
                issue(2, "x", "open"),
            ],
            others: vec![issue(1, "", "closed")],
            stored: vec![],
        };
        let p = plan_from_issues(&source(), &set);
        assert_eq!(p.spec.id, "gh-o-r");
        let ids: Vec<&str> = p.spec.tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, vec!["GH-2", "GH-3"]);
        assert_eq!(p.spec.tasks[1].dependencies, vec!["GH-2"]);
        assert_eq!(p.satisfied, vec![("GH-3".to_string(), 1)]);
        assert!(p.refused.is_empty() && p.skip.is_empty());
    }

    #[test]
    fn an_open_unlabelled_dependency_refuses_the_issue_and_its_dependents() {
        let set = IssueSet {
            open: vec![
                issue(3, "**Depends:** #9", "open"),
                issue(4, "**Depends:** #3", "open"),
            ],
            others: vec![issue(9, "", "open")],
            stored: vec![],
        };
        let p = plan_from_issues(&source(), &set);
        assert!(p.spec.tasks.is_empty(), "{:?}", p.spec.tasks);
        assert_eq!(p.refused.len(), 2);
        assert!(p.refused[0].to_string().contains("#3 depends on #9"));
    }

    #[test]
    fn a_closed_issue_skips_its_stored_task_and_an_unlabelled_one_is_left_alone() {
        let first = plan_from_issues(
            &source(),
            &IssueSet {
                open: vec![issue(1, "", "open"), issue(2, "", "open")],
                ..IssueSet::default()
            },
        );
        let stored = first.spec.tasks.clone();
        assert_eq!(
            numbers_to_look_up(&[issue(2, "", "open")], &stored),
            vec![1]
        );
        let again = plan_from_issues(
            &source(),
            &IssueSet {
                open: vec![issue(2, "", "open")],
                others: vec![issue(1, "", "closed")],
                stored: stored.clone(),
            },
        );
        assert_eq!(
            again.skip.get("GH-1").map(String::as_str),
            Some(CLOSED_UPSTREAM)
        );
        let gh1 = again.spec.tasks.iter().find(|t| t.id == "GH-1").unwrap();
        assert_ne!(
            gh1, &stored[0],
            "the spec changes, so the store rewrites it"
        );
        let unlabelled = plan_from_issues(
            &source(),
            &IssueSet {
                open: vec![issue(2, "", "open")],
                others: vec![issue(1, "", "open")],
                stored,
            },
        );
        assert!(unlabelled.spec.tasks.iter().all(|t| t.id != "GH-1"));
        assert!(unlabelled.skip.is_empty());
    }
}
