//! Serialises what two attempts must not do at once in one repository, whichever process they
//! run in: merges into base branches, and creating or removing worktrees (libgit2 writes
//! `.git/worktrees/` and refs there; two at once trip over each other's lock files, seen as
//! "reference … is already checked out"). Each is a process-wide mutex for the slots of one
//! engine plus an advisory `flock` on a file in the shared git directory for other processes.
//! flock is released by the kernel when a process dies, so a crash never leaves a stale lock.

use std::fs::{File, OpenOptions};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::error::WorkspaceError;

static PROCESS_MERGE: Mutex<()> = Mutex::new(());
static PROCESS_ADMIN: Mutex<()> = Mutex::new(());

pub(super) const LOCK_FILE: &str = "whilly-merge.lock";
pub(super) const ADMIN_LOCK_FILE: &str = "whilly-worktrees.lock";

/// Held while the guarded work runs. Field order matters: the file lock is released before the
/// mutex.
pub(super) struct RepoLock {
    _file: File,
    _guard: MutexGuard<'static, ()>,
}

/// Held while a merge runs.
pub(super) fn merge(common_dir: &Path, timeout: Duration) -> Result<RepoLock, WorkspaceError> {
    hold(&PROCESS_MERGE, common_dir, LOCK_FILE, "merge", timeout)
}

/// Held while worktrees are created, reset, removed or pruned.
pub(super) fn admin(common_dir: &Path, timeout: Duration) -> Result<RepoLock, WorkspaceError> {
    hold(
        &PROCESS_ADMIN,
        common_dir,
        ADMIN_LOCK_FILE,
        "worktree",
        timeout,
    )
}

fn hold(
    mutex: &'static Mutex<()>,
    common_dir: &Path,
    file_name: &str,
    what: &'static str,
    timeout: Duration,
) -> Result<RepoLock, WorkspaceError> {
    // A panic in another holder leaves nothing half-done that the next holder would misread.
    let guard = mutex.lock().unwrap_or_else(|p| p.into_inner());
    let path = common_dir.join(file_name);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(WorkspaceError::io("could not open the lock file", &path))?;
    let deadline = Instant::now() + timeout;
    loop {
        match try_flock(&file) {
            Ok(true) => break,
            Ok(false) if Instant::now() < deadline => {
                // Another process holds it; there is no event to await across processes.
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(false) => {
                return Err(WorkspaceError::LockTimeout {
                    what,
                    path,
                    waited: timeout,
                });
            }
            Err(e) => return Err(WorkspaceError::io("could not lock", &path)(e)),
        }
    }
    Ok(RepoLock {
        _file: file,
        _guard: guard,
    })
}

#[cfg(unix)]
fn try_flock(file: &File) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor we own for the duration of the call.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Ok(false),
        Some(libc::EINTR) => Ok(false),
        _ => Err(err),
    }
}

#[cfg(not(unix))]
fn try_flock(_file: &File) -> std::io::Result<bool> {
    Ok(true)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_waits_and_times_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        // Another "process": a separate open file description holding the flock.
        let other = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .unwrap();
        assert!(try_flock(&other).unwrap());
        let err = merge(dir.path(), Duration::from_millis(100)).err().unwrap();
        assert!(matches!(err, WorkspaceError::LockTimeout { .. }), "{err}");
        drop(other);
        let held = merge(dir.path(), Duration::from_secs(5)).unwrap();
        drop(held);
    }

    #[test]
    fn the_worktree_lock_is_held_across_processes_too() {
        let dir = tempfile::tempdir().unwrap();
        let other = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.path().join(ADMIN_LOCK_FILE))
            .unwrap();
        assert!(try_flock(&other).unwrap());
        let err = admin(dir.path(), Duration::from_millis(60)).err().unwrap();
        assert!(err.to_string().contains("worktree lock"), "{err}");
        assert!(err.is_transient());
        drop(other);
        drop(admin(dir.path(), Duration::from_secs(5)).unwrap());
    }
}
