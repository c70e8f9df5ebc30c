//! A private tmux server driving a real program in a real terminal: keys in, screen text out,
//! waits with the last screen in the failure message. Killed when dropped.
#![allow(dead_code)]

use crate::engine::wait_for;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A script that starts the console in `repo` with the sealed environment of the engine tests.
pub fn console_script(repo: &crate::engine::Repo) -> std::path::PathBuf {
    whilly_script(repo, &[("TERM", "xterm-256color".into())], "tui plan.json")
}

/// A script that runs `whilly ARGS` (shell words, quoted by the caller where needed) in `repo`
/// with the sealed environment of the engine tests plus `extra` variables, then prints
/// `EXIT=<code>`: what a terminal under tmux runs.
pub fn whilly_script(
    repo: &crate::engine::Repo,
    extra: &[(&str, String)],
    args: &str,
) -> std::path::PathBuf {
    let probe = repo.whilly(&[]);
    let mut env_line = String::from("env -i");
    let vars = probe
        .get_envs()
        .filter_map(|(k, v)| {
            Some((
                k.to_string_lossy().into_owned(),
                v?.to_string_lossy().into_owned(),
            ))
        })
        .chain(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
    for (k, v) in vars {
        env_line.push_str(&format!(" {k}={}", sh_quote(&v)));
    }
    let script = format!(
        "cd {}\n{env_line} {} {args}\necho \"EXIT=$?\"\n",
        sh_quote(&repo.repo.to_string_lossy()),
        sh_quote(env!("CARGO_BIN_EXE_whilly")),
    );
    let path = repo.home.join("console.sh");
    std::fs::write(&path, script).expect("write script");
    path
}

pub struct Tmux {
    socket: String,
}

impl Tmux {
    pub fn start(name: &str, cwd: &Path) -> Tmux {
        let t = Tmux {
            socket: format!("whilly-test-{}-{name}", std::process::id()),
        };
        let out = t
            .cmd(&["new-session", "-d", "-x", "120", "-y", "40", "-c"])
            .arg(cwd)
            .args(["sh", "-c", "PS1='$ ' exec sh"])
            .output()
            .expect("tmux");
        assert!(
            out.status.success(),
            "tmux: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        t
    }

    /// A session of `cols`×`rows` running `command` (via `sh -c`) alone: the reference a pane
    /// is compared with.
    pub fn running(name: &str, cwd: &Path, cols: u16, rows: u16, command: &str) -> Tmux {
        let t = Tmux {
            socket: format!("whilly-test-{}-{name}", std::process::id()),
        };
        let (x, y) = (cols.to_string(), rows.to_string());
        let out = t
            .cmd(&["new-session", "-d", "-x", &x, "-y", &y, "-c"])
            .arg(cwd)
            .args(["sh", "-c", command])
            .output()
            .expect("tmux");
        assert!(
            out.status.success(),
            "tmux: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        t
    }

    /// Resizes the window (and so its one pane).
    pub fn resize(&self, cols: u16, rows: u16) {
        let (x, y) = (cols.to_string(), rows.to_string());
        let ok = self
            .cmd(&["resize-window", "-t", "0", "-x", &x, "-y", &y])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "resize-window {cols}x{rows}");
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket, "-f", "/dev/null"]).args(args);
        c
    }

    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "0"];
        args.extend(keys);
        let ok = self.cmd(&args).status().is_ok_and(|s| s.success());
        assert!(ok, "send-keys {keys:?}");
    }

    pub fn literal(&self, text: &str) {
        let ok = self
            .cmd(&["send-keys", "-t", "0", "-l", text])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "send-keys -l {text:?}");
    }

    pub fn screen(&self) -> String {
        let out = self
            .cmd(&["capture-pane", "-p", "-t", "0"])
            .output()
            .expect("capture");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn alternate_on(&self) -> String {
        let out = self
            .cmd(&["display", "-p", "-t", "0", "#{alternate_on}"])
            .output()
            .expect("display");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Waits until the screen satisfies `pred`; fails with the last screen.
    pub fn wait(&self, what: &str, secs: u64, pred: impl Fn(&str) -> bool) -> String {
        let mut last = String::new();
        let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            wait_for(Duration::from_secs(secs), what, || {
                let s = self.screen();
                let ok = pred(&s);
                last = s.clone();
                ok.then_some(s)
            })
        }));
        match found {
            Ok(s) => s,
            Err(_) => panic!("timed out waiting for {what}; screen:\n{last}"),
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]).output();
    }
}
