//! Leaving the terminal while agents keep running: the console's half of
//! [`crate::cli::launcher`]. The console process stays (it owns the agents' PTYs), gives up its
//! terminal and lets the launcher exit so the shell prompt comes back.

use nix::sys::signal::{Signal, kill};
use nix::unistd::{Pid, getppid, setsid};
use std::fs::OpenOptions;
use std::io;

/// Set by the launcher for the console it starts: the launcher's pid.
pub(crate) const LAUNCHER_ENV: &str = "WHILLY_CONSOLE_LAUNCHER";

/// The launcher this console was started by, if any: only then can the terminal go back to the
/// shell while the console process lives on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Launcher {
    pid: Pid,
}

impl Launcher {
    /// The launcher named in the environment, if it really is this process's parent (an agent
    /// inherits the variable; a `whilly` it runs must not take its parent for a launcher).
    pub(crate) fn from_env() -> Option<Launcher> {
        let pid: i32 = std::env::var(LAUNCHER_ENV).ok()?.trim().parse().ok()?;
        (pid > 1 && getppid().as_raw() == pid).then_some(Launcher {
            pid: Pid::from_raw(pid),
        })
    }

    /// Prints `message` on the (already restored) terminal, then detaches: a new session with no
    /// controlling terminal (so a closing terminal or SSH connection does not hang the process
    /// up), standard input and output on `/dev/null`, and the launcher told to exit.
    ///
    /// On error the process may still hold the terminal; the caller stops the agents.
    pub(crate) fn detach(self, message: &str) -> io::Result<()> {
        eprintln!("{message}");
        setsid().map_err(io::Error::from)?;
        let null = OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")?;
        nix::unistd::dup2_stdin(&null).map_err(io::Error::from)?;
        nix::unistd::dup2_stdout(&null).map_err(io::Error::from)?;
        nix::unistd::dup2_stderr(&null).map_err(io::Error::from)?;
        kill(self.pid, Signal::SIGUSR1).map_err(io::Error::from)
    }
}

/// What the operator reads when the prompt comes back: what still runs, how to follow it and how
/// to stop it.
pub(crate) fn message(
    running: &[String],
    whole_plan: bool,
    pid: u32,
    plan_id: &str,
    log_dir: &std::path::Path,
) -> String {
    let agents = match running.len() {
        0 => "no agent running now".to_string(),
        1 => format!("1 agent running ({})", running[0]),
        n => format!("{n} agents running ({})", running.join(", ")),
    };
    let what = if whole_plan {
        format!(
            "plan {plan_id} goes on in the background, process {pid}, {agents}; the process \
             exits when the plan ends."
        )
    } else {
        format!(
            "{agents} in the background, process {pid}; nothing new starts and the process exits \
             when they finish."
        )
    };
    // The log directory is `<repo>/.whilly/logs` (`store::open::state_dir`): the repository
    // named with --repo makes the command work from any directory.
    let repo = log_dir
        .parent()
        .and_then(|state| state.parent())
        .map(|r| format!(" --repo {}", shell_word(&r.to_string_lossy())))
        .unwrap_or_default();
    format!(
        "whilly: {what}\n  follow: whilly{repo} events --plan {plan_id} --follow   (or open \
         whilly{repo} again: its inbox answers their handoffs)\n  stop them: kill {pid}   (their \
         tasks go back to PENDING)\n  log: {}",
        log_dir.display()
    )
}

/// `s` as one shell word: as it is when it holds nothing a shell would split or expand.
fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%,=".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_tasks_the_process_and_how_to_stop_it() {
        let m = message(
            &["A".into(), "B".into()],
            false,
            4242,
            "p",
            std::path::Path::new("/r/.whilly/logs"),
        );
        assert!(
            m.contains("2 agents running (A, B) in the background"),
            "{m}"
        );
        assert!(m.contains("nothing new starts"), "{m}");
        assert!(m.contains("kill 4242"), "{m}");
        assert!(
            m.contains("whilly --repo /r events --plan p --follow"),
            "{m}"
        );
        assert!(m.contains("/r/.whilly/logs"), "{m}");
        let m = message(
            &[],
            true,
            7,
            "p",
            std::path::Path::new("/my repo/.whilly/logs"),
        );
        assert!(m.contains("whilly --repo '/my repo' events"), "{m}");
        let m = message(&[], true, 7, "p", std::path::Path::new("/l"));
        assert!(
            m.contains("plan p goes on in the background, process 7"),
            "{m}"
        );
        assert!(m.contains("exits when the plan ends"), "{m}");
    }
}
