//! Fault injection for the reliability suite (`tests/reliability.rs`): `WHILLY_FAILPOINT=NAME`
//! makes this process kill itself with SIGKILL when it reaches the point called NAME, the way a
//! crash or an OOM kill would, at the one moment that is otherwise too short to hit from
//! outside (between landing a task's work and recording it, say).
//!
//! Points: `after_delivery` (the work is on the base branch, the queue not yet told).

/// Dies here, with SIGKILL, when `WHILLY_FAILPOINT` names `point`.
pub fn crash_if(point: &str) {
    let Some(wanted) = std::env::var_os("WHILLY_FAILPOINT") else {
        return;
    };
    if wanted
        .to_string_lossy()
        .split(',')
        .any(|p| p.trim() == point)
    {
        tracing::error!("failpoint {point}: killing this process (WHILLY_FAILPOINT)");
        // SAFETY: kill(2) on our own pid.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }
}
