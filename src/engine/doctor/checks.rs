//! Checks that cannot run: a plan's open tasks whose checks (test steps, verification commands,
//! the repository's own checks) run a program this machine does not have. Such a check fails
//! every attempt, so it is found here before any agent is paid.

use crate::domain::doctor::Finding;
use crate::engine::checks::{MissingProgram, describe_missing, plan_missing_programs};
use crate::store::Store;
use std::sync::Arc;

pub(crate) struct ChecksFacts {
    /// Whether the queue could be read.
    pub read: bool,
    /// Per plan with open tasks: the checks that cannot pass here.
    pub plans: Vec<(String, Vec<(String, MissingProgram)>)>,
}

pub(crate) async fn gather(
    env: &super::DoctorEnv<'_>,
    store: Option<&Arc<dyn Store>>,
) -> ChecksFacts {
    let Some(store) = store else {
        return ChecksFacts {
            read: false,
            plans: Vec::new(),
        };
    };
    let Ok(listed) = store.list_plans().await else {
        return ChecksFacts {
            read: false,
            plans: Vec::new(),
        };
    };
    let policy = crate::engine::configure::check_policy(env.config);
    let mut plans = Vec::new();
    for p in listed.iter().filter(|p| p.plan.archived_at.is_none()) {
        let Ok(tasks) = store.list_tasks(&p.plan.id).await else {
            continue;
        };
        let open = tasks
            .iter()
            .filter(|t| !t.status.is_terminal())
            .map(|t| &t.spec);
        let missing = plan_missing_programs(open, &p.plan.spec, env.repo_root, policy);
        plans.push((p.plan.id.clone(), missing));
    }
    ChecksFacts { read: true, plans }
}

pub(crate) fn judge(f: &ChecksFacts) -> Vec<Finding> {
    if !f.read {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (plan, missing) in &f.plans {
        for line in describe_missing(missing) {
            let (what, fix) = line.split_once("; ").unwrap_or((line.as_str(), ""));
            out.push(Finding::problem(
                "checks",
                format!("plan {plan}: {what}"),
                "a check that cannot run fails every attempt of its task; whilly refuses to start the run",
                fix.to_string(),
            ));
        }
    }
    if out.is_empty() {
        out.push(Finding::ok(
            "checks",
            format!("every check of {} open plan(s) can run here", f.plans.len()),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::doctor::Severity;

    #[test]
    fn a_missing_program_is_a_problem_naming_the_plan_the_tasks_and_the_fix() {
        let m = MissingProgram {
            check: "test_steps[0]".into(),
            command: "pytest -q".into(),
            programs: vec!["pytest".into()],
        };
        let f = ChecksFacts {
            read: true,
            plans: vec![
                (
                    "p1".into(),
                    vec![("T-1".into(), m.clone()), ("T-2".into(), m)],
                ),
                ("p2".into(), vec![]),
            ],
        };
        let v = judge(&f);
        assert_eq!(v.len(), 1, "{v:#?}");
        assert_eq!(v[0].severity, Severity::Problem);
        assert!(
            v[0].what
                .contains("plan p1: program `pytest` is not on PATH"),
            "{}",
            v[0].what
        );
        assert!(
            v[0].what.contains("T-1 test_steps[0], T-2 test_steps[0]"),
            "{}",
            v[0].what
        );
        assert!(v[0].fix.contains("install pytest"), "{}", v[0].fix);
        let fine = judge(&ChecksFacts {
            read: true,
            plans: vec![("p2".into(), vec![])],
        });
        assert_eq!(fine[0].severity, Severity::Ok);
    }
}
