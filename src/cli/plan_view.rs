//! Plain-text views of a plan for the terminal: the task table and the dependency tree.
//! Pure functions over records, tested directly.

use crate::domain::{Status, Usd};
use crate::store::{PlanRecord, PlanSummary, TaskRecord};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;

/// One line per plan: id, progress, budget.
/// What a plan is doing, in a word: `archived` (hidden from lists), `done` (every task ended:
/// DONE, FAILED or SKIPPED), `paused` or `active`.
pub(crate) fn plan_state(p: &PlanSummary) -> &'static str {
    if p.plan.archived_at.is_some() {
        "archived"
    } else if p.counts.all_terminal() {
        "done"
    } else if p.plan.paused {
        "paused"
    } else {
        "active"
    }
}

/// The plans table; `hidden` archived plans were left out (a line says how to see them).
pub(crate) fn render_plan_list(plans: &[PlanSummary], hidden: usize) -> String {
    let more = match hidden {
        0 => String::new(),
        1 => "(1 archived plan not shown: `whilly plan list --all`)\n".to_string(),
        n => format!("({n} archived plans not shown: `whilly plan list --all`)\n"),
    };
    if plans.is_empty() {
        return format!(
            "No plans yet. Import one with `whilly plan import FILE` (or try `whilly demo`).\n{more}"
        );
    }
    let mut rows = vec![vec![
        "PLAN".to_string(),
        "STATE".into(),
        "DONE".into(),
        "RUN".into(),
        "PEND".into(),
        "FAIL".into(),
        "SKIP".into(),
        "BUDGET".into(),
    ]];
    for p in plans {
        let c = &p.counts;
        rows.push(vec![
            p.plan.id.clone(),
            plan_state(p).into(),
            format!("{}/{}", c.get(Status::Done), c.total),
            (c.get(Status::Claimed) + c.get(Status::InProgress)).to_string(),
            c.get(Status::Pending).to_string(),
            c.get(Status::Failed).to_string(),
            c.get(Status::Skipped).to_string(),
            budget_text(&p.plan),
        ]);
    }
    table(&rows) + &more
}

/// `spent (+reserved) / limit`.
pub(crate) fn budget_text(plan: &PlanRecord) -> String {
    let reserved = if plan.reserved > Usd::ZERO {
        format!(" (+{} reserved)", plan.reserved)
    } else {
        String::new()
    };
    match plan.budget {
        Some(limit) => {
            let pct = if limit.0 > 0 {
                plan.spent.0 as f64 * 100.0 / limit.0 as f64
            } else {
                100.0
            };
            format!("{}{} / {} ({pct:.0}%)", plan.spent, reserved, limit)
        }
        None => format!("{}{} / no limit", plan.spent, reserved),
    }
}

/// How a task's readiness reads in a table; `status_of`: the plan's tasks, to say which
/// failed dependency blocks a pending task.
pub(crate) fn task_state_text(t: &TaskRecord, status_of: &HashMap<&str, Status>) -> String {
    if t.status == Status::Pending
        && let Some(why) = crate::engine::stuck::why_stuck(t, status_of)
    {
        return format!("PENDING ({why})");
    }
    match t.status {
        Status::Pending if t.pending_deps > 0 => format!("PENDING (waits on {})", t.pending_deps),
        Status::Pending => "PENDING (ready)".to_string(),
        other => match &t.reason {
            Some(r)
                if other.is_terminal() || matches!(other, Status::Blocked | Status::HumanLoop) =>
            {
                format!("{other} ({r})")
            }
            _ => other.to_string(),
        },
    }
}

pub(crate) fn render_task_table(tasks: &[TaskRecord]) -> String {
    let mut rows = vec![vec![
        "TASK".to_string(),
        "STATUS".into(),
        "PRIO".into(),
        "TRY".into(),
        "COST".into(),
        "DEPENDS ON".into(),
    ]];
    let status_of = crate::engine::stuck::statuses(tasks);
    for t in tasks {
        rows.push(vec![
            t.id.clone(),
            task_state_text(t, &status_of),
            t.priority.to_string(),
            t.tries_text(),
            t.cost.to_string(),
            if t.spec.dependencies.is_empty() {
                "-".into()
            } else {
                t.spec.dependencies.join(", ")
            },
        ]);
    }
    table(&rows)
}

/// The dependency graph drawn as a tree from the roots (tasks with no dependencies). A task with
/// several parents is drawn in full under the first and referenced as `(↑ shown above)` after.
pub(crate) fn render_dep_tree(tasks: &[TaskRecord]) -> String {
    let ids: HashSet<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
    let status: HashMap<&str, Status> = tasks.iter().map(|t| (t.id.as_str(), t.status)).collect();
    let mut children: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut roots = Vec::new();
    for t in tasks {
        let known: Vec<&str> = t
            .spec
            .dependencies
            .iter()
            .map(String::as_str)
            .filter(|d| ids.contains(d))
            .collect();
        if known.is_empty() {
            roots.push(t.id.as_str());
        }
        for d in known {
            children.entry(d).or_default().push(t.id.as_str());
        }
    }
    let mut out = String::new();
    let mut shown = HashSet::new();
    let n = roots.len();
    for (i, root) in roots.into_iter().enumerate() {
        draw(
            root,
            "",
            i + 1 == n,
            true,
            &children,
            &status,
            &mut shown,
            &mut out,
        );
    }
    // Tasks only reachable through a cycle have no root; list them so nothing is hidden.
    for t in tasks {
        if !shown.contains(t.id.as_str()) {
            let _ = writeln!(out, "{} {} (in a dependency cycle)", mark(t.status), t.id);
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn draw<'a>(
    id: &'a str,
    prefix: &str,
    last: bool,
    top: bool,
    children: &BTreeMap<&'a str, Vec<&'a str>>,
    status: &HashMap<&'a str, Status>,
    shown: &mut HashSet<&'a str>,
    out: &mut String,
) {
    let branch = if top {
        ""
    } else if last {
        "└── "
    } else {
        "├── "
    };
    let st = status.get(id).copied().unwrap_or(Status::Pending);
    if !shown.insert(id) {
        let _ = writeln!(out, "{prefix}{branch}{} {id} (↑ shown above)", mark(st));
        return;
    }
    let _ = writeln!(out, "{prefix}{branch}{} {id}", mark(st));
    let next_prefix = if top {
        prefix.to_string()
    } else if last {
        format!("{prefix}    ")
    } else {
        format!("{prefix}│   ")
    };
    if let Some(kids) = children.get(id) {
        let n = kids.len();
        for (i, kid) in kids.iter().enumerate() {
            draw(
                kid,
                &next_prefix,
                i + 1 == n,
                false,
                children,
                status,
                shown,
                out,
            );
        }
    }
}

/// A one-character status mark that reads without colour.
pub(crate) fn mark(s: Status) -> &'static str {
    match s {
        Status::Done => "✔",
        Status::Failed => "✘",
        Status::Skipped => "⊘",
        Status::Claimed | Status::InProgress => "▶",
        Status::Blocked | Status::HumanLoop => "✋",
        Status::Pending => "·",
    }
}

/// Left-aligned columns separated by two spaces.
pub(crate) fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0usize; cols];
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let pad = widths[i] - cell.chars().count();
                line.push_str(cell);
                line.push_str(&" ".repeat(pad + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Priority, TaskSpec};
    use chrono::Utc;

    #[test]
    fn a_plan_whose_tasks_all_ended_is_done() {
        use crate::store::{PlanRecord, StatusCounts};
        let summary = |statuses: &[Status], archived: bool, paused: bool| {
            let mut counts = StatusCounts::default();
            for s in statuses {
                *counts.by_status.entry(*s).or_default() += 1;
                counts.total += 1;
            }
            PlanSummary {
                plan: PlanRecord {
                    id: "p".into(),
                    project: "p".into(),
                    paused,
                    budget: None,
                    spent: Usd::ZERO,
                    reserved: Usd::ZERO,
                    spec: Default::default(),
                    created_at: Utc::now(),
                    updated_at: Utc::now(),
                    archived_at: archived.then(Utc::now),
                },
                counts,
            }
        };
        use Status::*;
        assert_eq!(
            plan_state(&summary(&[Done, Failed, Skipped], false, false)),
            "done"
        );
        assert_eq!(
            plan_state(&summary(&[Done, Pending], false, false)),
            "active"
        );
        assert_eq!(
            plan_state(&summary(&[Done, HumanLoop], false, true)),
            "paused"
        );
        assert_eq!(
            plan_state(&summary(&[], false, false)),
            "active",
            "no tasks: not done"
        );
        assert_eq!(plan_state(&summary(&[Done], true, false)), "archived");
    }

    fn task(id: &str, deps: &[&str], status: Status) -> TaskRecord {
        TaskRecord {
            pk: 0,
            plan_id: "p".into(),
            id: id.into(),
            status,
            priority: Priority::Medium,
            pending_deps: 0,
            epoch: 0,
            attempts: 0,
            max_attempts: 3,
            worker_id: None,
            lease_expires_at: None,
            deadline_at: None,
            cost: Usd::ZERO,
            reserved: Usd::ZERO,
            reason: None,
            spec: TaskSpec {
                id: id.into(),
                dependencies: deps.iter().map(|d| d.to_string()).collect(),
                ..Default::default()
            },
            updated_at: Utc::now(),
        }
    }

    #[test]
    fn tries_show_the_limit_only_while_a_retry_may_come() {
        let tries = |status: Status, attempts: i64| {
            let mut t = task("A", &[], status);
            t.attempts = attempts;
            t.tries_text()
        };
        assert_eq!(tries(Status::Pending, 0), "0/3");
        assert_eq!(tries(Status::Pending, 1), "1/3");
        assert_eq!(tries(Status::InProgress, 2), "2/3");
        assert_eq!(tries(Status::HumanLoop, 1), "1/3");
        // Ended: no retry follows, whatever the limit says.
        assert_eq!(tries(Status::Failed, 1), "1");
        assert_eq!(tries(Status::Failed, 3), "3");
        assert_eq!(tries(Status::Done, 2), "2");
        assert_eq!(tries(Status::Skipped, 0), "0");
    }

    #[test]
    fn tree_draws_diamond_once_and_references_it() {
        let tasks = vec![
            task("A", &[], Status::Done),
            task("B", &["A"], Status::Pending),
            task("C", &["A"], Status::InProgress),
            task("D", &["B", "C"], Status::Pending),
        ];
        let tree = render_dep_tree(&tasks);
        assert_eq!(
            tree,
            "✔ A\n├── · B\n│   └── · D\n└── ▶ C\n    └── · D (↑ shown above)\n"
        );
    }

    #[test]
    fn cycle_members_are_still_listed() {
        let tasks = vec![
            task("A", &["B"], Status::Pending),
            task("B", &["A"], Status::Pending),
        ];
        let tree = render_dep_tree(&tasks);
        assert!(tree.contains("A (in a dependency cycle)"));
        assert!(tree.contains("B (in a dependency cycle)"));
    }

    #[test]
    fn table_aligns_columns() {
        let t = table(&[
            vec!["a".into(), "bb".into()],
            vec!["ccc".into(), "d".into()],
        ]);
        assert_eq!(t, "a    bb\nccc  d\n");
    }
}
