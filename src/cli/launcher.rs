//! The console's launcher: the process the shell waits on while the console runs in a child.
//!
//! Agents are children of the console (their PTYs are its file descriptors), so they can only
//! outlive the operator's terminal if the console does. A process cannot hand the terminal back
//! to its shell without exiting, hence two processes: this launcher, which the shell waits on,
//! and the console, the same command line run as its child. When the operator leaves agents to
//! finish in the background, the console restores the terminal, starts its own session (no
//! controlling terminal: closing the terminal or the SSH connection does not hang it up) and
//! tells the launcher (SIGUSR1), which exits 0: the shell prompt is back while the console
//! process finishes the running agents. Otherwise the launcher exits with the console's code.
//!
//! The launcher is also the console's safety net. It is a child subreaper, so processes the
//! console leaves behind (agents of a console killed with SIGKILL, or daemons an agent started)
//! become its children; when the console has ended it stops them. And if the console died of a
//! signal it could not handle, the launcher puts the terminal back (modes and escape sequences)
//! before the shell prompt returns.

use super::args::{Cli, Command};
use nix::sys::signal::{SigSet, Signal, kill};
use nix::sys::termios::{SetArg, Termios, tcgetattr, tcsetattr};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Set in the console's environment to the launcher's pid.
pub(crate) use crate::tui::detach::LAUNCHER_ENV;
/// Set (to anything) to run the console in the process the shell started, without a launcher
/// (and without the background option when quitting).
pub(crate) const NO_LAUNCHER_ENV: &str = "WHILLY_NO_LAUNCHER";

/// Whether this command line opens the console on this terminal, with no launcher yet.
pub(crate) fn wanted(cli: &Cli) -> bool {
    if std::env::var_os(LAUNCHER_ENV).is_some() || std::env::var_os(NO_LAUNCHER_ENV).is_some() {
        return false;
    }
    let console = match &cli.command {
        None => true,
        Some(Command::Tui(a) | Command::Run(a)) => !a.headless,
        Some(Command::Demo(a)) => !a.headless,
        Some(_) => false,
    };
    console && crate::tui::terminal::available()
}

/// The signals the launcher takes for itself.
fn relayed() -> SigSet {
    let mut set = SigSet::empty();
    for s in [
        Signal::SIGUSR1,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGINT,
        Signal::SIGQUIT,
    ] {
        set.add(s);
    }
    set
}

/// In the console started by a launcher: unblocks the signals the launcher blocked (a child
/// inherits its parent's mask), before any thread starts, so SIGTERM and friends reach the
/// console and its agents.
pub(crate) fn unblock_inherited() {
    if std::env::var_os(LAUNCHER_ENV).is_some()
        && let Err(e) = relayed().thread_unblock()
    {
        errln!("whilly: cannot unblock signals: {e}");
    }
}

/// Runs this command line again as a child and waits for it; `None` when the child cannot be
/// started (the caller then runs the console itself).
pub(crate) fn launch() -> Option<ExitCode> {
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            errln!(
                "whilly: running the console without a launcher (cannot find this executable: {e})"
            );
            return None;
        }
    };
    // Blocked before the child exists, so none of these is lost; the child inherits the mask
    // and lifts it first thing (`unblock_inherited`).
    let set = relayed();
    // Orphans of the console come to us rather than to init, so none outlives the run.
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        errln!("whilly: launcher: cannot become a subreaper ({e}); continuing");
    }
    let saved_tty = tcgetattr(std::io::stdin()).ok();
    if let Err(e) = set.thread_block() {
        errln!("whilly: cannot block signals for the console's launcher: {e}");
        return None;
    }
    let child = match std::process::Command::new(&exe)
        .args(std::env::args_os().skip(1))
        .env(LAUNCHER_ENV, std::process::id().to_string())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            let _ = set.thread_unblock();
            errln!(
                "whilly: cannot start the console ({}): {e}; running it without a launcher",
                exe.display()
            );
            return None;
        }
    };
    let pid = Pid::from_raw(child.id() as i32);
    let relay = std::thread::Builder::new()
        .name("whilly-launcher".into())
        .spawn(move || {
            loop {
                match set.wait() {
                    // The console has detached: its message is on the terminal already.
                    Ok(Signal::SIGUSR1) => std::process::exit(0),
                    // Meant for whoever runs the console (`kill`, a closing SSH session).
                    Ok(sig @ (Signal::SIGTERM | Signal::SIGHUP)) => {
                        let _ = kill(pid, sig);
                    }
                    // Ctrl-C and Ctrl-\ from the terminal reach the console directly (same
                    // process group); relaying would deliver them twice.
                    Ok(_) => {}
                    Err(e) => {
                        errln!("whilly: launcher: waiting for signals failed: {e}");
                        return;
                    }
                }
            }
        });
    if let Err(e) = relay {
        errln!("whilly: launcher: cannot start its signal thread: {e}");
    }
    // Reaped here (any child: orphans may end before the console), not through `child`.
    drop(child);
    let code = match wait_for(pid) {
        Ok(Ended::Code(c)) => c.clamp(0, 255) as u8,
        Ok(Ended::Signal(sig)) => {
            restore_terminal(saved_tty.as_ref());
            errln!("whilly: the console was killed ({sig}); the terminal was put back");
            (128 + sig as i32).clamp(0, 255) as u8
        }
        Err(e) => {
            errln!("whilly: waiting for the console failed: {e}");
            super::exit::ENVIRONMENT as u8
        }
    };
    stop_leftovers();
    Some(ExitCode::from(code))
}

enum Ended {
    Code(i32),
    Signal(Signal),
}

/// Reaps children until `console` ends (a subreaper also gets orphans to reap).
fn wait_for(console: Pid) -> nix::Result<Ended> {
    loop {
        match waitpid(None, None) {
            Ok(WaitStatus::Exited(p, code)) if p == console => return Ok(Ended::Code(code)),
            Ok(WaitStatus::Signaled(p, sig, _)) if p == console => return Ok(Ended::Signal(sig)),
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
}

/// What a killed console could not undo: raw mode, the alternate screen, mouse reporting,
/// bracketed paste, a hidden cursor.
fn restore_terminal(saved: Option<&Termios>) {
    let mut out = std::io::stdout();
    let _ = out.write_all(
        b"\x1b[?2026l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?2004l\x1b[?1049l\x1b[?25h",
    );
    let _ = out.flush();
    if let Some(t) = saved {
        let _ = tcsetattr(std::io::stdin(), SetArg::TCSANOW, t);
    }
}

/// Stops what the console left behind (now our children): SIGTERM to each one's process group
/// (agents lead their own), SIGKILL to what is left after a grace of 3 s; all reaped.
fn stop_leftovers() {
    let me = std::process::id();
    let left = crate::procinfo::children_of(me);
    if left.is_empty() {
        return;
    }
    errln!(
        "whilly: stopping {} process(es) the console left behind",
        left.len()
    );
    let signal_all = |sig: Signal| {
        for p in crate::procinfo::children_of(me) {
            let Ok(raw) = i32::try_from(p) else { continue };
            // The one guarded group kill (never group 0 or 1; with SIGKILL, what the group's
            // guard adopted first), then the child itself in case it leads no group.
            let _ = crate::procguard::signal_group(raw, sig as i32);
            let _ = kill(Pid::from_raw(raw), sig);
        }
    };
    signal_all(Signal::SIGTERM);
    let mut grace = Instant::now() + Duration::from_secs(3);
    let mut killed = false;
    loop {
        while let Ok(status) = waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            if status == WaitStatus::StillAlive {
                break;
            }
        }
        if crate::procinfo::children_of(me).is_empty() {
            return;
        }
        if Instant::now() >= grace {
            if killed {
                return;
            }
            signal_all(Signal::SIGKILL);
            killed = true;
            grace = Instant::now() + Duration::from_secs(2);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
