//! Ghost plans: plans in the queue whose file (as recorded by the last import from this
//! checkout, `plan::sources`) is gone, or lies outside the repository.

use crate::domain::doctor::{Finding, Fix};
use crate::plan::sources;
use crate::store::Store;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlanFacts {
    pub plan_id: String,
    pub file: PathBuf,
    pub file_exists: bool,
    pub inside_repo: bool,
    /// Tasks not yet DONE, FAILED or SKIPPED.
    pub unfinished: u64,
}

pub(crate) struct PlansFacts {
    /// Whether the queue could be read (without it no plan can be judged).
    pub read: bool,
    pub plans: Vec<PlanFacts>,
    /// Plans in the queue with no recorded file (imported from GitHub, Jira, the wizard, or
    /// before records were kept).
    pub unrecorded: usize,
}

pub(crate) async fn gather(
    state_dir: &Path,
    repo_root: &Path,
    store: Option<&Arc<dyn Store>>,
) -> PlansFacts {
    let listed = match store {
        Some(s) => s.list_plans().await.ok(),
        None => None,
    };
    let Some(listed) = listed else {
        return PlansFacts {
            read: false,
            plans: Vec::new(),
            unrecorded: 0,
        };
    };
    let root = repo_root
        .canonicalize()
        .unwrap_or_else(|_| repo_root.to_path_buf());
    let records = sources::read_all(state_dir);
    let mut plans = Vec::new();
    let mut unrecorded = 0;
    // Archived plans are out of the way already.
    for p in listed.iter().filter(|p| p.plan.archived_at.is_none()) {
        let Some(rec) = records.iter().find(|r| r.plan_id == p.plan.id) else {
            unrecorded += 1;
            continue;
        };
        let ended: u64 = p
            .counts
            .by_status
            .iter()
            .filter(|(s, _)| s.is_terminal())
            .map(|(_, n)| n)
            .sum();
        plans.push(PlanFacts {
            plan_id: p.plan.id.clone(),
            file: rec.file.clone(),
            file_exists: rec.file.is_file(),
            inside_repo: rec.file.starts_with(&root),
            unfinished: p.counts.total.saturating_sub(ended),
        });
    }
    PlansFacts {
        read: true,
        plans,
        unrecorded,
    }
}

pub(crate) fn judge(f: &PlansFacts) -> Vec<Finding> {
    if !f.read {
        return vec![Finding::warn(
            "plans",
            "not checked: the queue could not be read",
            "doctor cannot tell whether a plan's file is gone",
            "fix the database finding above, then run doctor again",
        )];
    }
    let mut out = Vec::new();
    for p in &f.plans {
        let (id, file) = (&p.plan_id, p.file.display());
        if !p.file_exists && p.unfinished > 0 {
            out.push(Finding::problem(
                "plans",
                format!(
                    "plan {id} was imported from {file}, which no longer exists; {} of its tasks are unfinished",
                    p.unfinished
                ),
                "its tasks still run, but nobody can edit the plan or import it again: a ghost",
                format!(
                    "if the file moved, import it from where it is now (`whilly plan import NEW/PATH --id {id}`); if the plan is abandoned, `whilly plan archive {id}` hides it or `whilly plan delete {id}` removes it (its events stay)"
                ),
            ));
        } else if !p.file_exists {
            out.push(
                Finding::warn(
                    "plans",
                    format!(
                        "plan {id} was imported from {file}, which no longer exists; its tasks have all ended"
                    ),
                    "a finished plan nobody can re-import only clutters the lists",
                    format!(
                        "`whilly plan archive {id}` (reversible; `whilly doctor --fix` does it)"
                    ),
                )
                .fixable(Fix::ArchivePlan {
                    plan_id: id.clone(),
                }),
            );
        } else if !p.inside_repo {
            out.push(Finding::warn(
                "plans",
                format!("plan {id} was imported from {file}, outside this repository"),
                "it is not versioned with the code, and other checkouts cannot import it again",
                "keep plan files in the repository (e.g. plans/) and import them from there",
            ));
        }
    }
    if out.is_empty() {
        let mut what = format!(
            "{} plans, each file where it was imported from",
            f.plans.len()
        );
        if f.unrecorded > 0 {
            what.push_str(&format!(
                " ({} without a recorded file: imported from a forge, the wizard, or by an older version)",
                f.unrecorded
            ));
        }
        out.push(Finding::ok("plans", what));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::doctor::Severity;

    fn plan(id: &str, exists: bool, inside: bool, unfinished: u64) -> PlanFacts {
        PlanFacts {
            plan_id: id.into(),
            file: format!("/r/{id}.json").into(),
            file_exists: exists,
            inside_repo: inside,
            unfinished,
        }
    }

    #[test]
    fn ghosts_with_work_are_problems_finished_ones_are_archived() {
        let f = PlansFacts {
            read: true,
            plans: vec![
                plan("live", true, true, 2),
                plan("ghost", false, true, 2),
                plan("done", false, true, 0),
                plan("far", true, false, 1),
            ],
            unrecorded: 1,
        };
        let v = judge(&f);
        assert_eq!(v.len(), 3, "{v:#?}");
        assert_eq!(v[0].severity, Severity::Problem);
        assert!(
            v[0].what
                .contains("plan ghost was imported from /r/ghost.json, which no longer exists")
        );
        assert!(v[0].fix.contains("whilly plan import NEW/PATH --id ghost"));
        assert_eq!(v[0].fixable, None);
        assert_eq!(v[1].severity, Severity::Warn);
        assert_eq!(
            v[1].fixable,
            Some(Fix::ArchivePlan {
                plan_id: "done".into()
            })
        );
        assert!(v[2].what.contains("outside this repository"));
        let fine = judge(&PlansFacts {
            read: true,
            plans: vec![plan("live", true, true, 2)],
            unrecorded: 1,
        });
        assert_eq!(fine[0].severity, Severity::Ok);
        assert!(fine[0].what.contains("1 without a recorded file"));
    }
}
