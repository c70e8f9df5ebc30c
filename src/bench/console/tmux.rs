//! The baseline: a private tmux server (its own socket and config) with N panes tiled in one
//! window the size of the console's terminal, each running a shell command, optionally with a
//! client attached in a terminal like the console's, so tmux also draws what an operator sees.

use super::host::{HostSpec, TermHost};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const SESSION: &str = "bench";

/// Whether a tmux binary answers.
pub fn available() -> bool {
    Command::new("tmux")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `'s'` for sh, with embedded quotes escaped.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

pub struct TmuxPanes {
    socket: String,
    config: PathBuf,
    client: Option<TermHost>,
}

impl TmuxPanes {
    /// Starts the server with one pane per command, tiled in a `cols`×`rows` window with
    /// `history` lines of scrollback per pane and no status line (the console has the whole
    /// terminal too). Panes stay after their command ends, so the server outlives the last one
    /// and still answers `wait-for`. `dir` holds the config file.
    pub fn start(
        dir: &Path,
        tag: &str,
        commands: &[String],
        rows: u16,
        cols: u16,
        history: usize,
    ) -> Result<TmuxPanes, String> {
        let config = dir.join(format!("tmux-{tag}.conf"));
        std::fs::write(
            &config,
            format!(
                "set -g history-limit {history}\nset -g status off\nset -g remain-on-exit on\n"
            ),
        )
        .map_err(|e| format!("cannot write {}: {e}", config.display()))?;
        let panes = TmuxPanes {
            socket: format!("whilly-bench-console-{}-{tag}", std::process::id()),
            config,
            client: None,
        };
        let Some((first, rest)) = commands.split_first() else {
            return Err("no pane to start".into());
        };
        let (x, y) = (cols.to_string(), rows.to_string());
        panes.run(&[
            "new-session",
            "-d",
            "-s",
            SESSION,
            "-x",
            &x,
            "-y",
            &y,
            first,
        ])?;
        for cmd in rest {
            panes.run(&["split-window", "-d", "-t", SESSION, cmd])?;
            panes.run(&["select-layout", "-t", SESSION, "tiled"])?;
        }
        Ok(panes)
    }

    /// The socket name, for commands running inside the panes (`tmux -L <socket> wait-for …`).
    pub fn socket(&self) -> &str {
        &self.socket
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.arg("-L")
            .arg(&self.socket)
            .arg("-f")
            .arg(&self.config)
            .env_remove("TMUX");
        cmd
    }

    fn run(&self, args: &[&str]) -> Result<String, String> {
        let out = self
            .command()
            .args(args)
            .output()
            .map_err(|e| format!("cannot run tmux: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "tmux {} failed: {}",
                args.first().copied().unwrap_or_default(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Waits for `tmux wait-for -S <channel>` (a signal sent before the wait counts too).
    pub async fn wait_for(&self, channel: &str, timeout: Duration) -> Result<(), String> {
        let mut cmd = tokio::process::Command::from(self.command());
        cmd.args(["wait-for", channel]).kill_on_drop(true);
        match tokio::time::timeout(timeout, cmd.status()).await {
            Err(_) => Err(format!("tmux: no `{channel}` within {timeout:?}")),
            Ok(Err(e)) => Err(format!("tmux wait-for: {e}")),
            Ok(Ok(s)) if !s.success() => Err(format!("tmux wait-for {channel} failed: {s}")),
            Ok(Ok(_)) => Ok(()),
        }
    }

    /// The server's pid.
    pub fn server_pid(&self) -> Result<u32, String> {
        let pid = self.run(&["display-message", "-p", "-t", SESSION, "#{pid}"])?;
        pid.parse()
            .map_err(|_| format!("tmux gave {pid:?} as its pid"))
    }

    /// Attaches a client in a `cols`×`rows` terminal of its own, as an operator would.
    pub fn attach(&mut self, cwd: &Path, rows: u16, cols: u16) -> Result<u32, String> {
        let host = TermHost::spawn(HostSpec {
            argv: ["tmux", "-L", &self.socket, "attach-session", "-t", SESSION]
                .into_iter()
                .map(OsString::from)
                .collect(),
            cwd,
            env: vec![("TERM".into(), "xterm-256color".into())],
            env_remove: vec!["TMUX".into()],
            rows,
            cols,
            needle: None,
        })
        .map_err(|e| format!("cannot attach a tmux client: {e}"))?;
        let pid = host.pid();
        self.client = Some(host);
        Ok(pid)
    }

    /// Bytes the attached client wrote to its terminal.
    pub fn client_bytes(&self) -> u64 {
        self.client.as_ref().map_or(0, TermHost::bytes)
    }
}

impl Drop for TmuxPanes {
    fn drop(&mut self) {
        let _ = self
            .command()
            .arg("kill-server")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        // kill-server leaves the socket file behind.
        let tmpdir = std::env::var_os("TMUX_TMPDIR").unwrap_or_else(|| "/tmp".into());
        // SAFETY: getuid cannot fail.
        let uid = unsafe { libc::getuid() };
        let _ = std::fs::remove_file(
            Path::new(&tmpdir)
                .join(format!("tmux-{uid}"))
                .join(&self.socket),
        );
    }
}
