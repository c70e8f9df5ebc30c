//! Putting a generated plan to use: merged into a plan already in the queue (the running one),
//! or saved as a plan file of its own and imported.

use super::error::{MergeError, PrdError};
use super::plan_gen::{check_spec, problems_text};
use crate::domain::{PlanSpec, validate_id};
use crate::store::{ImportOptions, ImportReport, Store, StoreError};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

/// What to do when a new task's id is already taken in the target plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Collisions {
    /// Give the new task the next free id of its series (`TASK-003` → `TASK-008` after
    /// `TASK-007`) and rewrite the new plan's dependencies on it.
    #[default]
    Rename,
    /// Refuse the merge, naming every colliding id.
    Refuse,
}

/// The merged plan and what happened to the new tasks.
#[derive(Debug, Clone, PartialEq)]
pub struct MergeOutcome {
    pub plan: PlanSpec,
    /// New task ids as they are in the merged plan, in order.
    pub added: Vec<String>,
    /// (id in the new plan, id given in the merged plan) for every renamed task.
    pub renamed: Vec<(String, String)>,
}

/// `existing` with the tasks of `new` appended. The existing plan's settings and tasks are kept
/// as they are; dependencies inside the new tasks follow renames; a dependency of a new task on
/// an existing task's id (one the new plan does not define) stays as written.
pub fn merge_into(
    existing: &PlanSpec,
    new: &PlanSpec,
    collisions: Collisions,
) -> Result<MergeOutcome, MergeError> {
    let mut taken: HashSet<String> = existing.tasks.iter().map(|t| t.id.clone()).collect();
    let clashing: Vec<String> = new
        .tasks
        .iter()
        .filter(|t| taken.contains(&t.id))
        .map(|t| t.id.clone())
        .collect();
    if collisions == Collisions::Refuse && !clashing.is_empty() {
        return Err(MergeError::Collision {
            plan: existing.id.clone(),
            ids: clashing,
        });
    }
    // Non-clashing new ids are reserved first so a renamed task never takes one of them.
    for t in &new.tasks {
        taken.insert(t.id.clone());
    }
    let mut renames: BTreeMap<String, String> = BTreeMap::new();
    let mut renamed = Vec::new();
    for id in &clashing {
        let fresh = next_free_id(id, &taken);
        taken.insert(fresh.clone());
        renames.insert(id.clone(), fresh.clone());
        renamed.push((id.clone(), fresh));
    }
    let mut plan = existing.clone();
    let mut added = Vec::new();
    for t in &new.tasks {
        let mut t = t.clone();
        if let Some(r) = renames.get(&t.id) {
            t.id = r.clone();
        }
        for d in &mut t.dependencies {
            if let Some(r) = renames.get(d) {
                *d = r.clone();
            }
        }
        added.push(t.id.clone());
        plan.tasks.push(t);
    }
    let report = check_spec(&plan);
    if report.has_errors() {
        return Err(MergeError::Invalid(problems_text(&report)));
    }
    Ok(MergeOutcome {
        plan,
        added,
        renamed,
    })
}

/// The next id of `id`'s series not in `taken`: a trailing number is bumped past the highest
/// taken one (keeping its width), otherwise `-2`, `-3`, … is appended.
fn next_free_id(id: &str, taken: &HashSet<String>) -> String {
    let digits = id.len() - id.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits > 0 && digits <= 9 {
        let prefix = &id[..id.len() - digits];
        let highest = taken
            .iter()
            .filter_map(|t| t.strip_prefix(prefix))
            .filter(|n| !n.is_empty() && n.len() <= 9 && n.bytes().all(|b| b.is_ascii_digit()))
            .filter_map(|n| n.parse::<u64>().ok())
            .max()
            .unwrap_or(0);
        for n in highest + 1.. {
            let candidate = format!("{prefix}{n:0digits$}");
            if !taken.contains(&candidate) && validate_id(&candidate).is_ok() {
                return candidate;
            }
        }
    }
    (2u64..)
        .map(|n| format!("{id}-{n}"))
        .find(|c| !taken.contains(c))
        .unwrap_or_else(|| format!("{id}-x"))
}

/// Merges `new` into the imported plan `plan_id` and re-imports it in one transaction: the
/// existing tasks are unchanged (started ones are never touched by an import), the new ones are
/// created PENDING and a running engine picks them up like any other ready task.
pub async fn merge_and_import(
    store: &dyn Store,
    plan_id: &str,
    new: &PlanSpec,
    collisions: Collisions,
) -> Result<(MergeOutcome, ImportReport), PrdError> {
    let existing = store.export_plan(plan_id).await?;
    let outcome = merge_into(&existing, new, collisions)?;
    let opts = ImportOptions {
        plan_id: Some(plan_id.to_string()),
        default_max_attempts: 3,
        ..ImportOptions::default()
    };
    let report = store.import_plan(&outcome.plan, &opts).await?;
    Ok((outcome, report))
}

/// Where a new plan is saved when the caller does not say: beside its PRD
/// (`docs/PRD-x.md` → `docs/PRD-x.plan.json`).
pub fn default_plan_path(prd_path: &Path) -> PathBuf {
    prd_path.with_extension("plan.json")
}

/// Writes `spec` to `path` as a plan file (its canonical JSON), atomically.
pub fn write_plan_file(path: &Path, spec: &PlanSpec) -> Result<(), PrdError> {
    crate::fsutil::atomic_write(path, crate::plan::canonical_json(spec).as_bytes()).map_err(
        |source| PrdError::Io {
            path: path.to_path_buf(),
            source,
        },
    )
}

/// Saves `spec` as a plan of its own: its canonical JSON written atomically to `path`, then
/// imported. An id already used by an imported plan gets a `-2`, `-3`, … suffix first, so a
/// separate plan never updates another one.
pub async fn save_as_new_plan(
    store: &dyn Store,
    spec: &PlanSpec,
    path: &Path,
) -> Result<(PlanSpec, ImportReport), PrdError> {
    let mut spec = spec.clone();
    let base = spec.id.clone();
    let mut n = 1;
    loop {
        match store.get_plan(&spec.id).await {
            Err(StoreError::NotFound { .. }) => break,
            Err(e) => return Err(e.into()),
            Ok(_) => {
                n += 1;
                spec.id = format!("{base}-{n}");
            }
        }
    }
    let report = check_spec(&spec);
    if report.has_errors() {
        return Err(MergeError::Invalid(problems_text(&report)).into());
    }
    write_plan_file(path, &spec)?;
    let opts = ImportOptions {
        default_max_attempts: 3,
        ..ImportOptions::default()
    };
    let imported = store.import_plan(&spec, &opts).await?;
    Ok((spec, imported))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::domain::TaskSpec;

    fn task(id: &str, deps: &[&str]) -> TaskSpec {
        TaskSpec {
            id: id.into(),
            description: format!("do the work of {id} in full detail"),
            dependencies: deps.iter().map(|d| d.to_string()).collect(),
            acceptance_criteria: vec!["done".into()],
            test_steps: vec!["true".into()],
            ..TaskSpec::default()
        }
    }

    fn plan(id: &str, tasks: Vec<TaskSpec>) -> PlanSpec {
        PlanSpec {
            id: id.into(),
            project: id.into(),
            tasks,
            ..PlanSpec::default()
        }
    }

    #[test]
    fn collisions_are_renamed_and_dependencies_follow() {
        let existing = plan(
            "run",
            vec![
                task("TASK-001", &[]),
                task("TASK-002", &[]),
                task("TASK-007", &[]),
            ],
        );
        let new = plan(
            "prd",
            vec![
                task("TASK-001", &[]),
                task("TASK-002", &["TASK-001"]),
                task("TASK-009", &["TASK-002", "TASK-007"]),
            ],
        );
        let m = merge_into(&existing, &new, Collisions::Rename).unwrap();
        assert_eq!(
            m.renamed,
            [
                ("TASK-001".to_string(), "TASK-010".to_string()),
                ("TASK-002".to_string(), "TASK-011".to_string())
            ]
        );
        assert_eq!(m.added, ["TASK-010", "TASK-011", "TASK-009"]);
        let ids: Vec<&str> = m.plan.tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "TASK-001", "TASK-002", "TASK-007", "TASK-010", "TASK-011", "TASK-009"
            ]
        );
        assert_eq!(m.plan.task("TASK-011").unwrap().dependencies, ["TASK-010"]);
        // TASK-007 is not in the new plan: the dependency on the existing task stays.
        assert_eq!(
            m.plan.task("TASK-009").unwrap().dependencies,
            ["TASK-011", "TASK-007"]
        );
        assert_eq!(m.plan.id, "run");
    }

    #[test]
    fn refuse_names_every_collision() {
        let existing = plan("run", vec![task("A", &[]), task("B", &[])]);
        let new = plan("prd", vec![task("A", &[]), task("B", &[]), task("C", &[])]);
        let err = merge_into(&existing, &new, Collisions::Refuse).unwrap_err();
        assert_eq!(
            err,
            MergeError::Collision {
                plan: "run".into(),
                ids: vec!["A".into(), "B".into()]
            }
        );
        let m = merge_into(&existing, &new, Collisions::Rename).unwrap();
        assert_eq!(m.added, ["A-2", "B-2", "C"]);
    }

    #[test]
    fn merged_cycles_are_refused() {
        let existing = plan("run", vec![task("X-1", &[])]);
        let new = plan("prd", vec![task("Y-1", &["Y-2"]), task("Y-2", &["Y-1"])]);
        let err = merge_into(&existing, &new, Collisions::Rename).unwrap_err();
        assert!(
            matches!(err, MergeError::Invalid(ref m) if m.contains("cycle")),
            "{err}"
        );
    }

    #[test]
    fn plan_path_beside_the_prd() {
        assert_eq!(
            default_plan_path(Path::new("/r/docs/PRD-sync-2.md")),
            PathBuf::from("/r/docs/PRD-sync-2.plan.json")
        );
    }
}
