//! One task of an imported plan replaced by its subtasks: what the queue is asked to write
//! ([`TaskSplit`], built by `plan::decompose::task_split` from the plan before and after
//! `apply`), and the check a store runs against what it holds before writing it.
//!
//! The check exists because the split was made from an export and the queue may have moved on
//! since (a re-import, another split): the store writes it only if it still fits exactly.

use super::TaskSpec;
use std::collections::{BTreeMap, BTreeSet};

/// The change a split makes to a plan in the queue.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TaskSplit {
    /// The task replaced (it must not have started).
    pub parent: String,
    /// The subtasks in plan order, each with its dependencies set.
    pub subtasks: Vec<TaskSpec>,
    /// Every task that depended on the parent, with its whole dependency list after the split.
    pub dependents: BTreeMap<String, Vec<String>>,
}

impl TaskSplit {
    pub fn subtask_ids(&self) -> Vec<String> {
        self.subtasks.iter().map(|t| t.id.clone()).collect()
    }

    /// Why the split cannot be written over the plan as stored, or `Ok`. `parent_deps`: the
    /// parent's dependencies; `dependents`: each stored task that depends on the parent, with its
    /// stored dependencies; `ids`: every task id of the stored plan.
    ///
    /// A subtask may depend only on earlier subtasks and the parent's own dependencies, and a
    /// dependent's list may only trade the parent for subtasks: so a split of an acyclic plan
    /// stays acyclic without a graph walk here.
    pub fn check(
        &self,
        parent_deps: &[String],
        dependents: &BTreeMap<String, Vec<String>>,
        ids: &BTreeSet<String>,
    ) -> Result<(), String> {
        let parent = &self.parent;
        if self.subtasks.is_empty() {
            return Err(format!("the split of {parent} has no subtasks"));
        }
        let mut earlier: BTreeSet<&str> = BTreeSet::new();
        for t in &self.subtasks {
            if t.id.trim().is_empty() {
                return Err(format!("a subtask of {parent} has an empty id"));
            }
            if ids.contains(&t.id) || earlier.contains(t.id.as_str()) {
                return Err(format!(
                    "subtask id {} is already a task of the plan; decompose again",
                    t.id
                ));
            }
            for d in &t.dependencies {
                if !earlier.contains(d.as_str()) && !parent_deps.contains(d) {
                    return Err(format!(
                        "subtask {} depends on {d}, which is neither an earlier subtask nor a \
                         dependency of {parent}",
                        t.id
                    ));
                }
            }
            earlier.insert(&t.id);
        }
        let stored: Vec<&str> = dependents.keys().map(String::as_str).collect();
        let given: Vec<&str> = self.dependents.keys().map(String::as_str).collect();
        if stored != given {
            return Err(format!(
                "the tasks that depend on {parent} changed since the split was made (now: [{}], \
                 the split rewires: [{}]); decompose again",
                stored.join(", "),
                given.join(", ")
            ));
        }
        for (id, new) in &self.dependents {
            let old: Vec<&String> = dependents
                .get(id)
                .into_iter()
                .flatten()
                .filter(|d| *d != parent)
                .collect();
            let subtasks = new.iter().filter(|d| earlier.contains(d.as_str())).count();
            let kept_all = old.iter().all(|d| new.contains(*d));
            let only_known = new
                .iter()
                .all(|d| earlier.contains(d.as_str()) || old.contains(&d));
            if subtasks == 0 || !kept_all || !only_known {
                return Err(format!(
                    "task {id}: its dependencies after the split ({}) must be its dependencies \
                     with {parent} replaced by subtasks of it",
                    new.join(", ")
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn t(id: &str, deps: &[&str]) -> TaskSpec {
        TaskSpec {
            id: id.into(),
            dependencies: deps.iter().map(|d| d.to_string()).collect(),
            ..TaskSpec::default()
        }
    }

    fn v(x: &[&str]) -> Vec<String> {
        x.iter().map(|s| s.to_string()).collect()
    }

    fn split() -> TaskSplit {
        TaskSplit {
            parent: "M".into(),
            subtasks: vec![t("Ma", &["A"]), t("Mb", &["Ma"])],
            dependents: [("C".to_string(), v(&["Mb", "B"]))].into(),
        }
    }

    fn stored() -> (Vec<String>, BTreeMap<String, Vec<String>>, BTreeSet<String>) {
        (
            v(&["A"]),
            [("C".to_string(), v(&["M", "B"]))].into(),
            ["A", "B", "M", "C"].iter().map(|s| s.to_string()).collect(),
        )
    }

    #[test]
    fn a_split_that_fits_the_stored_plan_passes() {
        let (deps, dependents, ids) = stored();
        assert_eq!(split().check(&deps, &dependents, &ids), Ok(()));
    }

    #[test]
    fn a_split_that_no_longer_fits_is_refused_with_the_reason() {
        let (deps, dependents, ids) = stored();
        let mut s = split();
        s.subtasks[1].dependencies = v(&["C"]);
        let e = s.check(&deps, &dependents, &ids).unwrap_err();
        assert!(e.contains("Mb depends on C"), "{e}");

        let mut s = split();
        s.subtasks[0].id = "B".into();
        let e = s.check(&deps, &dependents, &ids).unwrap_err();
        assert!(e.contains("B is already a task"), "{e}");

        let mut more = dependents.clone();
        more.insert("D".into(), v(&["M"]));
        let e = split().check(&deps, &more, &ids).unwrap_err();
        assert!(e.contains("now: [C, D], the split rewires: [C]"), "{e}");

        let mut s = split();
        s.dependents.insert("C".into(), v(&["Mb"]));
        let e = s.check(&deps, &dependents, &ids).unwrap_err();
        assert!(e.contains("task C: its dependencies"), "{e}");
        s.dependents.insert("C".into(), v(&["B"]));
        assert!(s.check(&deps, &dependents, &ids).is_err());

        let empty = TaskSplit {
            parent: "M".into(),
            ..TaskSplit::default()
        };
        assert!(empty.check(&deps, &dependents, &ids).is_err());
    }
}
