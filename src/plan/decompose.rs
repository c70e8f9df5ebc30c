//! Decomposition of tasks too big for one agent session: the size heuristic, the agent's answer
//! (a [`Split`]), its validation against the parent task, and [`apply`], which replaces the
//! parent by its subtasks and rewires the plan's dependencies, and [`task_split`], the same
//! change as the queue writes it. Pure: the agent call lives in `prd::preflight`, the flow in
//! `prd::decompose`.
//!
//! Rewiring rules: a subtask that depends on no other subtask inherits the parent's
//! dependencies (the others get them through the subtasks they follow); subtasks follow one
//! another in order unless the agent says otherwise (`depends_on`); a task that depended on the
//! parent depends on its last subtask, or on all of them when the split says `"all"`.

use super::check::check_spec;
use super::gate::{GateResult, gate_failures};
use crate::domain::{PlanSpec, TaskSpec, TaskSplit};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// More key files than this: the task touches too much for one session. Stricter than the TRIZ
/// over-engineering finding, which flags a plan problem rather than a split candidate.
pub(crate) const MAX_KEY_FILES: usize = 5;
/// More acceptance criteria than this: several tasks in one.
pub(crate) const MAX_CRITERIA: usize = 6;
/// A description longer than this (characters) describes more than one change.
pub(crate) const MAX_DESCRIPTION_CHARS: usize = 1200;
/// Fewest and most subtasks a split may have (ids `<id>a` … `<id>e`).
pub(crate) const MIN_SUBTASKS: usize = 2;
pub(crate) const MAX_SUBTASKS: usize = 5;

/// Why `task` looks too big for one agent session, or `None`.
pub(crate) fn too_big(task: &TaskSpec) -> Option<String> {
    let mut why = Vec::new();
    if task.key_files.len() > MAX_KEY_FILES {
        why.push(format!(
            "{} key files (more than {MAX_KEY_FILES})",
            task.key_files.len()
        ));
    }
    if task.acceptance_criteria.len() > MAX_CRITERIA {
        why.push(format!(
            "{} acceptance criteria (more than {MAX_CRITERIA})",
            task.acceptance_criteria.len()
        ));
    }
    let chars = task.description.trim().chars().count();
    if chars > MAX_DESCRIPTION_CHARS {
        why.push(format!(
            "a {chars}-character description (more than {MAX_DESCRIPTION_CHARS})"
        ));
    }
    (!why.is_empty()).then(|| why.join(", "))
}

/// Tasks to split: the named ones (each must exist), or every task the heuristic flags.
/// Finished tasks are never split. Each comes with the reason it was picked.
pub(crate) fn candidates(
    plan: &PlanSpec,
    named: &[String],
) -> Result<Vec<(String, String)>, String> {
    if named.is_empty() {
        return Ok(plan
            .tasks
            .iter()
            .filter(|t| !is_finished(t))
            .filter_map(|t| too_big(t).map(|why| (t.id.clone(), why)))
            .collect());
    }
    let mut out = Vec::new();
    for id in named {
        let Some(t) = plan.task(id) else {
            return Err(format!("--task {id}: plan {} has no such task", plan.id));
        };
        if is_finished(t) {
            return Err(format!("--task {id}: the task is already finished"));
        }
        let why = too_big(t).unwrap_or_else(|| "named on the command line".to_string());
        out.push((id.clone(), why));
    }
    Ok(out)
}

fn is_finished(t: &TaskSpec) -> bool {
    t.status.is_some_and(|s| s.is_terminal())
}

/// Who depends on the split after it: the last subtask, or all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DependentsOn {
    #[default]
    Last,
    All,
}

/// One subtask as the agent writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subtask {
    /// `a`, `b`, … in order; the id is the parent's id with this suffix.
    pub suffix: String,
    pub description: String,
    #[serde(default)]
    pub acceptance_criteria: Vec<String>,
    #[serde(default)]
    pub key_files: Vec<String>,
    #[serde(default)]
    pub test_steps: Vec<String>,
    /// Suffixes of earlier subtasks this one needs; absent: the one before it (sequential).
    #[serde(default)]
    pub depends_on: Option<Vec<String>>,
}

/// The agent's answer for one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Split {
    pub subtasks: Vec<Subtask>,
    #[serde(default)]
    pub dependents_on: DependentsOn,
}

/// Options of the validation.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SplitRules {
    /// Subtasks may name key files the parent did not list.
    pub allow_new_key_files: bool,
}

fn suffix_letter(i: usize) -> String {
    char::from(b'a' + i as u8).to_string()
}

/// Every problem of `split` as an answer for `parent` in `plan` (empty when it can be applied),
/// worded for the agent's repair round.
pub(crate) fn split_problems(
    plan: &PlanSpec,
    parent: &TaskSpec,
    split: &Split,
    rules: SplitRules,
) -> Vec<String> {
    let mut out = Vec::new();
    let n = split.subtasks.len();
    if !(MIN_SUBTASKS..=MAX_SUBTASKS).contains(&n) {
        out.push(format!(
            "subtasks: {n} given; a split has {MIN_SUBTASKS} to {MAX_SUBTASKS} subtasks"
        ));
    }
    let mut earlier: BTreeSet<String> = BTreeSet::new();
    for (i, s) in split.subtasks.iter().enumerate() {
        let want = suffix_letter(i);
        let at = format!("subtasks[{i}]");
        if s.suffix != want {
            out.push(format!(
                "{at}.suffix: {:?}; subtasks are lettered in order, this one must be {want:?}",
                s.suffix
            ));
        }
        let id = format!("{}{want}", parent.id);
        if plan.task(&id).is_some() {
            out.push(format!(
                "{at}: the id {id} is already a task of the plan; choose another split or rename that task first"
            ));
        }
        for f in gate_failures(&as_task(parent, s, &id)) {
            out.push(format!("{at}.{}: {f}", f.field()));
        }
        for d in s.depends_on.iter().flatten() {
            if !earlier.contains(d) {
                out.push(format!(
                    "{at}.depends_on: {d:?} is not the suffix of an earlier subtask"
                ));
            }
        }
        if !rules.allow_new_key_files {
            for f in &s.key_files {
                if !parent.key_files.iter().any(|p| p == f) {
                    out.push(format!(
                        "{at}.key_files: {f:?} is not one of the parent's key files"
                    ));
                }
            }
        }
        earlier.insert(want);
    }
    for c in &parent.acceptance_criteria {
        if !split
            .subtasks
            .iter()
            .any(|s| s.acceptance_criteria.iter().any(|x| x.trim() == c.trim()))
        {
            out.push(format!(
                "acceptance criterion {c:?} of {} is in no subtask (copy it verbatim into one)",
                parent.id
            ));
        }
    }
    for f in &parent.key_files {
        if !split.subtasks.iter().any(|s| s.key_files.contains(f)) {
            out.push(format!("key file {f:?} of {} is in no subtask", parent.id));
        }
    }
    out
}

/// The subtask as a task of the plan: what the agent wrote, the rest inherited from the parent
/// (priority, phase, agent, tags, limits …); a budget is not split, so it is not inherited.
fn as_task(parent: &TaskSpec, s: &Subtask, id: &str) -> TaskSpec {
    let mut extra = serde_json::Map::new();
    extra.insert(
        "decomposed_from".to_string(),
        serde_json::Value::String(parent.id.clone()),
    );
    TaskSpec {
        id: id.to_string(),
        status: parent.status,
        priority: parent.priority,
        description: s.description.trim().to_string(),
        phase: parent.phase.clone(),
        category: parent.category.clone(),
        dependencies: Vec::new(),
        key_files: s.key_files.clone(),
        acceptance_criteria: s.acceptance_criteria.clone(),
        test_steps: s.test_steps.clone(),
        prd_requirement: parent.prd_requirement.clone(),
        repo_target_id: parent.repo_target_id.clone(),
        budget_usd: None,
        timeout_secs: parent.timeout_secs,
        agent: parent.agent.clone(),
        max_attempts: parent.max_attempts,
        tags: parent.tags.clone(),
        extra,
    }
}

/// Why a split cannot be applied.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DecomposeError {
    #[error("plan {plan} has no task {task}")]
    NoSuchTask { plan: String, task: String },
    #[error("the split of {task} is not usable:\n  {}", problems.join("\n  "))]
    InvalidSplit { task: String, problems: Vec<String> },
    #[error("the plan after splitting {task} does not validate:\n{problems}")]
    InvalidPlan { task: String, problems: String },
}

/// The plan with `parent_id` replaced, in place, by the subtasks of `split`, dependencies
/// rewired (see the module doc). The split is validated first; the new plan is checked like a
/// plan file (ids, references, cycles).
pub(crate) fn apply(
    plan: &PlanSpec,
    parent_id: &str,
    split: &Split,
    rules: SplitRules,
) -> Result<PlanSpec, DecomposeError> {
    let Some(pos) = plan.tasks.iter().position(|t| t.id == parent_id) else {
        return Err(DecomposeError::NoSuchTask {
            plan: plan.id.clone(),
            task: parent_id.to_string(),
        });
    };
    let parent = &plan.tasks[pos];
    let problems = split_problems(plan, parent, split, rules);
    if !problems.is_empty() {
        return Err(DecomposeError::InvalidSplit {
            task: parent_id.to_string(),
            problems,
        });
    }
    let ids: Vec<String> = (0..split.subtasks.len())
        .map(|i| format!("{parent_id}{}", suffix_letter(i)))
        .collect();
    let mut subtasks = Vec::new();
    for (i, s) in split.subtasks.iter().enumerate() {
        let mut t = as_task(parent, s, &ids[i]);
        let within: Vec<String> = match &s.depends_on {
            Some(d) => d.iter().map(|x| format!("{parent_id}{x}")).collect(),
            None if i > 0 => vec![ids[i - 1].clone()],
            None => Vec::new(),
        };
        t.dependencies = if within.is_empty() {
            parent.dependencies.clone()
        } else {
            within
        };
        subtasks.push(t);
    }
    let replacement: Vec<String> = match split.dependents_on {
        DependentsOn::Last => ids.last().cloned().into_iter().collect(),
        DependentsOn::All => ids.clone(),
    };
    let mut out = plan.clone();
    out.tasks.splice(pos..=pos, subtasks);
    for t in out.tasks.iter_mut() {
        if !t.dependencies.iter().any(|d| d == parent_id) {
            continue;
        }
        let mut deps = Vec::new();
        for d in &t.dependencies {
            let add: Vec<String> = if d == parent_id {
                replacement.clone()
            } else {
                vec![d.clone()]
            };
            for a in add {
                if !deps.contains(&a) {
                    deps.push(a);
                }
            }
        }
        t.dependencies = deps;
    }
    let report = check_spec(&out);
    if report.has_errors() {
        let problems = report
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| super::render::render_diagnostic(&report.file, d))
            .collect::<Vec<_>>()
            .join("\n");
        return Err(DecomposeError::InvalidPlan {
            task: parent_id.to_string(),
            problems,
        });
    }
    Ok(out)
}

/// What splitting `parent_id` changed between `before` and `after` (one [`apply`] apart), as the
/// queue writes it: the tasks `after` added, and each task of `before` that depended on the
/// parent with its dependencies in `after`.
pub(crate) fn task_split(before: &PlanSpec, after: &PlanSpec, parent_id: &str) -> TaskSplit {
    let old: BTreeSet<&str> = before.tasks.iter().map(|t| t.id.as_str()).collect();
    let subtasks = after
        .tasks
        .iter()
        .filter(|t| !old.contains(t.id.as_str()))
        .cloned()
        .collect();
    let dependents = before
        .tasks
        .iter()
        .filter(|t| t.dependencies.iter().any(|d| d == parent_id))
        .filter_map(|t| after.task(&t.id))
        .map(|t| (t.id.clone(), t.dependencies.clone()))
        .collect();
    TaskSplit {
        parent: parent_id.to_string(),
        subtasks,
        dependents,
    }
}

/// The gate results of the subtasks that came from `parent_id` (only failures), for the report.
pub(crate) fn subtask_gate(spec: &PlanSpec, parent_id: &str) -> Vec<GateResult> {
    spec.tasks
        .iter()
        .filter(|t| t.extra.get("decomposed_from").and_then(|v| v.as_str()) == Some(parent_id))
        .map(|t| GateResult {
            task_id: t.id.clone(),
            failures: gate_failures(t),
        })
        .filter(|g| !g.passed())
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::domain::Status;

    fn task(id: &str, deps: &[&str]) -> TaskSpec {
        TaskSpec {
            id: id.into(),
            status: Some(Status::Pending),
            description: format!("Do the work of task {id} in the repository."),
            dependencies: deps.iter().map(|s| s.to_string()).collect(),
            acceptance_criteria: vec![format!("{id} works")],
            test_steps: vec!["cargo test".into()],
            ..TaskSpec::default()
        }
    }

    /// Fan-in to and fan-out from `M`: A and B before it; C, D after it; E after D and A.
    fn plan() -> PlanSpec {
        let mut m = task("M", &["A", "B"]);
        m.key_files = vec!["src/x.rs".into(), "src/y.rs".into(), "src/z.rs".into()];
        m.acceptance_criteria = vec!["x works".into(), "y works".into(), "z works".into()];
        PlanSpec {
            id: "p".into(),
            project: "proj".into(),
            tasks: vec![
                task("A", &[]),
                task("B", &[]),
                m,
                task("C", &["M"]),
                task("D", &["M", "B"]),
                task("E", &["D", "A"]),
            ],
            ..PlanSpec::default()
        }
    }

    fn sub(suffix: &str, files: &[&str], ac: &[&str], deps: Option<&[&str]>) -> Subtask {
        Subtask {
            suffix: suffix.into(),
            description: format!("Build part {suffix} of the middle task properly."),
            acceptance_criteria: ac.iter().map(|s| s.to_string()).collect(),
            key_files: files.iter().map(|s| s.to_string()).collect(),
            test_steps: vec![format!("cargo test part_{suffix}")],
            depends_on: deps.map(|d| d.iter().map(|s| s.to_string()).collect()),
        }
    }

    fn three(dependents_on: DependentsOn) -> Split {
        Split {
            subtasks: vec![
                sub("a", &["src/x.rs"], &["x works"], None),
                sub("b", &["src/y.rs"], &["y works"], None),
                sub("c", &["src/z.rs"], &["z works"], None),
            ],
            dependents_on,
        }
    }

    fn deps(spec: &PlanSpec, id: &str) -> Vec<String> {
        spec.task(id).unwrap().dependencies.clone()
    }

    fn ids(spec: &PlanSpec) -> Vec<&str> {
        spec.tasks.iter().map(|t| t.id.as_str()).collect()
    }

    #[test]
    fn sequential_split_rewires_fan_in_and_fan_out_to_the_last_subtask() {
        let out = apply(
            &plan(),
            "M",
            &three(DependentsOn::Last),
            SplitRules::default(),
        )
        .unwrap();
        assert_eq!(ids(&out), ["A", "B", "Ma", "Mb", "Mc", "C", "D", "E"]);
        // Fan-in: the first subtask inherits both of the parent's dependencies.
        assert_eq!(deps(&out, "Ma"), ["A", "B"]);
        assert_eq!(deps(&out, "Mb"), ["Ma"]);
        assert_eq!(deps(&out, "Mc"), ["Mb"]);
        // Fan-out: every dependent now waits for the last subtask; other deps are kept in order.
        assert_eq!(deps(&out, "C"), ["Mc"]);
        assert_eq!(deps(&out, "D"), ["Mc", "B"]);
        // A task that did not depend on the parent is untouched.
        assert_eq!(deps(&out, "E"), ["D", "A"]);
        assert!(out.task("M").is_none());
        assert!(
            out.tasks
                .iter()
                .all(|t| !t.dependencies.contains(&"M".into()))
        );
        // Key files and criteria distributed, provenance recorded.
        assert_eq!(out.task("Mb").unwrap().key_files, ["src/y.rs"]);
        assert_eq!(out.task("Mc").unwrap().acceptance_criteria, ["z works"]);
        assert_eq!(out.task("Ma").unwrap().extra["decomposed_from"], "M");
        assert!(subtask_gate(&out, "M").is_empty());
        assert!(!check_spec(&out).has_errors());
    }

    #[test]
    fn task_split_names_the_subtasks_and_the_rewired_dependents() {
        let before = plan();
        let after = apply(
            &before,
            "M",
            &three(DependentsOn::Last),
            SplitRules::default(),
        )
        .unwrap();
        let ts = task_split(&before, &after, "M");
        assert_eq!(ts.parent, "M");
        assert_eq!(ts.subtask_ids(), ["Ma", "Mb", "Mc"]);
        assert_eq!(ts.subtasks[0].dependencies, ["A", "B"]);
        let dependents: Vec<(&str, Vec<String>)> = ts
            .dependents
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        assert_eq!(
            dependents,
            [
                ("C", vec!["Mc".to_string()]),
                ("D", vec!["Mc".into(), "B".into()])
            ]
        );
        // It fits the plan it was made from, as a store checks it.
        let m = before.task("M").unwrap();
        let stored = before
            .tasks
            .iter()
            .filter(|t| t.dependencies.contains(&"M".to_string()))
            .map(|t| (t.id.clone(), t.dependencies.clone()))
            .collect();
        let ids = before.tasks.iter().map(|t| t.id.clone()).collect();
        assert_eq!(ts.check(&m.dependencies, &stored, &ids), Ok(()));
    }

    #[test]
    fn parallel_split_with_all_dependents() {
        let mut split = three(DependentsOn::All);
        split.subtasks[1].depends_on = Some(vec![]);
        split.subtasks[2].depends_on = Some(vec!["a".into(), "b".into()]);
        let out = apply(&plan(), "M", &split, SplitRules::default()).unwrap();
        // a and b run in parallel, each inheriting the parent's fan-in; c joins them.
        assert_eq!(deps(&out, "Ma"), ["A", "B"]);
        assert_eq!(deps(&out, "Mb"), ["A", "B"]);
        assert_eq!(deps(&out, "Mc"), ["Ma", "Mb"]);
        assert_eq!(deps(&out, "C"), ["Ma", "Mb", "Mc"]);
        assert_eq!(deps(&out, "D"), ["Ma", "Mb", "Mc", "B"]);
        assert_eq!(deps(&out, "E"), ["D", "A"]);
    }

    #[test]
    fn dependents_that_already_list_a_subtask_get_no_duplicate() {
        let mut p = plan();
        // A root task with fan-out to two tasks, split in two.
        p.tasks[0].key_files = vec!["src/a.rs".into()];
        let split = Split {
            subtasks: vec![
                sub("a", &["src/a.rs"], &["A works"], None),
                sub("b", &[], &[], None),
            ],
            dependents_on: DependentsOn::All,
        };
        // b has no criterion: the gate refuses it.
        let err = apply(&p, "A", &split, SplitRules::default()).unwrap_err();
        let DecomposeError::InvalidSplit { problems, .. } = err else {
            panic!("{err:?}")
        };
        assert!(
            problems
                .iter()
                .any(|x| x.contains("subtasks[1].acceptance_criteria")),
            "{problems:?}"
        );
        let mut split = split;
        split.subtasks[1].acceptance_criteria = vec!["more".into()];
        let out = apply(&p, "A", &split, SplitRules::default()).unwrap();
        // A root has no dependencies to inherit.
        assert!(deps(&out, "Aa").is_empty());
        assert_eq!(deps(&out, "Ab"), ["Aa"]);
        assert_eq!(deps(&out, "M"), ["Aa", "Ab", "B"]);
        assert_eq!(deps(&out, "E"), ["D", "Aa", "Ab"]);
    }

    #[test]
    fn bad_splits_are_refused_with_every_problem() {
        let p = plan();
        let one = Split {
            subtasks: vec![sub("a", &["src/x.rs"], &["x works"], None)],
            dependents_on: DependentsOn::Last,
        };
        let problems = split_problems(&p, p.task("M").unwrap(), &one, SplitRules::default());
        let text = problems.join("\n");
        assert!(text.contains("1 given; a split has 2 to 5"), "{text}");
        assert!(text.contains("\"y works\" of M is in no subtask"), "{text}");
        assert!(
            text.contains("key file \"src/z.rs\" of M is in no subtask"),
            "{text}"
        );

        let mut wrong = three(DependentsOn::Last);
        wrong.subtasks[1].suffix = "x".into();
        wrong.subtasks[0].depends_on = Some(vec!["b".into()]);
        wrong.subtasks[2].key_files.push("src/new.rs".into());
        let text =
            split_problems(&p, p.task("M").unwrap(), &wrong, SplitRules::default()).join("\n");
        assert!(text.contains("subtasks[1].suffix: \"x\""), "{text}");
        assert!(text.contains("subtasks[0].depends_on: \"b\""), "{text}");
        assert!(
            text.contains("\"src/new.rs\" is not one of the parent's"),
            "{text}"
        );
        // New files may be allowed.
        wrong.subtasks[1].suffix = "b".into();
        wrong.subtasks[0].depends_on = None;
        let rules = SplitRules {
            allow_new_key_files: true,
        };
        assert!(split_problems(&p, p.task("M").unwrap(), &wrong, rules).is_empty());

        // An id that is already taken.
        let mut taken = p.clone();
        taken.tasks.push(task("Mb", &[]));
        let text = split_problems(
            &taken,
            taken.task("M").unwrap(),
            &three(DependentsOn::Last),
            SplitRules::default(),
        )
        .join("\n");
        assert!(text.contains("the id Mb is already a task"), "{text}");
        assert_eq!(
            apply(&p, "Z", &three(DependentsOn::Last), SplitRules::default()).unwrap_err(),
            DecomposeError::NoSuchTask {
                plan: "p".into(),
                task: "Z".into()
            }
        );
    }

    #[test]
    fn answer_schema_parses_and_rejects_unknown_fields() {
        let s: Split = serde_json::from_str(
            r#"{"subtasks":[{"suffix":"a","description":"d","depends_on":[]}],"dependents_on":"all"}"#,
        )
        .unwrap();
        assert_eq!(s.dependents_on, DependentsOn::All);
        assert_eq!(s.subtasks[0].depends_on, Some(vec![]));
        let s: Split =
            serde_json::from_str(r#"{"subtasks":[{"suffix":"a","description":"d"}]}"#).unwrap();
        assert_eq!(s.dependents_on, DependentsOn::Last);
        assert!(serde_json::from_str::<Split>(r#"{"subtasks":[],"extra":1}"#).is_err());
    }

    #[test]
    fn heuristic_and_candidates() {
        let mut p = plan();
        assert_eq!(too_big(&p.tasks[0]), None);
        p.tasks[2].key_files = (0..6).map(|i| format!("f{i}")).collect();
        p.tasks[2].acceptance_criteria = (0..7).map(|i| format!("c{i}")).collect();
        p.tasks[3].description = "x".repeat(MAX_DESCRIPTION_CHARS + 1);
        p.tasks[4].key_files = (0..9).map(|i| format!("f{i}")).collect();
        p.tasks[4].status = Some(Status::Done);
        let why = too_big(&p.tasks[2]).unwrap();
        assert!(
            why.contains("6 key files") && why.contains("7 acceptance criteria"),
            "{why}"
        );
        let c = candidates(&p, &[]).unwrap();
        let got: Vec<&str> = c.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(got, ["M", "C"]);
        assert_eq!(
            candidates(&p, &["A".into()]).unwrap()[0].1,
            "named on the command line"
        );
        assert!(
            candidates(&p, &["nope".into()])
                .unwrap_err()
                .contains("no such task")
        );
        assert!(
            candidates(&p, &["D".into()])
                .unwrap_err()
                .contains("finished")
        );
    }
}
