//! The queue itself: the database answers and is migrated; no lease outlived its worker; no
//! worker that stopped answering is still counted.

use super::DoctorEnv;
use crate::config::Config;
use crate::domain::doctor::{Finding, Fix};
use crate::store::{Store, StoreInfo, StoreResult, WorkerRecord};
use chrono::{DateTime, Utc};
use std::time::Duration;

pub(crate) struct DbFacts {
    pub location: String,
    pub opened: Result<StoreInfo, String>,
}

pub(crate) fn database_facts(env: &DoctorEnv<'_>) -> DbFacts {
    DbFacts {
        location: env.database_location.clone(),
        opened: match &env.store {
            Ok(s) => Ok(s.info()),
            Err(e) => Err(e.clone()),
        },
    }
}

pub(crate) fn judge_database(f: &DbFacts) -> Finding {
    match &f.opened {
        Err(e) => Finding::problem(
            "database",
            format!("the queue at {} cannot be opened: {e}", f.location),
            "nothing can be imported, claimed or recorded; runs and workers stop at start (exit 4)",
            "start the database or fix [database] url / WHILLY_DATABASE_URL, then `whilly db status`",
        ),
        Ok(info) if !info.pending_migrations.is_empty() => Finding::problem(
            "database",
            format!(
                "the {} queue at {} has {} migrations not applied",
                info.backend,
                info.location,
                info.pending_migrations.len()
            ),
            "an older schema is missing tables and columns this version uses",
            "`whilly db migrate`",
        ),
        Ok(info) => Finding::ok(
            "database",
            format!(
                "{} queue at {} answers; {} migrations applied, none pending",
                info.backend,
                info.location,
                info.applied_migrations.len()
            ),
        ),
    }
}

/// A task still leased whose lease has run out: its worker is gone and no reaper ran since.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExpiredLease {
    pub plan_id: String,
    pub task_id: String,
    pub worker_id: Option<String>,
    pub expired_at: DateTime<Utc>,
}

pub(crate) struct LeaseFacts {
    pub now: DateTime<Utc>,
    pub expired: Vec<ExpiredLease>,
}

pub(crate) async fn lease_facts(store: &dyn Store) -> StoreResult<LeaseFacts> {
    let now = Utc::now();
    let mut expired = Vec::new();
    for p in store.list_plans().await? {
        let leased = p.counts.get(crate::domain::Status::Claimed)
            + p.counts.get(crate::domain::Status::InProgress);
        if leased == 0 {
            continue;
        }
        for t in store.list_tasks(&p.plan.id).await? {
            if t.status.is_leased()
                && let Some(at) = t.lease_expires_at
                && at < now
            {
                expired.push(ExpiredLease {
                    plan_id: t.plan_id.clone(),
                    task_id: t.id.clone(),
                    worker_id: t.worker_id.clone(),
                    expired_at: at,
                });
            }
        }
    }
    Ok(LeaseFacts { now, expired })
}

pub(crate) fn judge_leases(f: &LeaseFacts) -> Finding {
    if f.expired.is_empty() {
        return Finding::ok("leases", "no expired leases");
    }
    let list: Vec<String> = f
        .expired
        .iter()
        .map(|l| {
            let ago = (f.now - l.expired_at).num_seconds().max(0);
            format!(
                "{}/{} (worker {}, expired {ago} s ago)",
                l.plan_id,
                l.task_id,
                l.worker_id.as_deref().unwrap_or("?")
            )
        })
        .collect();
    Finding::problem(
        "leases",
        format!(
            "{} tasks are held by leases that expired: {}",
            f.expired.len(),
            list.join(", ")
        ),
        "their workers are gone; until a reaper runs, the tasks (and their key files) are claimed by nobody",
        "reclaim them (any running `whilly run`/`worker` does it within a reaper interval; `whilly doctor --fix` does it now, with task.lease_expired events)",
    )
    .fixable(Fix::ReclaimLeases)
}

pub(crate) struct WorkerFacts {
    pub now: DateTime<Utc>,
    pub offline_after: Duration,
    pub workers: Vec<WorkerRecord>,
}

pub(crate) async fn worker_facts(store: &dyn Store, cfg: &Config) -> StoreResult<WorkerFacts> {
    Ok(WorkerFacts {
        now: Utc::now(),
        offline_after: Duration::from_secs(cfg.queue.worker_offline_secs),
        workers: store.list_workers().await?,
    })
}

pub(crate) fn judge_workers(f: &WorkerFacts) -> Finding {
    let dead: Vec<&WorkerRecord> = f
        .workers
        .iter()
        .filter(|w| !w.offline && !w.online(f.now, f.offline_after))
        .collect();
    let marked = f.workers.iter().filter(|w| w.offline).count();
    let online = f.workers.len() - dead.len() - marked;
    if dead.is_empty() {
        let mut what = format!("{online} workers online");
        if marked > 0 {
            what.push_str(&format!(", {marked} marked offline (not counted)"));
        }
        return Finding::ok("workers", what);
    }
    let list: Vec<String> = dead
        .iter()
        .map(|w| {
            let silent = (f.now - w.heartbeat_at).num_seconds().max(0);
            format!("{} on {} (silent {silent} s)", w.id, w.host)
        })
        .collect();
    Finding::problem(
        "workers",
        format!(
            "{} workers stopped answering but are still listed as working: {}",
            dead.len(),
            list.join(", ")
        ),
        "the console, /health and the metrics count them; they were killed or cut off",
        format!(
            "mark them offline (a reaper does it after [queue] worker_offline_secs = {} s; `whilly doctor --fix` does it now, with worker.offline events); a worker that comes back is online again",
            f.offline_after.as_secs()
        ),
    )
    .fixable(Fix::MarkWorkersOffline {
        workers: dead.iter().map(|w| w.id.clone()).collect(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::domain::doctor::Severity;

    fn worker(id: &str, silent_secs: i64, offline: bool, now: DateTime<Utc>) -> WorkerRecord {
        WorkerRecord {
            id: id.into(),
            host: "box".into(),
            slots: 1,
            tags: vec![],
            started_at: now,
            heartbeat_at: now - chrono::Duration::seconds(silent_secs),
            offline,
        }
    }

    #[test]
    fn silent_workers_are_a_fixable_problem_marked_ones_are_not() {
        let now = Utc::now();
        let f = WorkerFacts {
            now,
            offline_after: Duration::from_secs(120),
            workers: vec![
                worker("live", 5, false, now),
                worker("gone", 600, false, now),
                worker("marked", 900, true, now),
            ],
        };
        let v = judge_workers(&f);
        assert_eq!(v.severity, Severity::Problem);
        assert!(v.what.contains("gone on box (silent 600 s)"), "{}", v.what);
        assert!(!v.what.contains("live") && !v.what.contains("marked"));
        assert_eq!(
            v.fixable,
            Some(Fix::MarkWorkersOffline {
                workers: vec!["gone".into()]
            })
        );
        let ok = judge_workers(&WorkerFacts {
            workers: vec![
                worker("live", 5, false, now),
                worker("marked", 900, true, now),
            ],
            ..f
        });
        assert_eq!(ok.severity, Severity::Ok);
        assert_eq!(ok.what, "1 workers online, 1 marked offline (not counted)");
    }

    #[test]
    fn expired_leases_name_task_and_worker() {
        let now = Utc::now();
        let f = LeaseFacts {
            now,
            expired: vec![ExpiredLease {
                plan_id: "p".into(),
                task_id: "T-1".into(),
                worker_id: Some("w1".into()),
                expired_at: now - chrono::Duration::seconds(30),
            }],
        };
        let v = judge_leases(&f);
        assert_eq!(v.severity, Severity::Problem);
        assert!(
            v.what.contains("p/T-1 (worker w1, expired 30 s ago)"),
            "{}",
            v.what
        );
        assert_eq!(v.fixable, Some(Fix::ReclaimLeases));
        let none = LeaseFacts {
            now,
            expired: vec![],
        };
        assert_eq!(judge_leases(&none).severity, Severity::Ok);
    }

    #[test]
    fn an_unopened_or_unmigrated_queue_is_a_problem() {
        let info = StoreInfo {
            backend: "sqlite",
            location: "/r/.whilly/whilly.db".into(),
            applied_migrations: vec![1, 2],
            pending_migrations: vec![],
        };
        let ok = judge_database(&DbFacts {
            location: "x".into(),
            opened: Ok(info.clone()),
        });
        assert_eq!(ok.severity, Severity::Ok);
        let pending = judge_database(&DbFacts {
            location: "x".into(),
            opened: Ok(StoreInfo {
                pending_migrations: vec![3],
                ..info
            }),
        });
        assert_eq!(pending.severity, Severity::Problem);
        assert_eq!(pending.fix, "`whilly db migrate`");
        let down = judge_database(&DbFacts {
            location: "postgres://h/db".into(),
            opened: Err("connection refused".into()),
        });
        assert_eq!(down.severity, Severity::Problem);
        assert!(
            down.what
                .contains("postgres://h/db cannot be opened: connection refused")
        );
    }
}
