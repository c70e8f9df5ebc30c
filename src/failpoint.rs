//! Fault injection for the reliability suite (`tests/reliability.rs`): `WHILLY_FAILPOINT=NAME`
//! makes this process kill itself with SIGKILL when it reaches the point called NAME, the way a
//! crash or an OOM kill would, at the one moment that is otherwise too short to hit from
//! outside (between landing a task's work and recording it, say).
//!
//! `WHILLY_FAILPOINT=stop:NAME` instead stops the process (SIGSTOP) there, as a frozen VM or
//! a process paused by its operator would be, until the test sends SIGCONT.
//!
//! Points: `after_delivery` (the work is on the base branch, the queue not yet told);
//! `before_push` (the lease was just proved, the push of a task branch or of the shared base
//! not yet made).

/// Dies here with SIGKILL when `WHILLY_FAILPOINT` names `point`, or stops with SIGSTOP when
/// it names `stop:point`.
pub(crate) fn crash_if(point: &str) {
    let Some(wanted) = std::env::var_os("WHILLY_FAILPOINT") else {
        return;
    };
    for p in wanted.to_string_lossy().split(',').map(str::trim) {
        if p == point {
            tracing::error!("failpoint {point}: killing this process (WHILLY_FAILPOINT)");
            // SAFETY: kill(2) on our own pid.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        }
        if p.strip_prefix("stop:") == Some(point) {
            tracing::error!("failpoint {point}: stopping this process (WHILLY_FAILPOINT)");
            // To this thread, not the process: a process-directed stop may be taken by another
            // thread while this one runs on to its next system call, past the point. SIGSTOP
            // stops the whole process either way; SIGCONT resumes it here.
            // SAFETY: raise(3) has no preconditions.
            unsafe { libc::raise(libc::SIGSTOP) };
        }
    }
}
