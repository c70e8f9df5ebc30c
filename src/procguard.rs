//! No orphans, whatever kills whilly: every agent, check and setup command is started through a
//! small guard, the `whilly` binary itself re-executed as `whilly __guard PID -- PROGRAM ARGS…`.
//!
//! The guard forks the program (same process group, same terminal, same environment), passes
//! its exit status through unchanged (an exit code, or death by the same signal), and watches
//! its parent: once whilly is gone (`getppid()` changes — killed with SIGKILL, say), it sends
//! SIGTERM to the whole process group and SIGKILL a few seconds later. That reaches what the
//! program started in its group too, SIGHUP-ignoring or not.
//!
//! Why not `PR_SET_PDEATHSIG` alone: it fires when the *thread* that forked the child ends
//! (tokio's blocking threads come and go), it reaches only the direct child, and portable-pty's
//! `CommandBuilder` offers no pre-exec hook to set it. `getppid()` speaks of the process.
//!
//! The guard is also a child subreaper (`PR_SET_CHILD_SUBREAPER`): whatever the program starts
//! and then abandons — a `setsid` daemon, a double fork — is re-parented to the guard instead of
//! init, wherever it moved its session or group. When the program ends, or whilly is gone, the
//! guard ends every such descendant before it exits itself: nothing an agent starts outlives
//! its attempt, however it detaches.
//!
//! The guard ignores SIGINT, SIGHUP and SIGQUIT and takes SIGTERM without dying of it (whilly
//! signals the process group, and the program must get them, not the guard; a SIGTERM is passed
//! on to the descendants the guard adopted); the program starts with default dispositions and
//! the signal mask whilly spawned with.
//!
//! Guarding is on when the binary calls [`enable`] with its own path (the `whilly` binary does,
//! first thing); a library user without it spawns programs directly.

use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The hidden subcommand.
pub(crate) const GUARD_ARG: &str = "__guard";

/// How long the group has between SIGTERM and SIGKILL once whilly is gone.
const GRACE: Duration = Duration::from_secs(3);
/// How often the guard looks at its parent when the program says nothing.
const TICK: Duration = Duration::from_millis(100);

static GUARD_EXE: OnceLock<PathBuf> = OnceLock::new();

/// Turns guarding on for this process: programs are started through `exe __guard`.
pub(crate) fn enable(exe: PathBuf) {
    // Set once per process; a second call has nothing to change.
    let _ = GUARD_EXE.set(exe);
}

/// The argv that runs `argv` under the guard, when guarding is on and the program can be found
/// (`path`: the PATH the program will be looked up in; `cwd`: where a relative program is).
/// Otherwise `argv` itself, so that a missing program fails to spawn exactly as before.
pub(crate) fn guarded_argv(argv: &[OsString], path: Option<&OsStr>, cwd: &Path) -> Vec<OsString> {
    let (Some(exe), Some(program)) = (GUARD_EXE.get(), argv.first()) else {
        return argv.to_vec();
    };
    let Some(resolved) = resolve(program, path, cwd) else {
        return argv.to_vec();
    };
    let mut out = Vec::with_capacity(argv.len() + 4);
    out.push(exe.clone().into_os_string());
    out.push(GUARD_ARG.into());
    out.push(std::process::id().to_string().into());
    out.push("--".into());
    out.push(resolved.into_os_string());
    out.extend(argv[1..].iter().cloned());
    out
}

/// A tokio command for `program` (looked up on this process's PATH), through the guard when
/// guarding is on and the program exists. Arguments, cwd, env and process group are set on it
/// as usual.
pub(crate) fn tokio_command(program: impl AsRef<OsStr>) -> tokio::process::Command {
    tokio::process::Command::from(std_command(program))
}

/// A std command for `program`, through the guard when guarding is on and the program exists.
pub(crate) fn std_command(program: impl AsRef<OsStr>) -> std::process::Command {
    let program = program.as_ref();
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let argv = guarded_argv(&[program.to_os_string()], None, &cwd);
    let mut cmd = std::process::Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    cmd
}

/// Where `program` would be executed from: a path as given (relative to `cwd`), or the first
/// executable file of that name on `path`.
fn resolve(program: &OsStr, path: Option<&OsStr>, cwd: &Path) -> Option<PathBuf> {
    let p = Path::new(program);
    if program.as_bytes().contains(&b'/') {
        let full = if p.is_absolute() {
            p.to_path_buf()
        } else {
            cwd.join(p)
        };
        return is_executable(&full).then_some(full);
    }
    let path = path
        .map(OsStr::to_os_string)
        .or_else(|| std::env::var_os("PATH"))?;
    std::env::split_paths(&path)
        .map(|dir| {
            if dir.is_absolute() {
                dir.join(p)
            } else {
                cwd.join(dir).join(p)
            }
        })
        .find(|c| is_executable(c))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `whilly __guard PID -- PROGRAM ARGS…`: runs the guard; never returns. Must be called before
/// the process starts any thread (it forks).
pub(crate) fn run(args: &[OsString]) -> ! {
    let parent: Option<i32> = args.first().and_then(|a| a.to_str()?.parse().ok());
    let rest = match args.get(1).map(|a| a.as_bytes()) {
        Some(b"--") => &args[2..],
        _ => &[][..],
    };
    let (Some(parent), false) = (parent, rest.is_empty()) else {
        eprintln!("whilly: usage: whilly {GUARD_ARG} PARENT_PID -- PROGRAM [ARGS…]");
        std::process::exit(2);
    };
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } != parent {
        // Whilly died between spawning us and now: start nothing.
        std::process::exit(125);
    }
    // The sandbox (when whilly asks for one) is put on the guard itself, before the fork: the
    // program and all it starts inherit it. A policy that cannot be applied starts nothing.
    if let Some(spec) = std::env::var_os(crate::sandbox::ENV) {
        // SAFETY: single-threaded here (the guard runs first thing in main).
        unsafe { std::env::remove_var(crate::sandbox::ENV) };
        let policy: Result<crate::sandbox::Policy, _> = serde_json::from_slice(spec.as_bytes());
        let applied = policy
            .map_err(|e| format!("sandbox: unreadable policy: {e}"))
            .and_then(|p| crate::sandbox::restrict_self(&p).map_err(|e| e.to_string()));
        if let Err(e) = applied {
            eprintln!("whilly: {e}; nothing was started");
            std::process::exit(126);
        }
    }
    let argv: Vec<CString> = match rest
        .iter()
        .map(|a| CString::new(a.clone().into_vec()))
        .collect::<Result<_, _>>()
    {
        Ok(v) => v,
        Err(_) => {
            eprintln!("whilly: an argument contains a NUL byte");
            std::process::exit(2);
        }
    };
    // SAFETY: single-threaded here (called first thing in main); every call below is a plain
    // libc call on values we own, and the child only calls async-signal-safe functions before
    // exec (signal, sigprocmask, execvp, write, _exit).
    unsafe {
        let mut chld: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut chld);
        libc::sigaddset(&mut chld, libc::SIGCHLD);
        // SIGTERM is taken in `watch` too (blocked here, so never ignored and never fatal): a
        // stop whilly sends the group is passed on to what the program detached.
        libc::sigaddset(&mut chld, libc::SIGTERM);
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigprocmask(libc::SIG_BLOCK, &chld, &mut old);
        // Not SIGTERM: an ignored signal is dropped even while blocked, and `watch` wants it.
        for s in FORWARDED.into_iter().filter(|s| *s != libc::SIGTERM) {
            libc::signal(s, libc::SIG_IGN);
        }
        let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        // Orphans among the program's descendants come to us, not to init (see above).
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        let pid = libc::fork();
        if pid < 0 {
            eprintln!(
                "whilly: cannot start {}: {}",
                rest[0].to_string_lossy(),
                std::io::Error::last_os_error()
            );
            std::process::exit(126);
        }
        if pid == 0 {
            for s in FORWARDED {
                libc::signal(s, libc::SIG_DFL);
            }
            libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            libc::execvp(ptrs[0], ptrs.as_ptr());
            let msg = b"whilly: cannot execute the program\n";
            libc::write(2, msg.as_ptr().cast(), msg.len());
            libc::_exit(127);
        }
        watch(pid, parent, &chld)
    }
}

/// Signals the program must receive and the guard must not die of.
const FORWARDED: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// # Safety
/// `pid` is our child; `chld` holds SIGCHLD, blocked.
unsafe fn watch(pid: libc::pid_t, parent: libc::pid_t, chld: &libc::sigset_t) -> ! {
    let tick = libc::timespec {
        tv_sec: 0,
        tv_nsec: TICK.as_nanos() as libc::c_long,
    };
    let mut orphaned_at: Option<Instant> = None;
    loop {
        // SAFETY: per this function's contract.
        unsafe {
            let sig = libc::sigtimedwait(chld, std::ptr::null_mut(), &tick);
            if sig == libc::SIGTERM {
                // Whilly stops the attempt: the program and its group got this already; what
                // left the group (a `setsid` daemon, adopted by us or not yet) gets it from here.
                signal_outside_group(libc::SIGTERM);
            }
            // Reap the program and any adopted descendant that ended.
            let mut ended = None;
            loop {
                let mut status = 0;
                let r = libc::waitpid(-1, &mut status, libc::WNOHANG);
                if r <= 0 {
                    break;
                }
                if r == pid {
                    ended = Some(status);
                }
            }
            if let Some(status) = ended {
                end_descendants();
                if orphaned_at.is_some() {
                    // Nobody is waiting for our status; finish the group off.
                    libc::kill(0, libc::SIGKILL);
                }
                pass_on(status);
            }
            if orphaned_at.is_none() && libc::getppid() != parent {
                orphaned_at = Some(Instant::now());
                libc::kill(0, libc::SIGTERM);
                libc::kill(0, libc::SIGHUP);
                signal_children(libc::SIGTERM);
            }
            if orphaned_at.is_some_and(|t| t.elapsed() >= GRACE) {
                end_descendants();
                // The guard is in the group: this ends it too.
                libc::kill(0, libc::SIGKILL);
            }
        }
    }
}

/// Sends `signal` to every descendant of the guard that is not in its process group (those
/// got whilly's signal to the group already).
///
/// # Safety
/// Plain syscalls on our own descendants.
unsafe fn signal_outside_group(signal: libc::c_int) {
    // SAFETY: getpid and getpgrp have no preconditions.
    let (me, group) = unsafe { (libc::getpid() as u32, libc::getpgrp()) };
    signal_below(me, group, signal);
}

/// Sends `signal` to every descendant of `root` that is not in process group `group`, found
/// by walking the process tree down from `root` (adopted processes hang below their
/// subreaper, wherever they moved their session or group).
fn signal_below(root: u32, group: libc::pid_t, signal: libc::c_int) {
    let mut stack = crate::procinfo::children_of(root);
    let mut seen = std::collections::HashSet::new();
    while let Some(p) = stack.pop() {
        if !seen.insert(p) {
            continue;
        }
        stack.extend(crate::procinfo::children_of(p));
        let Ok(pid) = i32::try_from(p) else { continue };
        // SAFETY: getpgid on a pid found below `root`; -1 (gone) is skipped.
        let pgid = unsafe { libc::getpgid(pid) };
        if pid > 1 && pgid > 0 && pgid != group {
            // SAFETY: a descendant of `root`, a process of ours or a group whilly started.
            unsafe { libc::kill(pid, signal) };
        }
    }
}

/// Sends `signal` to every child of the guard: the program and the descendants it adopted.
///
/// # Safety
/// Plain syscalls on our own children.
unsafe fn signal_children(signal: libc::c_int) {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() } as u32;
    for child in crate::procinfo::children_of(me) {
        if let Ok(child) = i32::try_from(child)
            && child > 1
        {
            // SAFETY: a pid that is our child.
            unsafe { libc::kill(child, signal) };
        }
    }
}

/// SIGKILL to every child of the guard until none is left: each adopted descendant that dies
/// hands its own children to the guard (the subreaper), which ends them in the next round.
/// Bounded in time; reaps as it goes.
///
/// # Safety
/// Plain syscalls on our own children.
unsafe fn end_descendants() {
    let deadline = Instant::now() + GRACE;
    loop {
        // SAFETY: reaping our own children.
        while unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() } as u32;
        if crate::procinfo::children_of(me).is_empty() || Instant::now() >= deadline {
            return;
        }
        // SAFETY: per this function's contract.
        unsafe { signal_children(libc::SIGKILL) };
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// SIGKILL to every descendant of `leader` outside its process group `leader` (those in it
/// get the group's signal).
fn kill_below(leader: i32) {
    let Ok(root) = u32::try_from(leader) else {
        return;
    };
    // Still the leader of its group (whilly's child, not yet reaped): its pid is not reused.
    // SAFETY: getpgid has no preconditions.
    if unsafe { libc::getpgid(leader) } != leader {
        return;
    }
    signal_below(root, leader, libc::SIGKILL);
}

/// Sends `signal` to every process in group `pgid`: the one way whilly signals a process group
/// (agents, checks, setup commands and one-shot calls each lead their own). Refuses `pgid <= 1`:
/// `killpg(0)` is our own group and 1 is init's, and a bad pid must never turn into either (nor,
/// through an unchecked cast, into -1: every process we may signal). A group that no longer
/// exists is not an error. (The guard's own `kill(0, …)` above is the one deliberate exception:
/// it ends the group it shares with its program.)
pub fn signal_group(pgid: i32, signal: i32) -> std::io::Result<()> {
    if pgid <= 1 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("refusing to signal process group {pgid}"),
        ));
    }
    if signal == libc::SIGKILL {
        // The group's leader is the guard. What it adopted (a `setsid` daemon, say) is outside
        // the group, and once SIGKILL ends the guard nobody is left to end it: it goes first,
        // found below the guard while the guard still holds it.
        kill_below(pgid);
    }
    // SAFETY: plain syscall; pgid > 1 so this never targets our own group (0) or everything (-1).
    let rc = unsafe { libc::killpg(pgid, signal) };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::ESRCH) {
        Ok(())
    } else {
        Err(err)
    }
}

/// SIGKILL to the group led by our child `pid` (spawned with `process_group(0)`), so what it
/// started dies with it. Call it while the child is unreaped or right after it ends: its group id
/// stays reserved while any member lives, so it does not name a stranger's group in practice.
/// What cannot be done is logged; the caller has nothing better to do about it.
pub(crate) fn kill_group(pid: u32) {
    let result = i32::try_from(pid)
        .map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("process id {pid} out of range"),
            )
        })
        .and_then(|pgid| signal_group(pgid, libc::SIGKILL));
    if let Err(err) = result {
        tracing::warn!(pid, %err, "cannot kill the process group");
    }
}

/// Ends the guard the way its program ended.
///
/// # Safety
/// Plain libc calls; `status` is a `waitpid` status.
unsafe fn pass_on(status: libc::c_int) -> ! {
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        // SAFETY: restoring the default disposition and unblocking it, then raising it on
        // ourselves, so our parent sees the same death.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::raise(sig);
        }
        std::process::exit(128 + sig);
    }
    std::process::exit(libc::WEXITSTATUS(status));
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn programs_resolve_on_path_or_relative_to_cwd() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let tool = bin.join("tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = OsString::from(format!("/nonexistent:{}", bin.display()));
        assert_eq!(
            resolve(OsStr::new("tool"), Some(&path), dir.path()),
            Some(tool.clone())
        );
        assert_eq!(
            resolve(OsStr::new("bin/tool"), None, dir.path()),
            Some(tool.clone())
        );
        assert_eq!(
            resolve(OsStr::new("missing"), Some(&path), dir.path()),
            None
        );
        // Not executable: not a program.
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(resolve(OsStr::new("tool"), Some(&path), dir.path()), None);
    }

    #[test]
    fn group_signals_refuse_our_own_group_init_and_everything() {
        for pgid in [1, 0, -1, i32::MIN] {
            let err = signal_group(pgid, 0).unwrap_err();
            assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{pgid}");
            assert!(err.to_string().contains(&pgid.to_string()), "{err}");
        }
        // A pid that does not fit a pid_t would wrap to a negative group: refused, not sent.
        kill_group(u32::MAX);
        kill_group(0);
    }

    #[test]
    fn group_signals_reach_the_group_and_a_gone_group_is_fine() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = i32::try_from(child.id()).unwrap();
        signal_group(pgid, 0).unwrap();
        kill_group(child.id());
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        // Reaped: the group is gone, which is not an error.
        signal_group(pgid, libc::SIGKILL).unwrap();
    }

    #[test]
    fn without_enable_argv_is_unchanged() {
        let argv = vec![OsString::from("sh"), OsString::from("-c")];
        if GUARD_EXE.get().is_none() {
            assert_eq!(guarded_argv(&argv, None, Path::new("/")), argv);
        }
    }
}
