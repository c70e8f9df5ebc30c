//! Pushing a task branch to a remote, so the work reaches the shared repository (and a pull
//! request) rather than staying in the clone that ran it.
//!
//! Never over someone else's commits, and never over a newer attempt's: the remote branch is
//! looked at first. Missing, or behind ours: an ordinary push. Ahead of ours with only commits
//! of this same task: an earlier attempt's branch, ours to replace only when every one of them
//! carries a lower lease epoch than ours (see [`super::trailer`]); a commit of a newer attempt
//! there means this attempt lost its task ([`WorkspaceError::Superseded`]). Anything else on it:
//! the work goes to `<branch>-try2` (then `-try3`, …) instead, and the caller learns the name.
//!
//! Each push is a compare-and-swap: the lease is proved just before it, and the remote's branch
//! moves only from the tip looked at (see [`super::remote_ref`]).

use git2::{FetchOptions, Oid, Repository};

use super::Workspaces;
pub use super::credentials::PushAuth;
use super::credentials::callbacks;
use super::error::WorkspaceError;
use super::landed::DeliveryFence;
use super::trailer::TaskMark;

/// How many alternative names (`-try2` … `-try9`) a push tries before giving up.
const MAX_TRIES: u32 = 9;

/// A branch on the remote holding the task's work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    pub remote: String,
    /// The branch name on the remote (the task branch's, or a `-tryN` of it).
    pub branch: String,
    pub commit: String,
    /// The remote already had exactly this commit there: nothing was sent.
    pub unchanged: bool,
    /// An earlier attempt's branch of this task was replaced.
    pub replaced_own: bool,
}

/// Whether a commit was made by an attempt of `task_id` in `plan_id` (see
/// [`super::layout::commit_message`]).
pub fn is_task_commit(message: &str, plan_id: &str, task_id: &str) -> bool {
    let subject = message.lines().next().unwrap_or_default();
    let ours_subject = subject == format!("whilly: {task_id}")
        || subject.starts_with(&format!("whilly: {task_id} "));
    ours_subject
        && message
            .lines()
            .any(|l| l.trim() == format!("Plan: {plan_id}"))
}

fn git(context: impl Into<String>) -> impl FnOnce(git2::Error) -> WorkspaceError {
    let context = context.into();
    move |source| WorkspaceError::Git { context, source }
}

/// The remote's tip of `branch`, or `None` when it has no such branch.
fn remote_tip(
    repo: &Repository,
    remote: &str,
    branch: &str,
    auth: &PushAuth,
) -> Result<Option<Oid>, WorkspaceError> {
    let mut r = repo
        .find_remote(remote)
        .map_err(git(format!("find remote {remote}")))?;
    let url = r.url().unwrap_or_default().to_string();
    let conn = r
        .connect_auth(git2::Direction::Fetch, Some(callbacks(auth, &url)), None)
        .map_err(git(format!("connect to remote {remote} ({url})")))?;
    let want = format!("refs/heads/{branch}");
    let tip = conn
        .list()
        .map_err(git(format!("list branches of {remote}")))?
        .iter()
        .find(|h| h.name() == want)
        .map(|h| h.oid());
    Ok(tip)
}

/// Brings the remote's commit `tip` of `branch` into the local object store (under a private
/// ref that is removed again) so its history can be read.
pub(super) fn fetch_tip(
    repo: &Repository,
    remote: &str,
    branch: &str,
    auth: &PushAuth,
) -> Result<(), WorkspaceError> {
    let mut r = repo
        .find_remote(remote)
        .map_err(git(format!("find remote {remote}")))?;
    let url = r.url().unwrap_or_default().to_string();
    let probe = format!("refs/whilly/probe/{branch}");
    let mut opts = FetchOptions::new();
    opts.remote_callbacks(callbacks(auth, &url));
    r.fetch(
        &[format!("+refs/heads/{branch}:{probe}")],
        Some(&mut opts),
        None,
    )
    .map_err(git(format!("fetch {branch} from {remote}")))?;
    if let Ok(mut reference) = repo.find_reference(&probe) {
        let _ = reference.delete();
    }
    Ok(())
}

/// Who made the commits on the remote's branch that `ours` lacks.
enum Theirs {
    /// Only earlier attempts of this task (lower epochs, or unmarked commits of the task).
    EarlierAttempt,
    /// A newer attempt of this task, holding `epoch`.
    NewerAttempt(i64),
    /// Someone else.
    Foreign,
}

fn whose(
    repo: &Repository,
    theirs: Oid,
    ours: Oid,
    mark: &TaskMark,
) -> Result<Theirs, WorkspaceError> {
    let mut walk = repo.revwalk().map_err(git("walk the remote branch"))?;
    walk.push(theirs).map_err(git("walk the remote branch"))?;
    walk.hide(ours).map_err(git("walk the remote branch"))?;
    if let Ok(base) = repo.merge_base(theirs, ours) {
        let _ = walk.hide(base);
    }
    let mut newest = None;
    for oid in walk {
        let oid = oid.map_err(git("walk the remote branch"))?;
        let commit = repo.find_commit(oid).map_err(git("read a remote commit"))?;
        let message = commit.message().unwrap_or_default();
        match TaskMark::parse(message) {
            Some(m) if m.same_task(mark) => {
                newest = newest.max(Some(m.epoch));
            }
            Some(_) => return Ok(Theirs::Foreign),
            None if is_task_commit(message, &mark.plan_id, &mark.task_id) => {}
            None => return Ok(Theirs::Foreign),
        }
    }
    Ok(match newest {
        Some(e) if e >= mark.epoch => Theirs::NewerAttempt(e),
        _ => Theirs::EarlierAttempt,
    })
}

/// Moves the remote's `remote_branch` to the local branch `local`, only from `expected`
/// (`None`: the remote has no such branch), as one compare-and-swap (see
/// [`super::remote_ref`]): `Ok(false)` when the remote's tip is no longer that.
fn push_ref(
    repo: &Repository,
    remote: &str,
    local: &str,
    remote_branch: &str,
    expected: Option<Oid>,
    auth: &PushAuth,
) -> Result<bool, WorkspaceError> {
    super::remote_ref::compare_and_swap(
        repo,
        remote,
        auth,
        &format!("refs/heads/{local}"),
        remote_branch,
        expected,
    )
}

/// Pushes the local task branch `branch` of the task `mark` names to `remote`, while `fence`
/// says the attempt still holds the task.
pub(super) fn push(
    ws: &Workspaces,
    remote: &str,
    branch: &str,
    mark: &TaskMark,
    fence: &dyn DeliveryFence,
    auth: &PushAuth,
) -> Result<Pushed, WorkspaceError> {
    let repo = ws.open()?;
    let ours = repo
        .find_branch(branch, git2::BranchType::Local)
        .map_err(git(format!("find task branch {branch}")))?
        .get()
        .target()
        .ok_or_else(|| WorkspaceError::NoTaskBranch {
            branch: branch.to_string(),
        })?;
    let done = |name: &str, unchanged: bool, replaced_own: bool| Pushed {
        remote: remote.to_string(),
        branch: name.to_string(),
        commit: ours.to_string(),
        unchanged,
        replaced_own,
    };
    let proved = || match fence.still_ours() {
        Ok(true) => Ok(()),
        Ok(false) => Err(WorkspaceError::Superseded {
            branch: branch.to_string(),
            detail: "the attempt no longer holds the task's lease".into(),
        }),
        Err(detail) => Err(WorkspaceError::FenceUnanswered { detail }),
    };
    let mut n = 1;
    let mut raced = 0;
    while n <= MAX_TRIES {
        let name = if n == 1 {
            branch.to_string()
        } else {
            format!("{branch}-try{n}")
        };
        let theirs = remote_tip(&repo, remote, &name, auth)?;
        let replaced_own = match theirs {
            None => false,
            Some(t) if t == ours => return Ok(done(&name, true, false)),
            Some(t) => {
                if repo.find_commit(t).is_err() {
                    fetch_tip(&repo, remote, &name, auth)?;
                }
                if repo.graph_descendant_of(ours, t).unwrap_or(false) {
                    false
                } else {
                    match whose(&repo, t, ours, mark)? {
                        Theirs::EarlierAttempt => true,
                        Theirs::NewerAttempt(epoch) => {
                            return Err(WorkspaceError::Superseded {
                                branch: name,
                                detail: format!(
                                    "the remote branch holds the work of a newer attempt (epoch {epoch}, this one is {})",
                                    mark.epoch
                                ),
                            });
                        }
                        Theirs::Foreign => {
                            tracing::info!(
                                remote,
                                branch = %name,
                                "the remote branch holds commits that are not this task's; trying another name"
                            );
                            n += 1;
                            continue;
                        }
                    }
                }
            }
        };
        proved()?;
        crate::failpoint::crash_if("before_push");
        tracing::info!(%remote, branch = %name, ours = %ours, theirs = ?theirs, epoch = mark.epoch, "pushing the task branch");
        if push_ref(&repo, remote, branch, &name, theirs, auth)? {
            return Ok(done(&name, false, replaced_own));
        }
        // The remote branch moved between looking and pushing: look again.
        raced += 1;
        if raced > MAX_TRIES {
            break;
        }
    }
    Err(WorkspaceError::Git {
        context: format!(
            "push {branch} to {remote}: {branch} and {MAX_TRIES} alternatives (-try2 …) all hold other people's commits, or kept moving"
        ),
        source: git2::Error::from_str("no free branch name"),
    })
}

/// The URL of `remote` in the repository, for naming the forge repository it belongs to.
pub(super) fn remote_url(ws: &Workspaces, remote: &str) -> Result<String, WorkspaceError> {
    let repo = ws.open()?;
    let r = repo
        .find_remote(remote)
        .map_err(git(format!("find remote {remote}")))?;
    Ok(r.url().unwrap_or_default().to_string())
}

/// `owner/name` of a GitHub-style remote URL (`https://host/o/r.git`, `git@host:o/r.git`,
/// `ssh://git@host/o/r`), or `None` for a local path or anything else.
pub fn repo_of_url(url: &str) -> Option<(String, String)> {
    let path = if let Some((_, rest)) = url.split_once("://") {
        rest.split_once('/')?.1
    } else if let Some((host, path)) = url.split_once(':') {
        // scp-like `git@github.com:o/r.git`; a Windows drive letter or a path is not one.
        if host.contains('/') || host.len() < 2 {
            return None;
        }
        path
    } else {
        return None;
    };
    let path = path.trim_end_matches('/').trim_end_matches(".git");
    let mut parts = path.rsplitn(3, '/');
    let name = parts.next()?;
    let owner = parts.next()?;
    (!owner.is_empty() && !name.is_empty()).then(|| (owner.to_string(), name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_commits_are_recognised_by_subject_and_plan() {
        let m = super::super::layout::commit_message("GH-7", "Fix it", "gh-o-r", 2);
        assert!(is_task_commit(&m, "gh-o-r", "GH-7"));
        assert!(!is_task_commit(&m, "gh-o-r", "GH-70"));
        assert!(!is_task_commit(&m, "other", "GH-7"));
        assert!(!is_task_commit(
            "fix by a human\n\nPlan: gh-o-r",
            "gh-o-r",
            "GH-7"
        ));
    }

    #[test]
    fn repos_of_remote_urls() {
        let want = Some(("o".to_string(), "r".to_string()));
        assert_eq!(repo_of_url("https://github.com/o/r.git"), want);
        assert_eq!(repo_of_url("git@github.com:o/r.git"), want);
        assert_eq!(repo_of_url("ssh://git@github.com/o/r"), want);
        assert_eq!(repo_of_url("/srv/git/r.git"), None);
        assert_eq!(repo_of_url("https://github.com/r"), None);
    }
}
