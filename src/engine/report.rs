//! `whilly report`: what a run did, task by task, from the queue's records. [`build`] is pure
//! over a plan, its tasks and its events; [`render_md`] and JSON (serde) are views of it;
//! [`write`] keeps one under `.whilly/reports/` (private), which every `whilly run` does at its
//! end.

use crate::domain::{Status, Usd, safe_id};
use crate::store::event_types as et;
use crate::store::{Event, PlanRecord, TaskRecord};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RunReport {
    pub plan_id: String,
    pub project: String,
    pub generated_at: DateTime<Utc>,
    /// The events the report covers (ids, inclusive); `None` when there were none.
    pub first_event: Option<i64>,
    pub last_event: Option<i64>,
    pub tasks: Vec<TaskLine>,
    pub totals: Totals,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct TaskLine {
    pub id: String,
    /// The task's status now.
    pub status: Status,
    /// Why it is where it is (`verification_failed`, …), when the queue says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Claims in the window.
    pub attempts: u64,
    pub cost_usd: f64,
    /// Time under a lease, summed over the attempts (claimed → settled).
    pub duration_secs: f64,
    /// The last verification round's checks, if any ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checks: Option<ChecksLine>,
    pub pull_requests: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ChecksLine {
    pub passed: u64,
    pub total: u64,
    /// Names of the checks that failed.
    pub failed: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Totals {
    pub tasks: u64,
    pub by_status: BTreeMap<Status, u64>,
    pub attempts: u64,
    pub cost_usd: f64,
    /// Wall-clock time from the first claim to the last settled attempt.
    pub wall_secs: f64,
    /// Spend per hour of wall-clock time; `None` when no time passed.
    pub burn_usd_per_hour: Option<f64>,
    pub budget_usd: Option<f64>,
    /// The plan's whole committed spend (all runs).
    pub plan_spent_usd: f64,
}

/// Events that end an attempt (the lease is settled or taken away).
const ENDS: &[&str] = &[
    et::TASK_DONE,
    et::TASK_FAILED,
    et::TASK_RETRY,
    et::TASK_RELEASED,
    et::TASK_HUMAN_LOOP,
    et::TASK_BLOCKED,
    et::TASK_LEASE_EXPIRED,
    et::TASK_DEADLINE_PASSED,
];

/// Events whose `cost_usd` is spend: settlements and spend added while an agent ran.
const SPENDS: &[&str] = &[
    et::TASK_COST,
    et::TASK_DONE,
    et::TASK_FAILED,
    et::TASK_RETRY,
    et::TASK_RELEASED,
    et::TASK_HUMAN_LOOP,
    et::TASK_BLOCKED,
];

/// The report over `events` (the plan's, oldest first). A plan deleted and imported again
/// under the same id continues its trail: only what follows the last `plan.deleted` counts.
pub(crate) fn build(
    plan: &PlanRecord,
    tasks: &[TaskRecord],
    events: &[Event],
    now: DateTime<Utc>,
) -> RunReport {
    let start = events
        .iter()
        .rposition(|e| e.event_type == et::PLAN_DELETED)
        .map_or(0, |i| i + 1);
    let events = &events[start..];
    let mut lines: Vec<TaskLine> = tasks
        .iter()
        .map(|t| TaskLine {
            id: t.id.clone(),
            status: t.status,
            reason: t.reason.clone(),
            attempts: 0,
            cost_usd: 0.0,
            duration_secs: 0.0,
            checks: None,
            pull_requests: Vec::new(),
        })
        .collect();
    let index: BTreeMap<&str, usize> = tasks
        .iter()
        .enumerate()
        .map(|(i, t)| (t.id.as_str(), i))
        .collect();
    let mut cost: BTreeMap<usize, Usd> = BTreeMap::new();
    let mut claimed_at: BTreeMap<usize, DateTime<Utc>> = BTreeMap::new();
    let (mut first_claim, mut last_end): (Option<DateTime<Utc>>, Option<DateTime<Utc>>) =
        (None, None);
    for e in events {
        let Some(&i) = e.task_id.as_deref().and_then(|id| index.get(id)) else {
            continue;
        };
        let kind = e.event_type.as_str();
        if kind == et::TASK_CLAIMED {
            lines[i].attempts += 1;
            claimed_at.insert(i, e.ts);
            first_claim.get_or_insert(e.ts);
        }
        if SPENDS.contains(&kind) {
            *cost.entry(i).or_default() +=
                Usd::from_f64(e.payload["cost_usd"].as_f64().unwrap_or(0.0));
        }
        if ENDS.contains(&kind) {
            if let Some(at) = claimed_at.remove(&i) {
                lines[i].duration_secs += (e.ts - at).num_milliseconds().max(0) as f64 / 1000.0;
                last_end = Some(e.ts);
            }
            if let Some(c) = checks_of(&e.payload) {
                lines[i].checks = Some(c);
            }
        }
        if (kind == et::GITHUB_PR_OPENED || kind == et::GITHUB_PR_UPDATED)
            && let Some(url) = e.payload["url"].as_str()
            && !lines[i].pull_requests.iter().any(|u| u == url)
        {
            lines[i].pull_requests.push(url.to_string());
        }
    }
    let mut total_cost = Usd::ZERO;
    for (i, c) in cost {
        lines[i].cost_usd = c.as_f64();
        total_cost += c;
    }
    let mut by_status: BTreeMap<Status, u64> = BTreeMap::new();
    for l in &lines {
        *by_status.entry(l.status).or_default() += 1;
    }
    let wall_secs = match (first_claim, last_end) {
        (Some(a), Some(b)) if b > a => (b - a).num_milliseconds() as f64 / 1000.0,
        _ => 0.0,
    };
    RunReport {
        plan_id: plan.id.clone(),
        project: plan.project.clone(),
        generated_at: now,
        first_event: events.first().map(|e| e.id),
        last_event: events.last().map(|e| e.id),
        totals: Totals {
            tasks: lines.len() as u64,
            by_status,
            attempts: lines.iter().map(|l| l.attempts).sum(),
            cost_usd: total_cost.as_f64(),
            wall_secs,
            burn_usd_per_hour: (wall_secs > 0.0)
                .then(|| total_cost.as_f64() / (wall_secs / 3600.0)),
            budget_usd: plan.budget.map(Usd::as_f64),
            plan_spent_usd: plan.spent.as_f64(),
        },
        tasks: lines,
    }
}

/// The last verification round in an attempt's evidence.
fn checks_of(payload: &Value) -> Option<ChecksLine> {
    let round = payload["verification"].as_array()?.last()?;
    let checks = round["checks"].as_array()?;
    let passed = checks
        .iter()
        .filter(|c| c["passed"].as_bool() == Some(true))
        .count() as u64;
    let failed = checks
        .iter()
        .filter(|c| c["passed"].as_bool() != Some(true))
        .map(|c| {
            c["name"]
                .as_str()
                .or(c["command"].as_str())
                .unwrap_or("?")
                .to_string()
        })
        .collect();
    Some(ChecksLine {
        passed,
        total: checks.len() as u64,
        failed,
    })
}

fn usd(v: f64) -> String {
    Usd::from_f64(v).to_string()
}

fn duration(secs: f64) -> String {
    let d = std::time::Duration::from_secs(secs.round() as u64);
    if d.is_zero() {
        return "0s".into();
    }
    humantime::format_duration(d).to_string()
}

/// A table cell: `|` and line breaks would break the row.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

pub(crate) fn render_md(r: &RunReport) -> String {
    let mut out = format!(
        "# Run report: plan {} ({})\n\n",
        cell(&r.plan_id),
        cell(&r.project)
    );
    out.push_str(&format!(
        "Generated {} UTC",
        r.generated_at.format("%Y-%m-%d %H:%M:%S")
    ));
    if let (Some(a), Some(b)) = (r.first_event, r.last_event) {
        out.push_str(&format!(", from events #{a} to #{b}"));
    }
    out.push_str(".\n\n| Task | Status | Attempts | Cost | Duration | Checks | Pull requests |\n");
    out.push_str("|---|---|---:|---:|---:|---|---|\n");
    for t in &r.tasks {
        let mut status = t.status.as_str().to_string();
        if let Some(reason) = &t.reason {
            status.push_str(&format!(" ({reason})"));
        }
        let checks = match &t.checks {
            None => "-".to_string(),
            Some(c) if c.failed.is_empty() => format!("{}/{} passed", c.passed, c.total),
            Some(c) => format!(
                "{}/{} passed; failed: {}",
                c.passed,
                c.total,
                c.failed.join(", ")
            ),
        };
        let prs = if t.pull_requests.is_empty() {
            "-".to_string()
        } else {
            t.pull_requests.join(" ")
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            cell(&t.id),
            cell(&status),
            t.attempts,
            usd(t.cost_usd),
            duration(t.duration_secs),
            cell(&checks),
            cell(&prs)
        ));
    }
    let tot = &r.totals;
    let statuses: Vec<String> = tot
        .by_status
        .iter()
        .map(|(s, n)| format!("{n} {}", s.as_str()))
        .collect();
    out.push_str(&format!(
        "\n**Totals:** {} task{} ({}), {} attempt{}, {} spent",
        tot.tasks,
        if tot.tasks == 1 { "" } else { "s" },
        statuses.join(", "),
        tot.attempts,
        if tot.attempts == 1 { "" } else { "s" },
        usd(tot.cost_usd)
    ));
    if let Some(b) = tot.budget_usd {
        out.push_str(&format!(
            " (plan: {} of {} budget)",
            usd(tot.plan_spent_usd),
            usd(b)
        ));
    }
    out.push_str(&format!(", {} wall clock", duration(tot.wall_secs)));
    if let Some(rate) = tot.burn_usd_per_hour {
        out.push_str(&format!(", burn rate {}/h", usd(rate)));
    }
    out.push_str(".\n");
    out
}

/// `<state dir>/reports/<safe plan id>-<UTC timestamp>.md`, private; returns the path.
pub(crate) fn write(state_dir: &Path, r: &RunReport) -> std::io::Result<PathBuf> {
    let dir = state_dir.join("reports");
    crate::fsutil::private_dir(&dir)?;
    let stem = format!(
        "{}-{}",
        safe_id(&r.plan_id),
        r.generated_at.format("%Y%m%dT%H%M%SZ")
    );
    // Two runs of a plan may end in the same second: each report gets a name of its own,
    // reserved with create_new so neither overwrites the other.
    let mut n = 1u32;
    let path = loop {
        let name = if n == 1 {
            format!("{stem}.md")
        } else {
            format!("{stem}-{n}.md")
        };
        let candidate = dir.join(name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&candidate)
        {
            Ok(_) => break candidate,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
            Err(e) => return Err(e),
        }
    };
    // atomic_write's temporary file is created 0600 and renamed into place.
    crate::fsutil::atomic_write(&path, render_md(r).as_bytes())?;
    Ok(path)
}

/// Reads what [`build`] needs from the store: the plan, its tasks, its events after
/// `after_event` (all of them with `None`).
pub(crate) async fn load(
    store: &dyn crate::store::Store,
    plan_id: &str,
    after_event: Option<i64>,
) -> crate::store::StoreResult<RunReport> {
    let plan = store.get_plan(plan_id).await?;
    let tasks = store.list_tasks(plan_id).await?;
    let events = store
        .events(&crate::store::EventFilter {
            plan_id: Some(plan_id.to_string()),
            after_id: after_event,
            ..Default::default()
        })
        .await?;
    Ok(build(&plan, &tasks, &events, Utc::now()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::domain::PlanSpec;
    use serde_json::json;

    fn plan() -> PlanRecord {
        let spec = PlanSpec::default();
        PlanRecord {
            id: "p".into(),
            project: "proj".into(),
            paused: false,
            budget: Some(Usd::from_f64(5.0)),
            spent: Usd::from_f64(0.75),
            reserved: Usd::ZERO,
            spec,
            created_at: Utc::now(),
            updated_at: Utc::now(),
            archived_at: None,
        }
    }

    fn ev(id: i64, secs: i64, kind: &str, task: &str, payload: Value) -> Event {
        Event {
            id,
            ts: DateTime::from_timestamp(1_700_000_000 + secs, 0).unwrap(),
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
    fn attempts_cost_duration_checks_and_prs_come_from_the_events() {
        let p = plan();
        let task = |id: &str, status| TaskRecord {
            pk: 1,
            plan_id: "p".into(),
            id: id.into(),
            status,
            priority: crate::domain::Priority::Medium,
            pending_deps: 0,
            epoch: 0,
            attempts: 9,
            max_attempts: 3,
            worker_id: None,
            lease_expires_at: None,
            deadline_at: None,
            cost: Usd::ZERO,
            reserved: Usd::ZERO,
            reason: None,
            spec: crate::domain::TaskSpec {
                id: id.into(),
                ..Default::default()
            },
            updated_at: Utc::now(),
        };
        let tasks = vec![task("A", Status::Done), task("B|x", Status::Failed)];
        let checks = |passed: bool| {
            json!({"cost_usd": 0.25, "verification": [{"round": 1, "checks": [
                {"name": "tests", "passed": passed}, {"name": "lint", "passed": true}]}]})
        };
        let events = vec![
            ev(1, 0, et::TASK_CLAIMED, "A", json!({})),
            ev(2, 1, et::TASK_COST, "A", json!({"cost_usd": 0.1})),
            ev(3, 10, et::TASK_DONE, "A", checks(true)),
            ev(
                4,
                11,
                et::GITHUB_PR_OPENED,
                "A",
                json!({"url": "https://gh/pr/1"}),
            ),
            ev(
                5,
                12,
                et::GITHUB_PR_UPDATED,
                "A",
                json!({"url": "https://gh/pr/1"}),
            ),
            ev(6, 20, et::TASK_CLAIMED, "B|x", json!({})),
            ev(7, 25, et::TASK_RETRY, "B|x", checks(false)),
            ev(8, 30, et::TASK_CLAIMED, "B|x", json!({})),
            ev(9, 40, et::TASK_LEASE_EXPIRED, "B|x", json!({})),
        ];
        let r = build(&p, &tasks, &events, Utc::now());
        let a = &r.tasks[0];
        assert_eq!((a.attempts, a.duration_secs), (1, 10.0));
        assert!((a.cost_usd - 0.35).abs() < 1e-9);
        assert_eq!(a.pull_requests, ["https://gh/pr/1"]);
        assert_eq!(
            a.checks,
            Some(ChecksLine {
                passed: 2,
                total: 2,
                failed: vec![]
            })
        );
        let b = &r.tasks[1];
        assert_eq!((b.attempts, b.duration_secs), (2, 15.0));
        assert_eq!(b.checks.as_ref().unwrap().failed, ["tests"]);
        assert_eq!(r.totals.attempts, 3);
        assert_eq!(r.totals.wall_secs, 40.0);
        assert!((r.totals.burn_usd_per_hour.unwrap() - 0.6 * 90.0).abs() < 1e-6);
        let md = render_md(&r);
        assert!(
            md.contains("| A | DONE | 1 | $0.35 | 10s | 2/2 passed | https://gh/pr/1 |"),
            "{md}"
        );
        assert!(md.contains("| B\\|x | FAILED | 2 |"), "{md}");
        assert!(
            md.contains("**Totals:** 2 tasks (1 DONE, 1 FAILED), 3 attempts, $0.60 spent"),
            "{md}"
        );
    }

    #[test]
    fn a_deleted_plans_old_trail_is_left_out() {
        let p = plan();
        let events = vec![
            ev(1, 0, et::TASK_CLAIMED, "A", json!({})),
            ev(2, 1, et::PLAN_DELETED, "A", json!({})),
        ];
        let r = build(&p, &[], &events, Utc::now());
        assert_eq!(r.first_event, None);
        assert_eq!(r.totals.attempts, 0);
    }

    #[test]
    fn reports_of_the_same_second_each_keep_their_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = build(&plan(), &[], &[], Utc::now());
        let first = write(dir.path(), &r).expect("first");
        let second = write(dir.path(), &r).expect("second");
        assert_ne!(first, second);
        assert!(first.is_file() && second.is_file());
        assert!(render_md(&r).contains("**Totals:** 0 tasks"));
    }
}
