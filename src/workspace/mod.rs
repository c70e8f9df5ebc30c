//! One git worktree per task attempt, made with git2: prepare, commit, deliver (merge back),
//! remove, list, prune.
//!
//! Decisions a caller should know:
//! - Worktrees live outside the repository by default
//!   (`<data dir>/whilly/worktrees/<repo>-<hash>/<plan>/<task>`), because a worktree nested in
//!   the repository confuses tools that search parent directories. Only `safe_id`s become path
//!   components.
//! - Branches are `whilly/<plan safe-id>/<task safe-id>`: every plan has a TASK-001, so the plan
//!   is part of the name.
//! - Re-attempts (and `--resume` after a crash) REUSE the task's worktree and branch: uncommitted
//!   changes and untracked files are discarded (reset to the branch head), ignored files such as
//!   build caches are kept, so a retry does not rebuild from scratch. Commits already on the
//!   branch are kept when the branch still descends from the requested base commit (they come
//!   from an earlier DONE attempt); otherwise the old branch is saved as
//!   `<branch>-stale-<8 hex>` and the branch restarts from the base commit. A leftover directory
//!   or admin entry that git no longer considers a valid worktree is cleaned up and recreated;
//!   preparing never fails with "already exists".
//! - Include files are copied before the setup command runs, so setup can use them; they are
//!   never committed (unless tracked in the base commit).
//! - Delivering into a base branch that is checked out (in the main working tree or any other
//!   worktree) updates that working tree and index too, but only for the files the task touched,
//!   and only if those files are clean there; otherwise nothing changes and the result is
//!   [`Delivery::BaseDirty`] naming them. Other uncommitted work in that tree is left alone.
//! - Merges are serialised by a process mutex plus `flock` on `.git/whilly-merge.lock`.
//! - The API is sync and every operation opens its own `git2::Repository` (it is not `Sync`);
//!   call it from `spawn_blocking`.

mod branches;
pub(crate) mod busy;
mod cleanup;
mod commit;
mod config;
mod credentials;
mod deliver;
mod diff;
mod error;
mod glob;
mod include;
mod landed;
mod layout;
mod lock;
mod meta;
mod occupant;
mod pool;
mod prepare;
mod push;
mod remote_ref;
mod replay;
mod setup;
mod shared_base;
mod stack;
mod trailer;

use std::path::{Path, PathBuf};

use git2::{ErrorCode, Repository};

pub use cleanup::{PruneReport, PruneSelection, WorktreeInfo};
pub use commit::Snapshot;
pub use config::{DEFAULT_CACHE_DIRS, MergeMode, WorkspaceConfig};
pub use diff::{DiffSource, WorktreeDiff, diff_task, diff_worktree};
pub use error::WorkspaceError;
pub use landed::{AlwaysOurs, DeliveryFence, Landed};
pub use layout::{branch_name, commit_message};
pub use push::{PushAuth, Pushed, is_task_commit, repo_of_url};
pub use shared_base::SharedBase;
pub use stack::{DeliveredDep, StackStart};
pub use trailer::{TaskMark, queue_tag};

/// A prepared worktree for one task attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worktree {
    pub path: PathBuf,
    /// Short branch name, e.g. `whilly/my-plan/TASK-001`.
    pub branch: String,
    /// The commit the task started from (the fork point for delivery).
    pub base_commit: String,
    /// The branch to deliver into: the repository's current branch when prepared.
    pub base_branch: Option<String>,
    pub plan_id: String,
    pub task_id: String,
    /// The admin entry's name under `.git/worktrees/`.
    pub name: String,
    /// True when an existing worktree of this task was reused (a retry or a resume).
    pub reused: bool,
    /// True when the worktree came from the pool: another task's, reset for this one.
    pub pooled: bool,
    /// What the setup command printed, if one ran.
    pub setup_output: Option<String>,
    /// Include files copied in, relative to the worktree root.
    pub included: Vec<String>,
}

/// How delivering a task's branch went. Conflicts and a dirty base are outcomes, not errors:
/// in both the base branch is untouched and the task branch is left for review.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// The base branch now points at the task branch's tip.
    FastForwarded { base_branch: String, commit: String },
    /// The task's commits were replayed onto the base branch; `commit` is its new tip.
    Merged {
        base_branch: String,
        commit: String,
        commits: usize,
    },
    /// Merge mode `none`: the branch waits for a PR or a human.
    LeftForReview { branch: String },
    /// Replaying the task's commits conflicts with the base branch in these files.
    Conflict { branch: String, files: Vec<String> },
    /// The base branch is checked out in `worktree` with uncommitted changes to files the task
    /// touches: commit or stash them there, then deliver again.
    BaseDirty {
        branch: String,
        base_branch: String,
        worktree: PathBuf,
        files: Vec<String>,
    },
    /// The base branch is held by an operation in progress (`operation`: a rebase, merge,
    /// cherry-pick, revert, am or bisect) in `worktree`: it is never moved under one.
    BaseBusy {
        branch: String,
        base_branch: String,
        worktree: PathBuf,
        operation: String,
    },
    /// The branch has no commits the base lacks.
    NothingToDo,
    /// An earlier attempt (lease `epoch`) landed this task's work as `commit` and the queue
    /// never recorded it: the task is finished by that landing, nothing lands again.
    AlreadyLanded {
        base_branch: String,
        commit: String,
        epoch: i64,
    },
    /// The lease was no longer ours when the base was about to move: nothing was delivered.
    LeaseLost,
    /// The base is shared through `remote` (`[delivery] push`) and the landing could not reach
    /// it (unreachable, refused, no such branch there): the work waits on `branch`.
    NotPushed {
        branch: String,
        base_branch: String,
        remote: String,
        detail: String,
    },
}

/// Opens the repository at `path`. Only a path that holds none is "not a repository": a
/// refusal to open it (no file descriptors left, permissions) says so instead.
fn open_repo(path: &Path) -> Result<Repository, WorkspaceError> {
    Repository::open(path).map_err(|e| {
        if e.code() == git2::ErrorCode::NotFound {
            WorkspaceError::NotARepository {
                path: path.to_path_buf(),
            }
        } else {
            WorkspaceError::git(format!("open the repository {}", path.display()))(e)
        }
    })
}

/// The worktrees of one repository.
#[derive(Debug, Clone)]
pub struct Workspaces {
    /// Working directory of the main repository (canonical).
    root: PathBuf,
    /// The working tree whilly was pointed at (the main one, or a linked worktree of the
    /// user's): its HEAD is the base commit and its branch the base branch.
    head_root: PathBuf,
    /// The shared `.git` directory (canonical).
    common_dir: PathBuf,
    /// `<base dir>/<repo key>`: this repository's worktrees.
    repo_dir: PathBuf,
    base_dir: PathBuf,
    cfg: WorkspaceConfig,
    patterns: Vec<glob::Pattern>,
}

impl Workspaces {
    /// Opens the repository containing `repo_root` (a linked worktree resolves to its main
    /// repository). Refuses bare repositories and bad include patterns.
    pub fn new(repo_root: impl AsRef<Path>, cfg: WorkspaceConfig) -> Result<Self, WorkspaceError> {
        let given = repo_root.as_ref();
        let mut repo = Repository::discover(given).map_err(|e| {
            if e.code() == git2::ErrorCode::NotFound {
                WorkspaceError::NotARepository {
                    path: given.to_path_buf(),
                }
            } else {
                WorkspaceError::git(format!("open the repository at {}", given.display()))(e)
            }
        })?;
        if repo.is_bare() {
            return Err(WorkspaceError::BareRepository {
                path: given.to_path_buf(),
            });
        }
        let head_root = match repo.workdir() {
            Some(w) => w
                .canonicalize()
                .map_err(WorkspaceError::io("could not resolve", w))?,
            None => given.to_path_buf(),
        };
        if repo.is_worktree() {
            let common = repo.commondir().to_path_buf();
            repo = Repository::open(&common).map_err(WorkspaceError::git(format!(
                "open the main repository at {}",
                common.display()
            )))?;
        }
        let workdir = repo
            .workdir()
            .ok_or_else(|| WorkspaceError::BareRepository {
                path: given.to_path_buf(),
            })?;
        let root = workdir
            .canonicalize()
            .map_err(WorkspaceError::io("could not resolve", workdir))?;
        let common_dir = repo
            .commondir()
            .canonicalize()
            .map_err(WorkspaceError::io("could not resolve", repo.commondir()))?;
        let base_dir = match &cfg.base_dir {
            Some(p) if p.is_absolute() => p.clone(),
            Some(p) => root.join(p),
            None => directories::BaseDirs::new()
                .ok_or(WorkspaceError::NoDataDir)?
                .data_dir()
                .join("whilly")
                .join("worktrees"),
        };
        // Compare paths as libgit2 reports them: resolve symlinks in the part that exists.
        let base_dir = canonical_prefix(&base_dir);
        let repo_dir = base_dir.join(layout::repo_key(&root));
        let patterns = include::parse_patterns(&cfg.include)?;
        Ok(Workspaces {
            root,
            head_root,
            common_dir,
            repo_dir,
            base_dir,
            cfg,
            patterns,
        })
    }

    pub fn repo_root(&self) -> &Path {
        &self.root
    }

    /// The repository's shared git directory (`.git` of the main checkout): git in a linked
    /// worktree writes its objects and refs there.
    pub fn common_dir(&self) -> &Path {
        &self.common_dir
    }

    /// Where this repository's worktrees go: `<base dir>/<repo>-<hash>`.
    pub fn worktrees_dir(&self) -> &Path {
        &self.repo_dir
    }

    pub fn config(&self) -> &WorkspaceConfig {
        &self.cfg
    }

    fn open(&self) -> Result<Repository, WorkspaceError> {
        open_repo(&self.root)
    }

    fn open_head_root(&self) -> Result<Repository, WorkspaceError> {
        open_repo(&self.head_root)
    }

    /// The commit HEAD points at (the tip of the current branch), as hex.
    pub fn base_commit(&self) -> Result<String, WorkspaceError> {
        let repo = self.open_head_root()?;
        head_commit(&repo, &self.head_root).map(|oid| oid.to_string())
    }

    /// The current branch's short name; `None` when HEAD is detached.
    pub fn current_branch(&self) -> Result<Option<String>, WorkspaceError> {
        let repo = self.open_head_root()?;
        Ok(current_branch(&repo))
    }

    /// The existing worktree of a task, as recorded when it was prepared (for `--resume`, the
    /// TUI, or removing it later); `None` when there is none.
    pub fn find(&self, plan_id: &str, task_id: &str) -> Result<Option<Worktree>, WorkspaceError> {
        let name = layout::admin_name(plan_id, task_id);
        let admin = meta::admin_dir(&self.common_dir, &name);
        let Some(m) = meta::read(&admin) else {
            return Ok(None);
        };
        Ok(Some(Worktree {
            included: meta::read_included(&admin),
            path: m.path,
            branch: m.branch,
            base_commit: m.base_commit,
            base_branch: m.base_branch,
            plan_id: m.plan_id,
            task_id: m.task_id,
            name,
            reused: true,
            pooled: false,
            setup_output: None,
        }))
    }

    /// Creates (or reuses, see the module docs) the worktree of `task_id`, copies the include
    /// files and runs the setup command.
    pub fn prepare(
        &self,
        plan_id: &str,
        task_id: &str,
        base_commit: &str,
    ) -> Result<Worktree, WorkspaceError> {
        prepare::prepare(self, plan_id, task_id, base_commit)
    }

    /// Commits everything the agent changed (new files included, .gitignore respected) on the
    /// task branch. `Ok(None)`: there was nothing to commit.
    pub fn commit(&self, wt: &Worktree, message: &str) -> Result<Option<String>, WorkspaceError> {
        commit::commit(self, wt, message, false, None)
    }

    /// Like [`Self::commit`], but makes an empty commit when nothing changed.
    pub fn commit_allow_empty(
        &self,
        wt: &Worktree,
        message: &str,
    ) -> Result<Option<String>, WorkspaceError> {
        commit::commit(self, wt, message, true, None)
    }

    /// What the agent left in `wt`, as a tree, taken before the checks run (see
    /// [`commit::Snapshot`]); the worktree and its index are not changed.
    pub fn snapshot(&self, wt: &Worktree) -> Result<Snapshot, WorkspaceError> {
        commit::snapshot(self, wt)
    }

    /// The operator's checkout as `git status` sees it: every tracked file that differs from
    /// HEAD or the index, and every untracked file that is not ignored, with its status bits.
    /// Compared before and after an attempt, it shows what changed there while a task ran.
    pub fn checkout_state(
        &self,
    ) -> Result<std::collections::BTreeMap<String, (u32, u64)>, WorkspaceError> {
        let repo = self.open_head_root()?;
        let mut opts = git2::StatusOptions::new();
        opts.include_untracked(true)
            .include_ignored(false)
            .recurse_untracked_dirs(true)
            .exclude_submodules(true);
        let statuses = repo
            .statuses(Some(&mut opts))
            .map_err(WorkspaceError::git("read the checkout's status"))?;
        let mut out = std::collections::BTreeMap::new();
        for s in statuses.iter() {
            if let Ok(path) = s.path() {
                // The content matters, not only the status: an edit to a file that was
                // already modified is a change too.
                let modified = std::fs::metadata(self.head_root.join(path))
                    .ok()
                    .and_then(|m| m.modified().ok())
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos() as u64);
                out.insert(path.to_string(), (s.status().bits(), modified));
            }
        }
        Ok(out)
    }

    /// The branches operations in progress hold, in any working tree (see [`busy`]).
    pub fn busy_branches(&self) -> Vec<busy::BusyBranch> {
        self.open()
            .map(|r| busy::busy_branches(&r))
            .unwrap_or_default()
    }

    /// The changed files of `snapshot` that may not land: secrets (by file, line and kind) and
    /// files over the size limit (see [`crate::domain::landing_lint`]).
    pub fn unsafe_files(
        &self,
        wt: &Worktree,
        snapshot: &Snapshot,
        limits: crate::domain::landing_lint::LandingLimits,
    ) -> Result<Vec<crate::domain::landing_lint::UnsafeFile>, WorkspaceError> {
        commit::unsafe_files(wt, snapshot, limits)
    }

    /// Brings the task branch's commits into its base branch per `mode`, outside any queue.
    pub fn deliver(&self, wt: &Worktree, mode: MergeMode) -> Result<Delivery, WorkspaceError> {
        deliver::deliver(self, wt, mode)
    }

    /// Commits the attempt's work on the task branch and brings it into the base branch per
    /// `mode`: at most once per task, and only while `fence` says the attempt still holds its
    /// lease (see [`landed`]). What is committed is `snapshot` when given (the agent's work
    /// before the checks ran), else the worktree. Returns the commit made (if anything
    /// changed) and the delivery.
    pub fn commit_and_deliver(
        &self,
        wt: &Worktree,
        message: &str,
        snapshot: Option<&Snapshot>,
        mode: MergeMode,
        fence: &dyn DeliveryFence,
    ) -> Result<(Option<String>, Delivery), WorkspaceError> {
        deliver::commit_and_deliver(self, wt, message, snapshot, mode, fence)
    }

    /// Pushes the task branch `branch` to `remote`, never over another's commits (see
    /// [`push`]). Takes the merge lock: two workers of one clone do not push at once.
    pub fn push_branch(
        &self,
        remote: &str,
        branch: &str,
        plan_id: &str,
        task_id: &str,
        fence: &dyn DeliveryFence,
        auth: &PushAuth,
    ) -> Result<Pushed, WorkspaceError> {
        let _lock = lock::merge(&self.common_dir, self.cfg.merge_lock_timeout)?;
        let mark = TaskMark::of_attempt(plan_id, task_id, fence.epoch(), &fence.queue_mark());
        push::push(self, remote, branch, &mark, fence, auth)
    }

    /// The configured URL of `remote`.
    pub fn remote_url(&self, remote: &str) -> Result<String, WorkspaceError> {
        push::remote_url(self, remote)
    }

    /// Lands a task's committed branch that could not land when its attempt ended (see
    /// [`deliver::land`]), fenced like an attempt's delivery.
    pub fn land(
        &self,
        plan_id: &str,
        task_id: &str,
        mode: MergeMode,
        fence: &dyn DeliveryFence,
    ) -> Result<Delivery, WorkspaceError> {
        deliver::land(self, plan_id, task_id, mode, fence)
    }

    /// An earlier landing of this task that the queue never recorded (its attempt lost the
    /// lease, or the store, after merging): the task is finished by it. Checked before an
    /// attempt spends anything.
    pub fn unrecorded_landing(
        &self,
        plan_id: &str,
        task_id: &str,
        fence: &dyn DeliveryFence,
    ) -> Result<Option<Landed>, WorkspaceError> {
        if let Some(target) = &self.cfg.shared_base
            && let Some(branch) = self.current_branch()?
            && let Some(l) =
                shared_base::unrecorded(self, target, &branch, plan_id, task_id, fence)?
        {
            return Ok(Some(l));
        }
        let Some(note) = landed::read(&self.common_dir, plan_id, task_id) else {
            return Ok(None);
        };
        let repo = self.open()?;
        let Ok(base_tip) = repo.refname_to_id(&format!("refs/heads/{}", note.base_branch)) else {
            return Ok(None);
        };
        landed::unrecorded_landing(&repo, Some(note), base_tip, fence)
    }

    /// Notes the process group of the agent now running in `wt` (see [`occupant`]).
    /// What the task changed: its worktree if one is kept, else its branch, else the commit
    /// that landed it (see [`diff::diff_task`]).
    pub fn task_diff(
        &self,
        plan_id: &str,
        task_id: &str,
        landed_commit: Option<&str>,
        max_bytes: usize,
    ) -> Result<(DiffSource, WorktreeDiff), WorkspaceError> {
        let wt = self.find(plan_id, task_id)?;
        diff::diff_task(
            self.repo_root(),
            wt.as_ref()
                .map(|w| (w.path.as_path(), w.base_commit.as_str())),
            &branch_name(plan_id, task_id),
            landed_commit,
            max_bytes,
        )
    }

    pub fn note_agent(&self, wt: &Worktree, pgid: i32) {
        occupant::note(&meta::admin_dir(&self.common_dir, &wt.name), pgid);
    }

    /// Done with a finished task's worktree: kept in the pool for a later task when
    /// `[worktrees] pool` has room (see [`pool`]), else removed like [`Self::remove`]; the
    /// branch deleted when asked. Stash entries the task's agent made are dropped.
    pub fn release(&self, wt: &Worktree, delete_branch: bool) -> Result<(), WorkspaceError> {
        pool::release(self, wt, delete_branch)
    }

    /// Deletes the worktree directory and its admin entry, and the branch if asked.
    pub fn remove(&self, wt: &Worktree, delete_branch: bool) -> Result<(), WorkspaceError> {
        cleanup::remove(self, &wt.name, &wt.path, &wt.branch, delete_branch)
    }

    /// Removes a listed worktree (directory and git entry; a stray directory too), and its
    /// branch when asked.
    pub fn remove_listed(
        &self,
        name: &str,
        path: &Path,
        branch: Option<&str>,
        delete_branch: bool,
    ) -> Result<(), WorkspaceError> {
        cleanup::remove(
            self,
            name,
            path,
            branch.unwrap_or_default(),
            delete_branch && branch.is_some(),
        )
    }

    /// Every local task branch (`whilly/…`).
    pub fn task_branches(&self) -> Result<Vec<String>, WorkspaceError> {
        branches::task_branches(self)
    }

    /// Whether every commit of `branch` is on the base branch; `None` when it does not exist.
    pub fn branch_landed(&self, branch: &str) -> Result<Option<bool>, WorkspaceError> {
        branches::landed(self, branch)
    }

    /// Deletes a local branch (a missing one is fine).
    pub fn delete_branch(&self, branch: &str) -> Result<(), WorkspaceError> {
        branches::delete(self, branch)
    }

    /// Every whilly worktree of this repository, plus stray directories in its worktrees dir.
    pub fn list(&self) -> Result<Vec<WorktreeInfo>, WorkspaceError> {
        cleanup::list(self)
    }

    /// Removes the selected worktrees (and stale or stray ones), then does what
    /// `git worktree prune` does.
    pub fn prune(
        &self,
        which: PruneSelection<'_>,
        delete_branches: bool,
    ) -> Result<PruneReport, WorkspaceError> {
        cleanup::prune(self, which, delete_branches)
    }
}

fn head_commit(repo: &Repository, root: &Path) -> Result<git2::Oid, WorkspaceError> {
    let head = match repo.head() {
        Ok(h) => h,
        Err(e) if e.code() == ErrorCode::UnbornBranch || e.code() == ErrorCode::NotFound => {
            return Err(WorkspaceError::NoCommits {
                path: root.to_path_buf(),
            });
        }
        Err(e) => return Err(WorkspaceError::git("read HEAD")(e)),
    };
    head.peel_to_commit()
        .map(|c| c.id())
        .map_err(WorkspaceError::git("resolve HEAD to a commit"))
}

fn current_branch(repo: &Repository) -> Option<String> {
    let head = repo.head().ok()?;
    if head.is_branch() {
        head.shorthand().ok().map(str::to_string)
    } else {
        None
    }
}

/// Canonicalises the longest existing ancestor and appends the rest, so paths compare equal to
/// the ones libgit2 reports even before the directory exists.
fn canonical_prefix(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(c) = existing.canonicalize() {
            let mut out = c;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (
            existing.file_name().map(|n| n.to_os_string()),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}
