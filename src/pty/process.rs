//! Process-group signalling, exit waiting and group membership, Linux/Unix only.
//!
//! The child's exit is observed with `waitid(WNOWAIT)`, which leaves it a zombie: its pid (and so
//! its process-group id) cannot be reused until we reap it, which makes every later `killpg` safe.
//! Reaping happens only when the session is dropped, right after the group is killed.

use std::sync::mpsc::Receiver;

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitInfo {
    /// Exit status when it exited normally.
    pub code: Option<i32>,
    /// Signal number when a signal ended it.
    pub signal: Option<i32>,
}

impl ExitInfo {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

impl std::fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, self.signal) {
            (Some(c), _) => write!(f, "exit code {c}"),
            (None, Some(s)) => write!(f, "killed by signal {s}"),
            (None, None) => write!(f, "unknown exit status"),
        }
    }
}

pub use crate::procguard::signal_group;

/// The process group of `pid`, if the process exists.
pub fn process_group_of(pid: i32) -> Option<i32> {
    // SAFETY: plain syscall.
    let pgid = unsafe { libc::getpgid(pid) };
    (pgid >= 0).then_some(pgid)
}

pub use crate::procinfo::group_members;

/// True while some non-zombie process is still in group `pgid`.
pub fn group_alive(pgid: i32) -> bool {
    !group_members(pgid).is_empty()
}

/// Blocks until `pid` exits, without reaping it.
fn wait_exit_nowait(pid: i32) -> ExitInfo {
    loop {
        // SAFETY: siginfo_t is plain data; waitid fills it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointer to a zeroed siginfo_t; pid is our own child.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            // SAFETY: waitid succeeded for a child, so the SIGCHLD fields are valid.
            let status = unsafe { info.si_status() };
            return match info.si_code {
                libc::CLD_EXITED => ExitInfo {
                    code: Some(status),
                    signal: None,
                },
                libc::CLD_KILLED | libc::CLD_DUMPED => ExitInfo {
                    code: None,
                    signal: Some(status),
                },
                _ => continue,
            };
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            tracing::warn!(pid, %err, "waitid failed; reporting an unknown exit");
            return ExitInfo {
                code: None,
                signal: None,
            };
        }
    }
}

/// The waiter thread's body: report the exit, then hold the zombie until `release` is dropped
/// (the session is gone), kill whatever is left of the group, and reap.
pub(crate) fn run_waiter(pid: i32, release: Receiver<()>, report: impl FnOnce(ExitInfo)) {
    let info = wait_exit_nowait(pid);
    report(info);
    // Either a message or the sender dropped: both mean the session is gone.
    let _ = release.recv();
    if let Err(err) = signal_group(pid, libc::SIGKILL) {
        tracing::warn!(pid, %err, "cannot kill the rest of the process group");
    }
    let mut status = 0;
    // SAFETY: reaping our own child, whose exit we already observed.
    unsafe { libc::waitpid(pid, &mut status, 0) };
}
