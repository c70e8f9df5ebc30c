//! Operations in progress in any working tree of the repository (a rebase, merge, cherry-pick,
//! revert, `git am`, bisect) and the branch each one holds. Whilly never moves such a branch:
//! `git rebase --abort` would put it back and erase what landed meanwhile.

use git2::Repository;
use std::path::{Path, PathBuf};

/// A branch an operation in progress holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusyBranch {
    /// The branch's short name (`main`).
    pub branch: String,
    /// The working tree the operation runs in.
    pub worktree: PathBuf,
    /// `rebase`, `merge`, `cherry-pick`, `revert`, `am` or `bisect`.
    pub operation: &'static str,
}

/// What git keeps in a working tree's git directory while an operation runs, as read.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct OperationFiles {
    /// `rebase-merge/head-name` or `rebase-apply/head-name` (`refs/heads/main`).
    pub rebase_head_name: Option<String>,
    pub rebase_dir: bool,
    /// `rebase-apply/applying`: `git am`, not a rebase.
    pub applying: bool,
    pub merge_head: bool,
    pub cherry_pick_head: bool,
    pub revert_head: bool,
    /// `BISECT_START`: the branch (or commit) bisect started from.
    pub bisect_start: Option<String>,
    /// HEAD's symbolic target (`refs/heads/main`), when HEAD is on a branch.
    pub head_ref: Option<String>,
}

/// The operation running and the branch it holds, from what git left on disk. Pure.
pub(crate) fn judge(f: &OperationFiles) -> Option<(&'static str, String)> {
    let short = |r: &str| r.trim().trim_start_matches("refs/heads/").to_string();
    let head = f.head_ref.as_deref().map(short);
    if f.rebase_dir {
        let op = if f.applying { "am" } else { "rebase" };
        let branch = f.rebase_head_name.as_deref().map(short).or(head)?;
        return Some((op, branch));
    }
    if let Some(start) = &f.bisect_start {
        return Some(("bisect", short(start))).filter(|(_, b)| !b.is_empty());
    }
    let op = if f.merge_head {
        "merge"
    } else if f.cherry_pick_head {
        "cherry-pick"
    } else if f.revert_head {
        "revert"
    } else {
        return None;
    };
    Some((op, head?))
}

fn read_files(gitdir: &Path, repo: &Repository) -> OperationFiles {
    let text = |p: &str| std::fs::read_to_string(gitdir.join(p)).ok();
    let exists = |p: &str| gitdir.join(p).exists();
    OperationFiles {
        rebase_head_name: text("rebase-merge/head-name").or_else(|| text("rebase-apply/head-name")),
        rebase_dir: exists("rebase-merge") || exists("rebase-apply"),
        applying: exists("rebase-apply/applying"),
        merge_head: exists("MERGE_HEAD"),
        cherry_pick_head: exists("CHERRY_PICK_HEAD")
            || (exists("sequencer/todo") && !exists("REVERT_HEAD")),
        revert_head: exists("REVERT_HEAD"),
        bisect_start: text("BISECT_START"),
        head_ref: repo
            .find_reference("HEAD")
            .ok()
            .and_then(|h| h.symbolic_target().ok().flatten().map(str::to_string)),
    }
}

/// Every branch an operation in progress holds, in the main working tree and every linked one.
pub(crate) fn busy_branches(repo: &Repository) -> Vec<BusyBranch> {
    let mut trees: Vec<Repository> = Vec::new();
    if let Some(main) = repo.workdir().and_then(|w| Repository::open(w).ok()) {
        trees.push(main);
    }
    if let Ok(names) = repo.worktrees() {
        for name in names.iter().filter_map(|n| n.ok().flatten()) {
            if let Ok(wt) = repo.find_worktree(name)
                && wt.validate().is_ok()
                && let Ok(r) = Repository::open_from_worktree(&wt)
            {
                trees.push(r);
            }
        }
    }
    let mut out = Vec::new();
    for r in &trees {
        let files = read_files(r.path(), r);
        if let Some((operation, branch)) = judge(&files) {
            out.push(BusyBranch {
                branch,
                worktree: r.workdir().unwrap_or(r.path()).to_path_buf(),
                operation,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_operation_names_the_branch_it_holds() {
        let on_main = OperationFiles {
            head_ref: Some("refs/heads/main".into()),
            ..Default::default()
        };
        assert_eq!(judge(&on_main), None);
        // `git rebase -i` detaches HEAD; the branch is in head-name.
        let rebase = OperationFiles {
            rebase_dir: true,
            rebase_head_name: Some("refs/heads/main\n".into()),
            ..Default::default()
        };
        assert_eq!(judge(&rebase), Some(("rebase", "main".to_string())));
        let am = OperationFiles {
            rebase_dir: true,
            applying: true,
            ..on_main.clone()
        };
        assert_eq!(judge(&am), Some(("am", "main".to_string())));
        for (op, f) in [
            (
                "merge",
                OperationFiles {
                    merge_head: true,
                    ..on_main.clone()
                },
            ),
            (
                "cherry-pick",
                OperationFiles {
                    cherry_pick_head: true,
                    ..on_main.clone()
                },
            ),
            (
                "revert",
                OperationFiles {
                    revert_head: true,
                    ..on_main.clone()
                },
            ),
        ] {
            assert_eq!(judge(&f), Some((op, "main".to_string())));
        }
        let bisect = OperationFiles {
            bisect_start: Some("main\n".into()),
            ..Default::default()
        };
        assert_eq!(judge(&bisect), Some(("bisect", "main".to_string())));
    }
}
