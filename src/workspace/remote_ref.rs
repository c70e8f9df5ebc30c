//! Moving a branch on a remote as one compare-and-swap, whatever the transport.
//!
//! Over the network (HTTPS, SSH, git://) the push protocol carries the old value of each ref it
//! updates and the server refuses the update when the ref is no longer that: the advertised tip
//! is compared with the expected one, and the push goes out on the same connection. libgit2's
//! transport for a remote that is a local path (a bare repository on the same machine or on a
//! shared file system, as teams and tests use) writes the ref blindly instead, so there the
//! objects are pushed under a private ref and the branch is moved in the remote repository
//! itself with a reference update that checks the old value under git's own ref lock.

use std::path::{Path, PathBuf};

use git2::{Oid, PushOptions, Repository};

use super::credentials::{PushAuth, callbacks};
use super::error::WorkspaceError;

fn git(context: impl Into<String>) -> impl FnOnce(git2::Error) -> WorkspaceError {
    WorkspaceError::git(context)
}

/// Moves `remote_branch` on `remote` to the commit the local ref `local_ref` names, only from
/// `expected` (`None`: the branch must not exist). `Ok(false)`: the branch is not at
/// `expected` (someone moved it); nothing changed.
pub(super) fn compare_and_swap(
    repo: &Repository,
    remote: &str,
    auth: &PushAuth,
    local_ref: &str,
    remote_branch: &str,
    expected: Option<Oid>,
) -> Result<bool, WorkspaceError> {
    let r = repo
        .find_remote(remote)
        .map_err(git(format!("find remote {remote}")))?;
    let url = r.url().unwrap_or_default().to_string();
    match local_path(repo, &url) {
        Some(path) => swap_in_local(repo, remote, &path, local_ref, remote_branch, expected),
        None => swap_over_network(repo, remote, auth, local_ref, remote_branch, expected),
    }
}

/// The repository a remote URL names when it is a path on this machine (or `file://`).
fn local_path(repo: &Repository, url: &str) -> Option<PathBuf> {
    let path = if let Some(p) = url.strip_prefix("file://") {
        PathBuf::from(p)
    } else if url.contains("://") || is_scp_like(url) {
        return None;
    } else {
        PathBuf::from(url)
    };
    if path.is_absolute() {
        return Some(path);
    }
    let base = repo.workdir().unwrap_or_else(|| repo.path());
    Some(base.join(path))
}

/// `host:path` (`git@github.com:o/r.git`): a path with a colon before any slash.
fn is_scp_like(url: &str) -> bool {
    match (url.find(':'), url.find('/')) {
        (Some(c), Some(s)) => c < s,
        (Some(_), None) => true,
        _ => false,
    }
}

fn swap_over_network(
    repo: &Repository,
    remote: &str,
    auth: &PushAuth,
    local_ref: &str,
    remote_branch: &str,
    expected: Option<Oid>,
) -> Result<bool, WorkspaceError> {
    let mut r = repo
        .find_remote(remote)
        .map_err(git(format!("find remote {remote}")))?;
    let url = r.url().unwrap_or_default().to_string();
    let mut conn = r
        .connect_auth(git2::Direction::Push, Some(callbacks(auth, &url)), None)
        .map_err(git(format!("connect to remote {remote} ({url})")))?;
    let want = format!("refs/heads/{remote_branch}");
    let advertised = conn
        .list()
        .map_err(git(format!("list branches of {remote}")))?
        .iter()
        .find(|h| h.name() == want)
        .map(|h| h.oid());
    if advertised != expected {
        return Ok(false);
    }
    let rejected = std::cell::RefCell::new(None::<String>);
    {
        let mut cb = callbacks(auth, &url);
        cb.push_update_reference(|_, status| {
            if let Some(s) = status {
                *rejected.borrow_mut() = Some(s.to_string());
            }
            Ok(())
        });
        let mut opts = PushOptions::new();
        opts.remote_callbacks(cb);
        // Forced, but the update carries the advertised tip as its old value, which was
        // `expected`: the server refuses it if the ref moved since.
        conn.remote()
            .push(&[format!("+{local_ref}:{want}")], Some(&mut opts))
            .map_err(git(format!("push {remote_branch} to {remote} ({url})")))?;
    }
    match rejected.into_inner() {
        None => Ok(true),
        Some(why)
            if [
                "failed to lock",
                "stale info",
                "fetch first",
                "non-fast-forward",
                "changed",
            ]
            .iter()
            .any(|s| why.contains(s)) =>
        {
            Ok(false)
        }
        Some(why) => Err(WorkspaceError::Git {
            context: format!("the remote {remote} refused the push of {remote_branch}"),
            source: git2::Error::from_str(&why),
        }),
    }
}

fn swap_in_local(
    repo: &Repository,
    remote: &str,
    path: &Path,
    local_ref: &str,
    remote_branch: &str,
    expected: Option<Oid>,
) -> Result<bool, WorkspaceError> {
    let new = repo
        .refname_to_id(local_ref)
        .map_err(git(format!("find {local_ref}")))?;
    let theirs = Repository::open(path).map_err(git(format!(
        "open the remote {remote} at {}",
        path.display()
    )))?;
    let want = format!("refs/heads/{remote_branch}");
    let current = theirs.refname_to_id(&want).ok();
    if current != expected {
        tracing::info!(branch = %want, current = ?current, expected = ?expected, "the remote branch moved");
        return Ok(false);
    }
    // The objects first, written straight into its object store: no ref of ours ever appears
    // there for another process's fetch to trip over.
    copy_objects(repo, &theirs, new).map_err(git(format!(
        "copy the commits to the remote {remote} ({})",
        path.display()
    )))?;
    // The old value is compared under git's ref lock; "must not exist" is the zero id, which
    // libgit2 compares there too. (`reference(…, force = false)` looks for the ref before it
    // takes the lock: a process paused between the two overwrote a branch created meanwhile.)
    let old = expected.unwrap_or(Oid::ZERO_SHA1);
    // Another process holding the ref's lock is moving it now (or died holding it): wait a
    // moment for it, then look again; a lock that stays is said, with its file.
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        let swapped = theirs
            .reference_matching(&want, new, true, old, "whilly: compare-and-swap")
            .map(|_| ());
        return match swapped {
            Ok(()) => Ok(true),
            Err(e) if e.code() == git2::ErrorCode::Locked => {
                if std::time::Instant::now() < deadline {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    continue;
                }
                Err(WorkspaceError::Git {
                    context: format!(
                        "move {remote_branch} in the remote {remote}: its lock file {}/{want}.lock stayed for {} s; if no git process is using that repository, remove the file",
                        path.display(),
                        LOCK_WAIT.as_secs()
                    ),
                    source: e,
                })
            }
            Err(e)
                if matches!(
                    e.code(),
                    git2::ErrorCode::Modified | git2::ErrorCode::Exists
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(git(format!(
                "move {remote_branch} in the remote {remote} ({})",
                path.display()
            ))(e)),
        };
    }
}

/// How long a local remote's ref lock held by another process is waited for.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Writes into `to` every object reachable from `tip` that it lacks (commits, their trees and
/// blobs), stopping at commits it already has. Bottom up, each object after everything it
/// names: an object present there is complete, even after a copy that died half way.
fn copy_objects(from: &Repository, to: &Repository, tip: Oid) -> Result<(), git2::Error> {
    let (src, dst) = (from.odb()?, to.odb()?);
    let copy = |oid: Oid| -> Result<(), git2::Error> {
        let obj = src.read(oid)?;
        dst.write(obj.kind(), obj.data())?;
        Ok(())
    };
    fn copy_tree(
        from: &Repository,
        dst: &git2::Odb<'_>,
        copy: &dyn Fn(Oid) -> Result<(), git2::Error>,
        tree: Oid,
    ) -> Result<(), git2::Error> {
        if dst.exists(tree) {
            return Ok(());
        }
        for entry in from.find_tree(tree)?.iter() {
            match entry.kind() {
                Some(git2::ObjectType::Tree) => copy_tree(from, dst, copy, entry.id())?,
                Some(git2::ObjectType::Blob) if !dst.exists(entry.id()) => copy(entry.id())?,
                // Submodule commits live in other repositories.
                _ => {}
            }
        }
        copy(tree)
    }
    let mut walk = from.revwalk()?;
    walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)?;
    walk.push(tip)?;
    // The remote's commits among the ancestors end the walk there.
    let mut have = Vec::new();
    {
        let mut probe = vec![tip];
        let mut seen = std::collections::HashSet::new();
        while let Some(c) = probe.pop() {
            if !seen.insert(c) {
                continue;
            }
            if dst.exists(c) {
                have.push(c);
            } else {
                probe.extend(from.find_commit(c)?.parent_ids());
            }
        }
    }
    for c in have {
        walk.hide(c)?;
    }
    for c in walk {
        let c = c?;
        copy_tree(from, &dst, &copy, from.find_commit(c)?.tree_id())?;
        copy(c)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(repo: &Repository, msg: &str) -> Oid {
        let sig = git2::Signature::now("t", "t@test.invalid").unwrap();
        let tree = repo
            .find_tree(repo.treebuilder(None).unwrap().write().unwrap())
            .unwrap();
        repo.commit(None, &sig, &sig, msg, &tree, &[]).unwrap()
    }

    /// The swap into a local-path remote: created only where absent, moved only from the
    /// expected tip, each checked under the ref's lock.
    #[test]
    fn a_local_swap_creates_only_where_absent_and_moves_only_from_the_expected_tip() {
        let dir = tempfile::tempdir().unwrap();
        let remote = Repository::init_bare(dir.path().join("remote.git")).unwrap();
        let local = Repository::init(dir.path().join("local")).unwrap();
        local
            .remote("origin", dir.path().join("remote.git").to_str().unwrap())
            .unwrap();
        let auth = PushAuth::default();
        let (a, b) = (commit(&local, "a"), commit(&local, "b"));
        local.reference("refs/heads/a", a, true, "t").unwrap();
        local.reference("refs/heads/b", b, true, "t").unwrap();
        let tip = || remote.refname_to_id("refs/heads/task").ok();
        let swap = |from: &str, expected| {
            compare_and_swap(&local, "origin", &auth, from, "task", expected).unwrap()
        };
        assert!(swap("refs/heads/a", None), "created where absent");
        assert_eq!(tip(), Some(a));
        assert!(
            !swap("refs/heads/b", None),
            "not created over an existing branch"
        );
        assert_eq!(tip(), Some(a));
        assert!(!swap("refs/heads/b", Some(b)), "not moved from another tip");
        assert_eq!(tip(), Some(a));
        assert!(swap("refs/heads/b", Some(a)), "moved from the expected tip");
        assert_eq!(tip(), Some(b));
        assert!(remote.find_commit(b).is_ok(), "the objects came along");
    }

    #[test]
    fn local_paths_and_network_urls_are_told_apart() {
        assert!(is_scp_like("git@github.com:o/r.git"));
        assert!(!is_scp_like("/srv/git/r.git"));
        assert!(!is_scp_like("../r.git"));
    }
}
