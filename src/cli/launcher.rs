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

use super::args::{Cli, Command};
use nix::sys::signal::{SigSet, Signal, kill};
use nix::unistd::Pid;
use std::io::IsTerminal;
use std::process::ExitCode;

/// Set in the console's environment to the launcher's pid.
pub const LAUNCHER_ENV: &str = "WHILLY_CONSOLE_LAUNCHER";
/// Set (to anything) to run the console in the process the shell started, without a launcher
/// (and without the background option when quitting).
pub const NO_LAUNCHER_ENV: &str = "WHILLY_NO_LAUNCHER";

/// Whether this command line opens the console on this terminal, with no launcher yet.
pub fn wanted(cli: &Cli) -> bool {
    if std::env::var_os(LAUNCHER_ENV).is_some() || std::env::var_os(NO_LAUNCHER_ENV).is_some() {
        return false;
    }
    let console = match &cli.command {
        None => true,
        Some(Command::Tui(a) | Command::Run(a)) => !a.headless,
        Some(Command::Demo(a)) => !a.headless,
        Some(_) => false,
    };
    console && std::io::stdout().is_terminal() && std::io::stdin().is_terminal()
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
pub fn unblock_inherited() {
    if std::env::var_os(LAUNCHER_ENV).is_some()
        && let Err(e) = relayed().thread_unblock()
    {
        eprintln!("whilly: cannot unblock signals: {e}");
    }
}

/// Runs this command line again as a child and waits for it; `None` when the child cannot be
/// started (the caller then runs the console itself).
pub fn launch() -> Option<ExitCode> {
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!(
                "whilly: running the console without a launcher (cannot find this executable: {e})"
            );
            return None;
        }
    };
    // Blocked before the child exists, so none of these is lost; the child inherits the mask
    // and lifts it first thing (`unblock_inherited`).
    let set = relayed();
    if let Err(e) = set.thread_block() {
        eprintln!("whilly: cannot block signals for the console's launcher: {e}");
        return None;
    }
    let mut child = match std::process::Command::new(&exe)
        .args(std::env::args_os().skip(1))
        .env(LAUNCHER_ENV, std::process::id().to_string())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            let _ = set.thread_unblock();
            eprintln!(
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
                        eprintln!("whilly: launcher: waiting for signals failed: {e}");
                        return;
                    }
                }
            }
        });
    if let Err(e) = relay {
        eprintln!("whilly: launcher: cannot start its signal thread: {e}");
    }
    match child.wait() {
        Ok(status) => Some(ExitCode::from(exit_byte(status))),
        Err(e) => {
            eprintln!("whilly: waiting for the console failed: {e}");
            Some(ExitCode::from(super::exit::ENVIRONMENT as u8))
        }
    }
}

/// The shell's convention: the code, or 128 + the signal that ended the process.
fn exit_byte(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => c.clamp(0, 255) as u8,
        (None, Some(s)) => (128 + s).clamp(0, 255) as u8,
        (None, None) => super::exit::ENVIRONMENT as u8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn exit_codes_follow_the_shell() {
        assert_eq!(exit_byte(std::process::ExitStatus::from_raw(3 << 8)), 3);
        // Killed by SIGTERM (15).
        assert_eq!(exit_byte(std::process::ExitStatus::from_raw(15)), 143);
    }
}
