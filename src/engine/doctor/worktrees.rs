//! Orphan worktrees and branches (their task is gone, or finished long enough ago that nobody
//! will look at them), and the disk they take against `[worktrees] max_disk`. A branch is only
//! ever deleted when all its commits are on the base branch; one with work of its own is kept
//! and said so.

use super::DoctorEnv;
use crate::domain::Status;
use crate::domain::doctor::{Finding, Fix, human_size};
use crate::workspace::{Workspaces, WorktreeInfo, branch_name};
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, BTreeSet};

/// A FAILED task's worktree is kept for inspection (`keep_failed`); after this long it is an
/// orphan.
pub(crate) const FAILED_KEPT_DAYS: i64 = 7;

/// What the queue says about a worktree's or branch's task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TaskState {
    pub status: Status,
    pub since: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WorktreeFacts {
    pub info: WorktreeInfo,
    /// `None`: no such task in the queue.
    pub task: Option<TaskState>,
    /// Whether its branch's commits are all on the base (`None`: no branch).
    pub branch_landed: Option<bool>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BranchFacts {
    pub branch: String,
    pub task: Option<TaskState>,
    pub landed: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WtFacts {
    pub now: DateTime<Utc>,
    /// Why the worktrees could not be listed or the tasks read (then nothing is judged).
    pub unreadable: Option<String>,
    pub worktrees: Vec<WorktreeFacts>,
    /// Task branches without a worktree.
    pub branches: Vec<BranchFacts>,
    pub max_disk: Option<u64>,
}

pub(crate) async fn gather(env: &DoctorEnv<'_>) -> WtFacts {
    let mut f = WtFacts {
        now: Utc::now(),
        unreadable: None,
        worktrees: Vec::new(),
        branches: Vec::new(),
        max_disk: env.config.worktrees.max_disk_bytes(),
    };
    let store = match &env.store {
        Ok(s) => s,
        Err(_) => {
            f.unreadable = Some("the queue could not be opened".into());
            return f;
        }
    };
    // Every task of every plan (archived ones too: their worktrees are theirs), by ids and by
    // branch name.
    let mut by_ids: BTreeMap<(String, String), TaskState> = BTreeMap::new();
    let mut by_branch: BTreeMap<String, TaskState> = BTreeMap::new();
    let plans = match store.list_plans().await {
        Ok(p) => p,
        Err(e) => {
            f.unreadable = Some(format!("the queue did not answer ({e})"));
            return f;
        }
    };
    for p in &plans {
        match store.list_tasks(&p.plan.id).await {
            Ok(tasks) => {
                for t in tasks {
                    let st = TaskState {
                        status: t.status,
                        since: t.updated_at,
                    };
                    by_branch.insert(branch_name(&t.plan_id, &t.id), st);
                    by_ids.insert((t.plan_id, t.id), st);
                }
            }
            Err(e) => {
                f.unreadable = Some(format!("the queue did not answer ({e})"));
                return f;
            }
        }
    }
    let cfg = super::super::configure::workspace_config(env.config);
    let listed = Workspaces::new(env.repo_root, cfg).and_then(|ws| {
        let list = ws.list()?;
        let branches = ws.task_branches()?;
        Ok((ws, list, branches))
    });
    let (ws, list, branches) = match listed {
        Ok(x) => x,
        Err(e) => {
            f.unreadable = Some(e.to_string());
            return f;
        }
    };
    let mut with_worktree = BTreeSet::new();
    for info in list {
        let task = match (&info.plan_id, &info.task_id) {
            (Some(p), Some(t)) => by_ids.get(&(p.clone(), t.clone())).copied(),
            _ => None,
        };
        let branch_landed = match &info.branch {
            Some(b) => {
                with_worktree.insert(b.clone());
                ws.branch_landed(b).ok().flatten()
            }
            None => None,
        };
        f.worktrees.push(WorktreeFacts {
            info,
            task,
            branch_landed,
        });
    }
    for b in branches.into_iter().filter(|b| !with_worktree.contains(b)) {
        let landed = ws.branch_landed(&b).ok().flatten().unwrap_or(false);
        f.branches.push(BranchFacts {
            task: by_branch.get(&b).copied(),
            branch: b,
            landed,
        });
    }
    f
}

/// Why a task's worktree or branch is an orphan, or `None` while it may still be wanted
/// (the task runs, waits, or failed recently enough to be looked at).
pub(crate) fn orphan_reason(task: Option<TaskState>, now: DateTime<Utc>) -> Option<String> {
    let Some(t) = task else {
        return Some("its task is no longer in the queue".into());
    };
    match t.status {
        Status::Done => Some("its task is DONE".into()),
        Status::Skipped => Some("its task was SKIPPED".into()),
        Status::Failed => {
            let days = (now - t.since).num_days();
            (days >= FAILED_KEPT_DAYS).then(|| format!("its task FAILED {days} days ago"))
        }
        _ => None,
    }
}

pub(crate) fn judge(f: &WtFacts) -> Vec<Finding> {
    if let Some(why) = &f.unreadable {
        return vec![Finding::warn(
            "worktrees",
            format!("not checked: {why}"),
            "doctor cannot tell orphan worktrees from live ones",
            "fix that, then run doctor again",
        )];
    }
    let mut out = Vec::new();
    let mut orphan_bytes = 0;
    for w in &f.worktrees {
        let i = &w.info;
        let reason = if i.pooled && !i.prunable {
            // Idle in the pool: the next task's worktree.
            None
        } else if !i.registered {
            Some("git does not know it (left by a crash)".to_string())
        } else if i.prunable {
            Some("its directory is gone; only git's entry is left".to_string())
        } else {
            orphan_reason(w.task, f.now)
        };
        let (Some(reason), false) = (reason, i.locked) else {
            continue;
        };
        orphan_bytes += i.size_bytes;
        let delete_branch = w.branch_landed == Some(true);
        let branch_note = match (&i.branch, w.branch_landed) {
            (Some(b), Some(true)) => format!("; branch {b} has nothing that is not on the base"),
            (Some(b), Some(false)) => {
                format!("; branch {b} has commits that are not on the base branch and will be kept")
            }
            _ => String::new(),
        };
        out.push(
            Finding::problem(
                "worktrees",
                format!(
                    "orphan worktree {} ({}): {reason}{branch_note}",
                    i.path.display(),
                    human_size(i.size_bytes)
                ),
                "it takes disk and a branch nobody will use",
                "`whilly doctor --fix` removes it (and its branch when its commits are on the base); or `whilly worktrees prune`",
            )
            .fixable(Fix::RemoveWorktree {
                path: i.path.clone(),
                name: i.name.clone(),
                branch: i.branch.clone(),
                delete_branch,
            }),
        );
    }
    for b in &f.branches {
        let Some(reason) = orphan_reason(b.task, f.now) else {
            continue;
        };
        if b.landed {
            out.push(
                Finding::problem(
                    "worktrees",
                    format!(
                        "orphan branch {}: {reason}; its commits are on the base branch",
                        b.branch
                    ),
                    "a stale branch with the same name confuses a later run and reviewers",
                    format!(
                        "`git branch -d {}`; `whilly doctor --fix` does it",
                        b.branch
                    ),
                )
                .fixable(Fix::DeleteBranch {
                    branch: b.branch.clone(),
                }),
            );
        } else if b.task.is_none_or(|t| t.status != Status::Done) {
            // A DONE task's unlanded branch is how branch and PR delivery leave their work.
            out.push(Finding::warn(
                "worktrees",
                format!(
                    "branch {} is kept: {reason}, but it has commits that are not on the base branch",
                    b.branch
                ),
                "its work may be the only copy",
                format!(
                    "look at it (`git log ..{0}`), then merge it or delete it (`git branch -D {0}`)",
                    b.branch
                ),
            ));
        }
    }
    let total: u64 = f.worktrees.iter().map(|w| w.info.size_bytes).sum();
    match f.max_disk {
        Some(max) if total > max => out.push(Finding::problem(
            "worktrees",
            format!(
                "worktrees take {}, over [worktrees] max_disk = {} ({} of it orphans)",
                human_size(total),
                human_size(max),
                human_size(orphan_bytes)
            ),
            "worktrees fill the disk the builds and agents need",
            "remove the orphans (`whilly doctor --fix`), prune finished worktrees (`whilly worktrees prune`), or raise worktrees.max_disk",
        )),
        _ => {
            let budget = f
                .max_disk
                .map(|m| format!(" of max_disk {}", human_size(m)))
                .unwrap_or_default();
            let pooled = f.worktrees.iter().filter(|w| w.info.pooled).count();
            let pool = if pooled > 0 {
                format!(" ({pooled} idle in the pool)")
            } else {
                String::new()
            };
            out.push(Finding::ok(
                "worktrees",
                format!(
                    "{} worktree{}{pool}, {} on disk{budget}",
                    f.worktrees.len(),
                    if f.worktrees.len() == 1 { "" } else { "s" },
                    human_size(total)
                ),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::doctor::Severity;

    fn info(task: &str, bytes: u64) -> WorktreeInfo {
        WorktreeInfo {
            name: format!("whilly-{task}"),
            path: format!("/wt/p/{task}").into(),
            branch: Some(format!("whilly/p/{task}")),
            plan_id: Some("p".into()),
            task_id: Some(task.into()),
            size_bytes: bytes,
            prunable: false,
            registered: true,
            locked: false,
            pooled: false,
        }
    }

    fn state(status: Status, days_ago: i64, now: DateTime<Utc>) -> Option<TaskState> {
        Some(TaskState {
            status,
            since: now - chrono::Duration::days(days_ago),
        })
    }

    #[test]
    fn orphans_are_gone_done_or_long_failed_tasks() {
        let now = Utc::now();
        assert!(orphan_reason(None, now).unwrap().contains("no longer"));
        assert!(orphan_reason(state(Status::Done, 0, now), now).is_some());
        assert_eq!(orphan_reason(state(Status::Failed, 1, now), now), None);
        assert_eq!(
            orphan_reason(state(Status::Failed, 8, now), now).unwrap(),
            "its task FAILED 8 days ago"
        );
        assert_eq!(orphan_reason(state(Status::InProgress, 30, now), now), None);
        assert_eq!(orphan_reason(state(Status::HumanLoop, 30, now), now), None);
    }

    #[test]
    fn branches_with_own_commits_are_kept_and_the_budget_is_watched() {
        let now = Utc::now();
        let f = WtFacts {
            now,
            unreadable: None,
            worktrees: vec![
                WorktreeFacts {
                    info: info("GONE", 4096),
                    task: None,
                    branch_landed: Some(false),
                },
                WorktreeFacts {
                    info: info("RUNNING", 8192),
                    task: state(Status::InProgress, 0, now),
                    branch_landed: Some(true),
                },
            ],
            branches: vec![
                BranchFacts {
                    branch: "whilly/p/OLD".into(),
                    task: None,
                    landed: true,
                },
                BranchFacts {
                    branch: "whilly/p/WORK".into(),
                    task: None,
                    landed: false,
                },
                BranchFacts {
                    branch: "whilly/p/PR".into(),
                    task: state(Status::Done, 0, now),
                    landed: false,
                },
            ],
            max_disk: Some(10_000),
        };
        let v = judge(&f);
        assert_eq!(v.len(), 4, "{v:#?}");
        assert!(
            v[0].what
                .contains("/wt/p/GONE (4.0 KiB): its task is no longer in the queue")
        );
        assert!(v[0].what.contains("will be kept"));
        assert_eq!(
            v[0].fixable,
            Some(Fix::RemoveWorktree {
                path: "/wt/p/GONE".into(),
                name: "whilly-GONE".into(),
                branch: Some("whilly/p/GONE".into()),
                delete_branch: false,
            })
        );
        assert_eq!(
            v[1].fixable,
            Some(Fix::DeleteBranch {
                branch: "whilly/p/OLD".into()
            })
        );
        assert_eq!(v[2].severity, Severity::Warn);
        assert!(v[2].what.contains("whilly/p/WORK is kept"));
        assert_eq!(v[3].severity, Severity::Problem);
        assert!(
            v[3].what
                .contains("over [worktrees] max_disk = 9.8 KiB (4.0 KiB of it orphans)")
        );
        let under = judge(&WtFacts {
            max_disk: Some(1 << 20),
            worktrees: vec![],
            branches: vec![],
            ..f
        });
        assert_eq!(under[0].severity, Severity::Ok);
        assert_eq!(
            under[0].what,
            "0 worktrees, 0 B on disk of max_disk 1.0 MiB"
        );
    }
}
