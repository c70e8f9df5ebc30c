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

use super::error::WorkspaceError;
use super::push::{PushAuth, callbacks};

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
        return Ok(false);
    }
    // The objects first, written straight into its object store: no ref of ours ever appears
    // there for another process's fetch to trip over.
    copy_objects(repo, &theirs, new).map_err(git(format!(
        "copy the commits to the remote {remote} ({})",
        path.display()
    )))?;
    let msg = "whilly: compare-and-swap";
    let swapped = match expected {
        Some(old) => theirs
            .reference_matching(&want, new, true, old, msg)
            .map(|_| ()),
        None => theirs.reference(&want, new, false, msg).map(|_| ()),
    };
    match swapped {
        Ok(()) => Ok(true),
        Err(e)
            if matches!(
                e.code(),
                git2::ErrorCode::Modified | git2::ErrorCode::Exists | git2::ErrorCode::Locked
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(git(format!(
            "move {remote_branch} in the remote {remote} ({})",
            path.display()
        ))(e)),
    }
}

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

    #[test]
    fn local_paths_and_network_urls_are_told_apart() {
        assert!(is_scp_like("git@github.com:o/r.git"));
        assert!(!is_scp_like("/srv/git/r.git"));
        assert!(!is_scp_like("../r.git"));
    }
}
