//! Serialises merges into base branches: a process-wide mutex for the slots of one engine, and
//! an advisory `flock` on `.git/whilly-merge.lock` for other whilly processes. flock is released
//! by the kernel when a process dies, so a crash never leaves a stale lock behind.

use std::fs::{File, OpenOptions};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::error::WorkspaceError;

static PROCESS_MERGE: Mutex<()> = Mutex::new(());
static PROCESS_ADMIN: Mutex<()> = Mutex::new(());

pub const LOCK_FILE: &str = "whilly-merge.lock";

/// Held while a merge runs. Field order matters: the file lock is released before the mutex.
pub struct MergeLock {
    _file: File,
    _guard: MutexGuard<'static, ()>,
}

/// Guards worktree creation and removal in this process: libgit2 writes `.git/worktrees/` and
/// refs there, and two slots doing so at once could trip over each other's lock files.
pub fn admin() -> MutexGuard<'static, ()> {
    // A panic in another holder leaves nothing half-done that the next holder would misread.
    PROCESS_ADMIN.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn merge(common_dir: &Path, timeout: Duration) -> Result<MergeLock, WorkspaceError> {
    let guard = PROCESS_MERGE.lock().unwrap_or_else(|p| p.into_inner());
    let path = common_dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(WorkspaceError::io("could not open the merge lock", &path))?;
    let deadline = Instant::now() + timeout;
    loop {
        match try_flock(&file) {
            Ok(true) => break,
            Ok(false) if Instant::now() < deadline => {
                // Another process holds it; there is no event to await across processes.
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(false) => {
                return Err(WorkspaceError::MergeLockTimeout {
                    path,
                    waited: timeout,
                });
            }
            Err(e) => return Err(WorkspaceError::io("could not lock", &path)(e)),
        }
    }
    Ok(MergeLock {
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
        assert!(
            matches!(err, WorkspaceError::MergeLockTimeout { .. }),
            "{err}"
        );
        drop(other);
        let held = merge(dir.path(), Duration::from_secs(5)).unwrap();
        drop(held);
    }
}
