//! The deterministic TRIZ report (`plan triz`): contradictions and risks found by fixed rules,
//! a verdict and an ideality score. Same plan, same report, byte for byte.
//!
//! It runs on plans that failed validation (cycles, unknown dependencies, duplicate ids): those are
//! exactly what it is meant to explain.

use super::gate::{description_fails, gate_failures};
use crate::domain::PlanSpec;
use crate::domain::graph::{DepGraph, normalize_key_file};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::fmt;

/// A task with more key files than this touches too much for one agent run.
pub const OVER_ENGINEERING_KEY_FILES: usize = 10;
/// A task with more acceptance criteria than this is several tasks in one.
pub const OVER_ENGINEERING_CRITERIA: usize = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrizSeverity {
    Critical,
    High,
    Medium,
    Low,
}

impl TrizSeverity {
    /// Weights of the ideality formula.
    pub fn weight(self) -> f64 {
        match self {
            TrizSeverity::Critical => 4.0,
            TrizSeverity::High => 2.0,
            TrizSeverity::Medium => 1.0,
            TrizSeverity::Low => 0.5,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TrizSeverity::Critical => "critical",
            TrizSeverity::High => "high",
            TrizSeverity::Medium => "medium",
            TrizSeverity::Low => "low",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Approve,
    Revise,
    Reject,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Approve => "approve",
            Verdict::Revise => "revise",
            Verdict::Reject => "reject",
        })
    }
}

/// One of the 40 inventive principles the finding points to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Principle {
    pub number: u8,
    pub name: &'static str,
}

const EXTRACTION: Principle = Principle {
    number: 2,
    name: "Taking out (extraction)",
};
const MERGING: Principle = Principle {
    number: 5,
    name: "Merging (consolidation)",
};
const PRELIMINARY_ACTION: Principle = Principle {
    number: 10,
    name: "Preliminary action",
};
const INVERSION: Principle = Principle {
    number: 13,
    name: "The other way round (inversion)",
};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrizFinding {
    /// weak_task_definition, dependency_contradiction, missing_dependency_resource,
    /// duplicate_work, resource_conflict, over_engineering_risk.
    pub kind: &'static str,
    pub severity: TrizSeverity,
    pub principle: Principle,
    pub task_ids: Vec<String>,
    pub message: String,
    pub suggestion: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrizReport {
    pub plan_id: String,
    pub task_count: usize,
    pub verdict: Verdict,
    /// 1 − Σweights / max(1, 3·n), clamped to [0, 1] and rounded to 3 decimals.
    pub ideality: f64,
    pub findings: Vec<TrizFinding>,
}

impl TrizReport {
    /// `plan triz --strict` passes only on approve.
    pub fn approved(&self) -> bool {
        self.verdict == Verdict::Approve
    }

    pub fn count(&self, severity: TrizSeverity) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == severity)
            .count()
    }
}

/// Words of a description, lower-cased, punctuation dropped: "Add X." and "add  x" are the same.
fn normalise_description(s: &str) -> String {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The report for `plan`. Findings come grouped by kind (in the order of the fields' docs), each
/// group in file order.
pub fn triz_report(plan: &PlanSpec) -> TrizReport {
    let mut findings = Vec::new();
    weak_definitions(plan, &mut findings);
    contradictions(plan, &mut findings);
    missing_dependencies(plan, &mut findings);
    duplicate_work(plan, &mut findings);
    resource_conflicts(plan, &mut findings);
    over_engineering(plan, &mut findings);

    let verdict = if findings
        .iter()
        .any(|f| f.severity == TrizSeverity::Critical)
    {
        Verdict::Reject
    } else if findings
        .iter()
        .any(|f| matches!(f.severity, TrizSeverity::High | TrizSeverity::Medium))
    {
        Verdict::Revise
    } else {
        Verdict::Approve
    };
    let weights: f64 = findings.iter().map(|f| f.severity.weight()).sum();
    let denominator = (3.0 * plan.tasks.len() as f64).max(1.0);
    let ideality = ((1.0 - weights / denominator).clamp(0.0, 1.0) * 1000.0).round() / 1000.0;
    TrizReport {
        plan_id: plan.id.clone(),
        task_count: plan.tasks.len(),
        verdict,
        ideality,
        findings,
    }
}

fn weak_definitions(plan: &PlanSpec, out: &mut Vec<TrizFinding>) {
    for t in &plan.tasks {
        let failures = gate_failures(t);
        if failures.is_empty() {
            continue;
        }
        let why: Vec<String> = failures.iter().map(ToString::to_string).collect();
        out.push(TrizFinding {
            kind: "weak_task_definition",
            severity: if description_fails(t) {
                TrizSeverity::High
            } else {
                TrizSeverity::Medium
            },
            principle: PRELIMINARY_ACTION,
            task_ids: vec![t.id.clone()],
            message: format!("task {} is under-specified: {}", t.id, why.join("; ")),
            suggestion:
                "write the description, acceptance criteria and test steps before an agent starts"
                    .into(),
        });
    }
}

fn contradictions(plan: &PlanSpec, out: &mut Vec<TrizFinding>) {
    for cycle in DepGraph::new(&plan.tasks).cycles() {
        out.push(TrizFinding {
            kind: "dependency_contradiction",
            severity: TrizSeverity::Critical,
            principle: EXTRACTION,
            task_ids: cycle.members().to_vec(),
            message: format!("dependency cycle {cycle}: none of these tasks can ever start"),
            suggestion: "take the shared part out into its own task that the others depend on"
                .into(),
        });
    }
}

fn missing_dependencies(plan: &PlanSpec, out: &mut Vec<TrizFinding>) {
    let ids: HashSet<&str> = plan.tasks.iter().map(|t| t.id.as_str()).collect();
    for t in &plan.tasks {
        let mut seen = HashSet::new();
        for dep in &t.dependencies {
            if ids.contains(dep.as_str()) || !seen.insert(dep.as_str()) {
                continue;
            }
            out.push(TrizFinding {
                kind: "missing_dependency_resource",
                severity: TrizSeverity::High,
                principle: PRELIMINARY_ACTION,
                task_ids: vec![t.id.clone()],
                message: format!("task {} depends on {dep}, which is not in the plan", t.id),
                suggestion: format!("add a task {dep} first, or drop the dependency"),
            });
        }
    }
}

fn duplicate_work(plan: &PlanSpec, out: &mut Vec<TrizFinding>) {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut by_text: HashMap<String, usize> = HashMap::new();
    for (i, t) in plan.tasks.iter().enumerate() {
        let norm = normalise_description(&t.description);
        if norm.is_empty() {
            continue;
        }
        match by_text.get(&norm) {
            Some(&g) => groups[g].push(i),
            None => {
                by_text.insert(norm, groups.len());
                groups.push(vec![i]);
            }
        }
    }
    for g in groups.into_iter().filter(|g| g.len() > 1) {
        let ids: Vec<String> = g.iter().map(|&i| plan.tasks[i].id.clone()).collect();
        out.push(TrizFinding {
            kind: "duplicate_work",
            severity: TrizSeverity::Medium,
            principle: MERGING,
            message: format!("tasks {} have the same description", ids.join(", ")),
            task_ids: ids,
            suggestion: "merge them into one task".into(),
        });
    }
}

fn resource_conflicts(plan: &PlanSpec, out: &mut Vec<TrizFinding>) {
    let mut files: Vec<(String, Vec<usize>)> = Vec::new();
    let mut by_file: HashMap<String, usize> = HashMap::new();
    for (i, t) in plan.tasks.iter().enumerate() {
        for k in &t.key_files {
            let k = normalize_key_file(k);
            if k.is_empty() {
                continue;
            }
            match by_file.get(&k) {
                Some(&f) => {
                    if files[f].1.last() != Some(&i) {
                        files[f].1.push(i);
                    }
                }
                None => {
                    by_file.insert(k.clone(), files.len());
                    files.push((k, vec![i]));
                }
            }
        }
    }
    // Tasks one of which waits for the other (through any chain of dependencies) never run
    // side by side, so sharing a file is no conflict for them: the plan already orders them.
    let reach = Reach::new(plan);
    for (file, tasks) in files.into_iter().filter(|(_, t)| t.len() > 1) {
        let waits = reach.within(&tasks);
        let reaches = |a: usize, b: usize| waits.get(&a).is_some_and(|r| r.contains(&b));
        let mut unordered: Vec<(usize, usize)> = Vec::new();
        for (n, &a) in tasks.iter().enumerate() {
            for &b in &tasks[n + 1..] {
                if !reaches(a, b) && !reaches(b, a) {
                    unordered.push((a, b));
                }
            }
        }
        if unordered.is_empty() {
            continue;
        }
        let involved: Vec<usize> = tasks
            .iter()
            .copied()
            .filter(|&i| unordered.iter().any(|&(a, b)| a == i || b == i))
            .collect();
        let id = |i: usize| plan.tasks[i].id.as_str();
        let ids: Vec<String> = involved.iter().map(|&i| id(i).to_string()).collect();
        // Every pair unordered is the usual case; otherwise say which pairs are.
        let which = if unordered.len() == involved.len() * (involved.len() - 1) / 2 {
            "them".to_string()
        } else {
            unordered
                .iter()
                .map(|&(a, b)| format!("{} and {}", id(a), id(b)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push(TrizFinding {
            kind: "resource_conflict",
            severity: TrizSeverity::Medium,
            principle: MERGING,
            message: format!(
                "tasks {} share key file {file} and no dependency orders {which}; they cannot run in parallel",
                ids.join(", ")
            ),
            task_ids: ids,
            suggestion:
                "merge the edits to this file into one task, or order the tasks with a dependency"
                    .into(),
        });
    }
}

/// Which tasks a task waits for, directly or through other tasks' dependencies, among the tasks
/// that share one file. Dependencies are by id (a duplicated id stands for every task with it);
/// unknown ids are skipped. Without cycles one pass in dependency order carries, for each task,
/// the set of members it waits for as a bitset, over only the span of the order the members
/// occupy: linear in the plan for each shared file. With a cycle (reported on its own) each
/// member is walked.
struct Reach {
    /// Each task's dependencies, as task indices (resolved once: the passes below are hot).
    deps: Vec<Vec<usize>>,
    /// Each task's place in a dependency order (dependencies first), and the tasks by place;
    /// `None` with a cycle.
    order: Option<(Vec<usize>, Vec<usize>)>,
}

impl Reach {
    fn new(plan: &PlanSpec) -> Reach {
        let mut by_id: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, t) in plan.tasks.iter().enumerate() {
            by_id.entry(t.id.as_str()).or_default().push(i);
        }
        let order = dependency_order(plan, &by_id).map(|place| {
            let mut by_place = vec![0usize; place.len()];
            for (task, &p) in place.iter().enumerate() {
                by_place[p] = task;
            }
            (place, by_place)
        });
        let deps = plan
            .tasks
            .iter()
            .map(|t| {
                t.dependencies
                    .iter()
                    .flat_map(|dep| by_id.get(dep.as_str()).into_iter().flatten().copied())
                    .collect()
            })
            .collect();
        Reach { deps, order }
    }

    fn deps(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        self.deps[i].iter().copied()
    }

    /// For each of `members`, the other members it waits for.
    fn within(&self, members: &[usize]) -> HashMap<usize, HashSet<usize>> {
        let Some((place, by_place)) = &self.order else {
            return members
                .iter()
                .map(|&m| (m, self.walk(m, members)))
                .collect();
        };
        // The member's bit, by task index (a plain table: this is looked up for every edge).
        let mut bit = vec![usize::MAX; place.len()];
        for (b, &m) in members.iter().enumerate() {
            bit[m] = b;
        }
        let words = members.len().div_ceil(64);
        let lo = members.iter().map(|&m| place[m]).min().unwrap_or(0);
        let hi = members.iter().map(|&m| place[m]).max().unwrap_or(0);
        // waits[(p - lo) * words ..][..words]: the members the task at place p waits for, one
        // flat table (no allocation per task).
        let mut waits = vec![0u64; (hi - lo + 1) * words];
        for (row, &task) in by_place[lo..=hi].iter().enumerate() {
            for d in self.deps(task) {
                // Below the earliest member nothing waits for a member.
                if place[d] < lo {
                    continue;
                }
                let from = (place[d] - lo) * words;
                for w in 0..words {
                    waits[row * words + w] |= waits[from + w];
                }
                let b = bit[d];
                if b != usize::MAX {
                    waits[row * words + b / 64] |= 1 << (b % 64);
                }
            }
        }
        members
            .iter()
            .map(|&m| {
                let row = (place[m] - lo) * words;
                let w = &waits[row..row + words];
                let set = members
                    .iter()
                    .enumerate()
                    .filter(|&(b, &o)| o != m && w[b / 64] & (1 << (b % 64)) != 0)
                    .map(|(_, &o)| o)
                    .collect();
                (m, set)
            })
            .collect()
    }

    /// The members `from` waits for, by walking its dependencies (stops at tasks seen: cycles end).
    fn walk(&self, from: usize, members: &[usize]) -> HashSet<usize> {
        let mut seen = HashSet::from([from]);
        let mut stack = vec![from];
        while let Some(i) = stack.pop() {
            for d in self.deps(i) {
                if seen.insert(d) {
                    stack.push(d);
                }
            }
        }
        members
            .iter()
            .copied()
            .filter(|&m| m != from && seen.contains(&m))
            .collect()
    }
}

/// A topological order of the tasks by their dependencies (Kahn); `None` when there is a cycle.
fn dependency_order(plan: &PlanSpec, by_id: &HashMap<&str, Vec<usize>>) -> Option<Vec<usize>> {
    let n = plan.tasks.len();
    let mut waiting = vec![0usize; n];
    let mut dependants: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, t) in plan.tasks.iter().enumerate() {
        for dep in &t.dependencies {
            for &d in by_id.get(dep.as_str()).into_iter().flatten() {
                waiting[i] += 1;
                dependants[d].push(i);
            }
        }
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| waiting[i] == 0).collect();
    let mut order = vec![0usize; n];
    let mut next = 0;
    while let Some(i) = ready.pop() {
        order[i] = next;
        next += 1;
        for &j in &dependants[i] {
            waiting[j] -= 1;
            if waiting[j] == 0 {
                ready.push(j);
            }
        }
    }
    (next == n).then_some(order)
}

fn over_engineering(plan: &PlanSpec, out: &mut Vec<TrizFinding>) {
    for t in &plan.tasks {
        let files = t.key_files.len();
        let criteria = t.acceptance_criteria.len();
        if files <= OVER_ENGINEERING_KEY_FILES && criteria <= OVER_ENGINEERING_CRITERIA {
            continue;
        }
        out.push(TrizFinding {
            kind: "over_engineering_risk",
            severity: TrizSeverity::Low,
            principle: INVERSION,
            task_ids: vec![t.id.clone()],
            message: format!(
                "task {} has {files} key files and {criteria} acceptance criteria (limits {OVER_ENGINEERING_KEY_FILES} and {OVER_ENGINEERING_CRITERIA})",
                t.id
            ),
            suggestion: "turn it around: start from the smallest change that meets the goal, split the rest off".into(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::TaskSpec;

    fn good(id: &str, desc: &str) -> TaskSpec {
        TaskSpec {
            id: id.into(),
            description: desc.into(),
            acceptance_criteria: vec!["it works".into()],
            test_steps: vec!["cargo test".into()],
            ..TaskSpec::default()
        }
    }

    fn plan(tasks: Vec<TaskSpec>) -> PlanSpec {
        PlanSpec {
            id: "p".into(),
            project: "p".into(),
            tasks,
            ..PlanSpec::default()
        }
    }

    fn kinds(r: &TrizReport) -> Vec<(&'static str, TrizSeverity)> {
        r.findings.iter().map(|f| (f.kind, f.severity)).collect()
    }

    #[test]
    fn clean_plan_is_approved_with_ideality_one() {
        let r = triz_report(&plan(vec![
            good("A", "Write the parser for v3 files"),
            good("B", "Write the exporter for v4 files"),
        ]));
        assert!(r.findings.is_empty());
        assert_eq!(r.verdict, Verdict::Approve);
        assert!(r.approved());
        assert_eq!(r.ideality, 1.0);
    }

    #[test]
    fn empty_plan_is_approved() {
        let r = triz_report(&plan(vec![]));
        assert_eq!((r.verdict, r.ideality), (Verdict::Approve, 1.0));
    }

    #[test]
    fn weak_definitions_are_graded_by_the_description() {
        let mut a = good("A", "short");
        a.test_steps.clear();
        let mut b = good("B", "A long enough description of the work");
        b.acceptance_criteria.clear();
        let r = triz_report(&plan(vec![a, b]));
        assert_eq!(
            kinds(&r),
            [
                ("weak_task_definition", TrizSeverity::High),
                ("weak_task_definition", TrizSeverity::Medium)
            ]
        );
        assert_eq!(r.findings[0].principle.number, 10);
        assert_eq!(r.verdict, Verdict::Revise);
        // 1 - (2 + 1) / 6
        assert_eq!(r.ideality, 0.5);
    }

    #[test]
    fn cycles_and_missing_deps() {
        let mut a = good("A", "Task A does one precise thing");
        a.dependencies = vec!["B".into(), "GHOST".into(), "GHOST".into()];
        let mut b = good("B", "Task B does another precise thing");
        b.dependencies = vec!["A".into()];
        let r = triz_report(&plan(vec![a, b]));
        assert_eq!(
            kinds(&r),
            [
                ("dependency_contradiction", TrizSeverity::Critical),
                ("missing_dependency_resource", TrizSeverity::High)
            ]
        );
        assert_eq!(
            r.findings[0].message,
            "dependency cycle A → B → A: none of these tasks can ever start"
        );
        assert_eq!(r.findings[0].principle.number, 2);
        assert_eq!(r.verdict, Verdict::Reject);
        // 1 - 6 / 6
        assert_eq!(r.ideality, 0.0);
    }

    #[test]
    fn duplicates_conflicts_and_over_engineering() {
        let mut a = good("A", "Add the login page to the app.");
        a.key_files = vec!["src/login.rs".into(), "src/app.rs".into()];
        let mut b = good("B", "add   the LOGIN page to the APP");
        b.key_files = vec!["./src/app.rs".into(), "src/app.rs".into()];
        let mut c = good("C", "Refactor the whole world in one go");
        c.key_files = (0..11).map(|i| format!("f{i}.rs")).collect();
        let r = triz_report(&plan(vec![a, b, c]));
        assert_eq!(
            kinds(&r),
            [
                ("duplicate_work", TrizSeverity::Medium),
                ("resource_conflict", TrizSeverity::Medium),
                ("over_engineering_risk", TrizSeverity::Low)
            ]
        );
        assert_eq!(r.findings[0].task_ids, ["A", "B"]);
        assert_eq!(r.findings[1].task_ids, ["A", "B"]);
        assert_eq!(r.findings[2].principle.number, 13);
        assert_eq!(r.verdict, Verdict::Revise);
        // 1 - 2.5 / 9 = 0.7222…
        assert_eq!(r.ideality, 0.722);
    }

    fn sharing(id: &str, deps: &[&str], file: &str) -> TaskSpec {
        let mut t = good(id, &format!("Task {id} edits one shared file"));
        t.dependencies = deps.iter().map(|d| d.to_string()).collect();
        t.key_files = vec![file.into()];
        t
    }

    #[test]
    fn a_shared_key_file_is_no_conflict_when_dependencies_order_the_tasks() {
        // A → B → C: C waits for A through B, so they never run side by side.
        let r = triz_report(&plan(vec![
            sharing("A", &[], "src/x.rs"),
            {
                let mut b = sharing("B", &["A"], "src/other.rs");
                b.key_files.clear();
                b
            },
            sharing("C", &["B"], "src/x.rs"),
        ]));
        assert!(r.findings.is_empty(), "{:?}", r.findings);
        assert_eq!(r.verdict, Verdict::Approve);
    }

    #[test]
    fn a_shared_key_file_is_a_conflict_when_nothing_orders_the_tasks() {
        let r = triz_report(&plan(vec![
            sharing("A", &[], "src/x.rs"),
            sharing("B", &[], "src/x.rs"),
        ]));
        assert_eq!(kinds(&r), [("resource_conflict", TrizSeverity::Medium)]);
        assert_eq!(r.findings[0].task_ids, ["A", "B"]);
        assert_eq!(
            r.findings[0].message,
            "tasks A, B share key file src/x.rs and no dependency orders them; they cannot run in parallel"
        );
    }

    #[test]
    fn only_the_unordered_tasks_of_a_shared_file_are_reported() {
        // A → B share the file with D, which nothing orders against either.
        let r = triz_report(&plan(vec![
            sharing("A", &[], "src/x.rs"),
            sharing("B", &["A"], "src/x.rs"),
            sharing("D", &[], "src/x.rs"),
        ]));
        assert_eq!(kinds(&r), [("resource_conflict", TrizSeverity::Medium)]);
        assert_eq!(r.findings[0].task_ids, ["A", "B", "D"]);
        assert_eq!(
            r.findings[0].message,
            "tasks A, B, D share key file src/x.rs and no dependency orders A and D, B and D; they cannot run in parallel"
        );
    }

    #[test]
    fn cycles_do_not_hang_the_ordering_walk() {
        let r = triz_report(&plan(vec![
            sharing("A", &["B"], "src/x.rs"),
            sharing("B", &["A"], "src/x.rs"),
            sharing("C", &["C"], "src/x.rs"),
        ]));
        let conflict = r
            .findings
            .iter()
            .find(|f| f.kind == "resource_conflict")
            .map(|f| f.task_ids.clone());
        // A and B reach each other (a cycle orders nothing, but it is its own finding); C is
        // unordered against both.
        assert_eq!(conflict, Some(vec!["A".into(), "B".into(), "C".into()]));
    }

    #[test]
    fn the_bundled_demo_plan_has_no_resource_conflict() {
        let parsed = crate::plan::parse_plan(
            include_str!("../../assets/demo/plan.json").as_bytes(),
            "assets/demo/plan.json",
        );
        let demo = parsed.plan.expect("the demo plan parses");
        let r = triz_report(&demo);
        assert!(
            r.findings.iter().all(|f| f.kind != "resource_conflict"),
            "{:?}",
            r.findings
        );
    }

    #[test]
    fn only_low_findings_approve() {
        let mut c = good("C", "Refactor the whole world in one go");
        c.acceptance_criteria = (0..11).map(|i| format!("c{i}")).collect();
        let r = triz_report(&plan(vec![c]));
        assert_eq!(r.verdict, Verdict::Approve);
        assert_eq!(r.ideality, 0.833);
    }
}
