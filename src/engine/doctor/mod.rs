//! `whilly doctor`: small checks, each gathering its facts (IO) and handing them to a pure judge
//! that says what it found ([`Finding`]); `--fix` applies the fixes that cannot lose work.
//!
//! One file per group: `files.rs` (`.whilly/` permissions), `queue.rs` (the database, stale
//! leases, dead workers), `agents.rs` (agent binaries and versions), `tokens.rs` (GitHub and
//! Jira tokens, the keyring), `plans.rs` (ghost plans), `checks.rs` (checks whose program is missing), `worktrees.rs` (orphan worktrees and
//! branches, the disk budget), `usage.rs` (what `.whilly/` holds on disk).

pub(crate) mod agents;
pub(crate) mod checks;
pub(crate) mod files;
pub(crate) mod plans;
pub(crate) mod queue;
pub(crate) mod tokens;
pub(crate) mod usage;
pub(crate) mod worktrees;

use crate::config::Config;
use crate::domain::doctor::{Finding, Fix};
use crate::store::{Store, StoreError};
use crate::workspace::{WorkspaceError, Workspaces};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// What the checks look at.
pub(crate) struct DoctorEnv<'a> {
    pub repo_root: &'a Path,
    pub state_dir: &'a Path,
    pub config: &'a Config,
    /// The queue, or why it could not be opened.
    pub store: Result<Arc<dyn Store>, String>,
    /// Where the queue is (password removed), for messages.
    pub database_location: String,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum DoctorError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{0} needs the queue, which could not be opened")]
    NoStore(&'static str),
}

/// Every check, in the order they are shown. `perms` is gathered by the caller before the queue
/// is opened: opening a SQLite queue narrows `.whilly/` itself, which would hide the finding.
pub(crate) async fn examine(env: &DoctorEnv<'_>, perms: &files::PermFacts) -> Vec<Finding> {
    let mut out = vec![queue::judge_database(&queue::database_facts(env))];
    out.extend(files::judge(perms));
    out.push(usage::judge(&usage::gather(env.state_dir)));
    out.extend(agents::judge(&agents::gather(env).await));
    out.push(tokens::judge_github(&tokens::github(env.config).await));
    out.push(tokens::judge_jira(&tokens::jira(env.config).await));
    out.push(tokens::judge_keyring(&tokens::keyring_facts(env.config)));
    let store = env.store.as_ref().ok();
    out.extend(plans::judge(
        &plans::gather(env.state_dir, env.repo_root, store).await,
    ));
    out.extend(checks::judge(&checks::gather(env, store).await));
    out.push(sandbox_finding(
        env.config.sandbox.mode,
        crate::sandbox::Support::probe(),
    ));
    out.extend(worktrees::judge(&worktrees::gather(env).await));
    if let Some(store) = store {
        match queue::lease_facts(store.as_ref()).await {
            Ok(f) => out.push(queue::judge_leases(&f)),
            Err(e) => out.push(unread("leases", &e)),
        }
        match queue::worker_facts(store.as_ref(), env.config).await {
            Ok(f) => out.push(queue::judge_workers(&f)),
            Err(e) => out.push(unread("workers", &e)),
        }
    }
    out
}

/// Whether agents run in the sandbox `[sandbox] mode` asks for.
fn sandbox_finding(mode: crate::config::SandboxMode, support: crate::sandbox::Support) -> Finding {
    use crate::config::SandboxMode;
    use crate::sandbox::Support;
    match (mode, support) {
        (SandboxMode::Enforce, Support::Landlock(_)) => Finding::ok("sandbox", support.describe()),
        (SandboxMode::Enforce, Support::Missing) => Finding::warn(
            "sandbox",
            support.describe(),
            "an agent can write anywhere this user can, the operator's checkout included",
            "run on Linux 5.13 or later with Landlock enabled (lsm=...,landlock on the kernel command line)",
        ),
        (SandboxMode::Off, _) => Finding::warn(
            "sandbox",
            "[sandbox] mode = \"off\": agents write wherever this user can",
            "only the before/after comparison of your checkout notices writes outside a worktree",
            "set [sandbox] mode = \"enforce\" (the default)",
        ),
    }
}

/// A check that could not read what it needs from the queue.
fn unread(check: &'static str, e: &StoreError) -> Finding {
    Finding::warn(
        check,
        format!("not checked: the queue did not answer ({e})"),
        "doctor cannot tell whether something is wrong here",
        "run doctor again once the database answers",
    )
}

/// Applies one fix; returns what it did, in words.
pub(crate) async fn apply(env: &DoctorEnv<'_>, fix: &Fix) -> Result<String, DoctorError> {
    match fix {
        Fix::NarrowPermissions { dirs, files } => files::narrow(dirs, files),
        Fix::RemoveWorktree {
            path,
            name,
            branch,
            delete_branch,
        } => {
            let ws = workspaces(env)?;
            ws.remove_listed(name, path, branch.as_deref(), *delete_branch)?;
            Ok(match (branch, delete_branch) {
                (Some(b), true) => format!("removed worktree {} and branch {b}", path.display()),
                (Some(b), false) => format!(
                    "removed worktree {}; kept branch {b}: it has commits that are not on the base branch",
                    path.display()
                ),
                (None, _) => format!("removed worktree {}", path.display()),
            })
        }
        Fix::DeleteBranch { branch } => {
            workspaces(env)?.delete_branch(branch)?;
            Ok(format!(
                "deleted branch {branch} (its commits are on the base branch)"
            ))
        }
        Fix::ReclaimLeases => {
            let store = env
                .store
                .as_ref()
                .map_err(|_| DoctorError::NoStore("reclaiming leases"))?;
            let r = store.reap().await?;
            let mut parts = Vec::new();
            for (what, ids) in [
                ("back to PENDING", &r.requeued),
                ("FAILED (no attempts left)", &r.failed),
                ("past their deadline, back to PENDING", &r.timed_out),
            ] {
                if !ids.is_empty() {
                    parts.push(format!("{what}: {}", ids.join(", ")));
                }
            }
            Ok(if parts.is_empty() {
                "reclaimed no leases (they were renewed or reclaimed meanwhile)".to_string()
            } else {
                format!("reclaimed expired leases: {}", parts.join("; "))
            })
        }
        Fix::MarkWorkersOffline { .. } => {
            let store = env
                .store
                .as_ref()
                .map_err(|_| DoctorError::NoStore("marking workers"))?;
            let after = Duration::from_secs(env.config.queue.worker_offline_secs);
            let ids = store.mark_offline_workers(after).await?;
            Ok(if ids.is_empty() {
                "marked no workers offline (they were heard from meanwhile)".to_string()
            } else {
                format!("marked offline: {}", ids.join(", "))
            })
        }
        Fix::ArchivePlan { plan_id } => {
            let store = env
                .store
                .as_ref()
                .map_err(|_| DoctorError::NoStore("archiving plans"))?;
            store.set_plan_archived(plan_id, true).await?;
            Ok(format!(
                "archived plan {plan_id} (`whilly plan unarchive {plan_id}` lists it again)"
            ))
        }
    }
}

fn workspaces(env: &DoctorEnv<'_>) -> Result<Workspaces, DoctorError> {
    Ok(Workspaces::new(
        env.repo_root,
        super::configure::workspace_config(env.config),
    )?)
}
