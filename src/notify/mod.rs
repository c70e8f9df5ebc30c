//! Telling the operator when something needs them: a task waits for a human, the budget crosses
//! 80 % or 100 %, a task fails for good, the plan finishes.
//!
//! Three channels, each switchable under `[notifications]`: a desktop notification
//! (notify-rust) where a desktop session exists on this machine; the terminal's own
//! notification escape (OSC 9, or OSC 777 for terminals that speak that one), which travels
//! over SSH to the operator's terminal; and the bell. [`rules`] decides what deserves a notice
//! (pure); [`terminal`] builds the escape bytes (pure); [`Notifier`] sends.

pub(crate) mod rules;
pub(crate) mod terminal;

pub(crate) use rules::{Notice, NoticeKind, notices_for_events};

use crate::config::NotificationsConfig;
use std::io::Write;

/// Where this process runs, as far as notifications care.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NotifyEnv {
    /// A desktop session this process can reach (X11 or Wayland plus a session bus), and not
    /// an SSH session (a desktop there would be the remote machine's, not the operator's).
    pub desktop: bool,
    /// Inside tmux: escapes must be wrapped to pass through to the outer terminal.
    pub tmux: bool,
    /// The terminal understands OSC 777 rather than OSC 9.
    pub osc777: bool,
}

impl NotifyEnv {
    pub(crate) fn from_process() -> NotifyEnv {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let graphical = var("DISPLAY").is_some() || var("WAYLAND_DISPLAY").is_some();
        let bus = var("DBUS_SESSION_BUS_ADDRESS").is_some();
        let ssh = var("SSH_CONNECTION").is_some() || var("SSH_TTY").is_some();
        NotifyEnv {
            desktop: graphical && bus && !ssh,
            tmux: var("TMUX").is_some(),
            osc777: terminal::prefers_osc777(
                var("TERM").as_deref().unwrap_or(""),
                var("TERM_PROGRAM").as_deref().unwrap_or(""),
            ),
        }
    }
}

/// Sends notices on the configured channels.
#[derive(Debug, Clone)]
pub(crate) struct Notifier {
    cfg: NotificationsConfig,
    env: NotifyEnv,
}

impl Notifier {
    pub(crate) fn new(cfg: NotificationsConfig, env: NotifyEnv) -> Notifier {
        Notifier { cfg, env }
    }

    /// The bytes for the terminal (escape and/or bell); empty when both are off.
    pub(crate) fn terminal_bytes(&self, notice: &Notice) -> Vec<u8> {
        let mut out = Vec::new();
        if self.cfg.terminal {
            out.extend(terminal::notification(
                notice,
                self.env.osc777,
                self.env.tmux,
            ));
        }
        if self.cfg.bell && notice.kind.rings() {
            out.push(0x07);
        }
        out
    }

    /// Writes the terminal part to `out` (the console's terminal, between frames) and shows the
    /// desktop part in the background. Failures are logged: a notice is never worth an error.
    pub(crate) fn send(&self, notice: &Notice, out: &mut dyn Write) {
        let bytes = self.terminal_bytes(notice);
        if !bytes.is_empty()
            && let Err(e) = out.write_all(&bytes).and_then(|()| out.flush())
        {
            tracing::warn!("terminal notification: {e}");
        }
        if self.cfg.desktop && self.env.desktop {
            let (title, body) = (notice.title.clone(), notice.body.clone());
            std::thread::spawn(move || {
                let shown = notify_rust::Notification::new()
                    .appname("whilly")
                    .summary(&title)
                    .body(&body)
                    .show();
                if let Err(e) = shown {
                    tracing::warn!("desktop notification: {e}");
                }
            });
        }
        tracing::info!(kind = ?notice.kind, "notified: {}: {}", notice.title, notice.body);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notice() -> Notice {
        Notice {
            kind: NoticeKind::NeedsHuman,
            title: "whilly: demo".into(),
            body: "T-1 waits for you".into(),
        }
    }

    #[test]
    fn channels_follow_the_config() {
        let env = NotifyEnv::default();
        let all = Notifier::new(NotificationsConfig::default(), env.clone());
        let bytes = all.terminal_bytes(&notice());
        assert!(bytes.starts_with(b"\x1b]9;"), "{bytes:?}");
        assert_eq!(bytes.last(), Some(&0x07));
        let quiet = Notifier::new(
            NotificationsConfig {
                desktop: false,
                terminal: false,
                bell: false,
            },
            env.clone(),
        );
        assert!(quiet.terminal_bytes(&notice()).is_empty());
        let bell_only = Notifier::new(
            NotificationsConfig {
                desktop: false,
                terminal: false,
                bell: true,
            },
            env,
        );
        assert_eq!(bell_only.terminal_bytes(&notice()), b"\x07");
    }

    #[test]
    fn send_writes_the_terminal_part() {
        let n = Notifier::new(
            NotificationsConfig {
                desktop: false,
                terminal: true,
                bell: false,
            },
            NotifyEnv {
                desktop: false,
                tmux: false,
                osc777: true,
            },
        );
        let mut out = Vec::new();
        n.send(&notice(), &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\x1b]777;notify;whilly: demo;T-1 waits for you\x07"
        );
    }
}
