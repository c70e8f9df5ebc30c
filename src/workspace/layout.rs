//! Where a task's worktree lives and what its branch and admin entry are called: pure naming.
//!
//! Only [`safe_id`] output ever becomes a path component or ref component, so no plan or task id
//! can point outside the base directory or form an odd ref name.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::domain::safe_id;

/// Prefix of every admin entry (`.git/worktrees/<name>`) whilly creates; `list` relies on it.
pub(super) const ADMIN_PREFIX: &str = "whilly-";

/// The directory of pooled worktrees under the repository's worktrees directory (a `safe_id`
/// never holds a dot, so no plan's directory can be called so).
pub(super) const POOL_DIR: &str = ".pool";
/// Admin entries of idle pooled worktrees: `whilly-pool-<n>`.
pub(super) const POOL_ADMIN_PREFIX: &str = "whilly-pool-";

fn short_hash(bytes: &[u8]) -> String {
    hex::encode(&Sha256::digest(bytes)[..4])
}

/// `<repo-name>-<8 hex of the canonical path>`: readable, and two clones named alike differ.
pub(super) fn repo_key(canonical_repo: &Path) -> String {
    let name = canonical_repo
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "repo".to_string());
    format!(
        "{}-{}",
        safe_id(&name),
        short_hash(canonical_repo.as_os_str().as_encoded_bytes())
    )
}

/// `<base>/<repo key>/<plan safe-id>/<task safe-id>`.
pub(super) fn worktree_path(base: &Path, repo_key: &str, plan_id: &str, task_id: &str) -> PathBuf {
    base.join(repo_key)
        .join(safe_id(plan_id))
        .join(safe_id(task_id))
}

/// `whilly/<plan safe-id>/<task safe-id>`. The plan is part of the name because every plan
/// numbers its tasks from TASK-001: a bare `whilly/TASK-001` of an earlier plan would otherwise be
/// picked up (with its commits) by the next plan's TASK-001.
pub fn branch_name(plan_id: &str, task_id: &str) -> String {
    format!("whilly/{}/{}", safe_id(plan_id), safe_id(task_id))
}

/// Name of the admin entry under `.git/worktrees/`: unique per (plan, task), readable by task.
pub(super) fn admin_name(plan_id: &str, task_id: &str) -> String {
    let mut key = Vec::with_capacity(plan_id.len() + task_id.len() + 1);
    key.extend_from_slice(plan_id.as_bytes());
    key.push(0);
    key.extend_from_slice(task_id.as_bytes());
    format!("{ADMIN_PREFIX}{}-{}", safe_id(task_id), short_hash(&key))
}

/// `whilly: TASK-001 — <first line of description>\n\nPlan: <plan>\nAttempt: N`.
pub fn commit_message(task_id: &str, description: &str, plan_id: &str, attempt: u32) -> String {
    let first = description
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let mut subject = format!("whilly: {task_id}");
    if !first.is_empty() {
        subject.push_str(" — ");
        subject.push_str(first);
    }
    const MAX: usize = 100;
    if subject.chars().count() > MAX {
        subject = subject.chars().take(MAX - 1).collect();
        subject.push('…');
    }
    format!("{subject}\n\nPlan: {plan_id}\nAttempt: {attempt}\n")
}

/// Whether `path` lies inside `dir` (both already absolute and normalised).
pub(super) fn is_within(path: &Path, dir: &Path) -> bool {
    path.starts_with(dir) && path != dir
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn hostile_ids_stay_under_the_base() {
        let base = Path::new("/data/whilly/worktrees");
        for (plan, task) in [
            ("../../etc", "../../etc"),
            ("a/b", "a/b"),
            ("..", "."),
            ("/abs", "/abs"),
            ("", ""),
        ] {
            let p = worktree_path(base, "repo-1234", plan, task);
            assert!(is_within(&p, base), "{}", p.display());
            assert_eq!(p.components().count(), base.components().count() + 3);
            assert!(
                p.components().all(|c| !matches!(
                    c,
                    std::path::Component::ParentDir | std::path::Component::CurDir
                )),
                "{}",
                p.display()
            );
            let b = branch_name(plan, task);
            assert!(
                git2::Reference::is_valid_name(&format!("refs/heads/{b}")),
                "{b}"
            );
            assert_eq!(b.matches('/').count(), 2, "{b}");
            assert!(git2::Reference::is_valid_name(&format!(
                "refs/heads/{}",
                admin_name(plan, task)
            )));
        }
    }

    #[test]
    fn names_are_distinct_per_plan_and_task() {
        assert_ne!(admin_name("p1", "TASK-001"), admin_name("p2", "TASK-001"));
        assert_ne!(admin_name("a", "b-c"), admin_name("a-b", "c"));
        assert_ne!(branch_name("p1", "TASK-001"), branch_name("p2", "TASK-001"));
        assert_eq!(branch_name("plan", "TASK-001"), "whilly/plan/TASK-001");
        assert!(admin_name("p", "TASK-001").starts_with("whilly-TASK-001-"));
    }

    #[test]
    fn repo_key_names_the_repo_and_hashes_the_path() {
        let a = repo_key(Path::new("/home/u/src/app"));
        let b = repo_key(Path::new("/home/u/other/app"));
        assert!(a.starts_with("app-"), "{a}");
        assert_ne!(a, b);
        assert_eq!(a.len(), "app-".len() + 8);
    }

    #[test]
    fn commit_message_names_task_plan_and_attempt() {
        let m = commit_message("TASK-001", "\n  Add login\nmore detail", "plan-a", 2);
        assert_eq!(
            m,
            "whilly: TASK-001 — Add login\n\nPlan: plan-a\nAttempt: 2\n"
        );
        let m = commit_message("T", "", "p", 1);
        assert!(m.starts_with("whilly: T\n\n"), "{m}");
        let long = commit_message("T", &"x".repeat(500), "p", 1);
        assert!(
            long.lines()
                .next()
                .is_some_and(|l| l.chars().count() == 100)
        );
    }
}
