//! An agent CLI's interactive TUI run twice at the same size, once in a whilly PTY session drawn
//! into a zoomed console pane and once in tmux, and the two screens compared row for row once the
//! model's answer is on both. Used by `claude_tui_pane.rs` (Claude Code) and `agent_tui_panes.rs`
//! (Codex, OpenCode, Gemini CLI), which differ only in how each CLI is set up.
#![allow(dead_code)]

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use whilly::engine::sessions::SessionState;
use whilly::pty::{PtySession, SpawnSpec};
use whilly::tui::action::Action;
use whilly::tui::keymap::Keymap;
use whilly::tui::model::Focus;
use whilly::tui::state::AppState;
use whilly::tui::testkit::{fixed_now, pane, plan, task};
use whilly::tui::theme::Theme;
use whilly::tui::ui::{self, FrameInfo, UiContext};

/// The size of both screens: the console pane's inner area and the tmux pane.
pub const ROWS: u16 = 30;
pub const COLS: u16 = 100;

/// One interactive run to compare.
pub struct TuiRun<'a> {
    /// The agent's name, as the pane shows it.
    pub agent: &'a str,
    /// The command with its prompt.
    pub argv: Vec<String>,
    /// The CLI's whole environment in the whilly pane (terminal variables included).
    pub env: Vec<(String, String)>,
    /// The same for the tmux run: its own home, so neither run waits on or races the other's
    /// first-run setup (OpenCode npm-installs its plugin package into its config dir at start;
    /// two installs into one dir at once left one TUI blank for 90 s in CI).
    pub tmux_env: Vec<(String, String)>,
    pub cwd: &'a Path,
    /// Where the PTY session logs its output (the replay fixture is recorded from it).
    pub log_path: PathBuf,
    /// The prompt, which must be on screen.
    pub prompt: &'a str,
    /// The scripted model's answer: both screens show it when the turn is over.
    pub answer: &'a str,
    /// The model server's log, for the failure message.
    pub server_log: &'a dyn Fn() -> String,
}

/// Runs `run` in a whilly PTY session and in tmux, both [`COLS`]x[`ROWS`], waits for the answer
/// on both, lets them settle and asserts they read the same row for row (unstable lines blanked,
/// times written as `<t>`), and that the pane is legible: prompt and answer shown, no stray
/// escapes. Returns the PTY session for the caller's own checks; the caller kills it.
pub fn pane_reads_like_tmux(run: &TuiRun) -> Arc<PtySession> {
    if Command::new("tmux").arg("-V").output().is_err() {
        panic!("tmux is needed for this comparison (apt install tmux)");
    }
    let name = run.agent;
    let mut spec = SpawnSpec::new(run.argv.clone())
        .cwd(run.cwd)
        .size(ROWS, COLS)
        .log_path(&run.log_path);
    for (k, v) in &run.env {
        spec = spec.env(k, v);
    }
    let pty = Arc::new(PtySession::spawn(spec).expect("spawn the CLI"));
    let tmux = TmuxPane::start(name, run);

    let answered = |s: &str| s.contains(run.answer);
    let both = wait_until(Duration::from_secs(90), || {
        answered(&pty.screen_text()) && answered(&tmux.screen())
    });
    let (ours, theirs) = (pane_text(&pty, name), tmux.screen());
    assert!(
        both,
        "{name} did not show the model's answer in time\n--- whilly pane ({:?})\n{ours}\n--- the pane's output, last bytes\n{}\n--- tmux\n{theirs}\n--- server\n{}",
        pty.run_state(),
        log_tail(&run.log_path),
        (run.server_log)()
    );
    // Let both settle (spinners stop, the input box is redrawn), then compare.
    let mut ours = String::new();
    let mut theirs = String::new();
    let settled = wait_until(Duration::from_secs(20), || {
        ours = pane_text(&pty, name);
        theirs = tmux.screen();
        rows(&ours) == rows(&theirs)
    });
    if std::env::var_os("WHILLY_SHOW_SCREENS").is_some() {
        eprintln!("--- {name} in a whilly pane\n{ours}\n--- {name} in tmux\n{theirs}");
    }
    assert!(
        settled,
        "{name}: the pane and tmux disagree on the stable lines\n--- whilly pane\n{ours}\n--- tmux\n{theirs}\n--- rows that differ (row: pane | tmux)\n{}",
        differing_rows(&ours, &theirs)
    );
    // Legible, not merely equal: the prompt and the answer are on screen, no stray escapes.
    assert!(ours.contains(run.prompt), "{ours}");
    assert!(ours.contains(run.answer), "{ours}");
    assert!(!ours.contains('\u{1b}') && !ours.contains("[?"), "{ours}");
    pty
}

/// The end of a PTY session's output log, escapes spelled out, for a failure message: whether
/// the CLI drew anything at all, and what it wrote last.
fn log_tail(path: &Path) -> String {
    let Ok(bytes) = std::fs::read(path) else {
        return format!("(no log at {})", path.display());
    };
    let from = bytes.len().saturating_sub(1500);
    format!(
        "{} bytes in all: {}",
        bytes.len(),
        String::from_utf8_lossy(&bytes[from..]).escape_debug()
    )
}

/// The pane's cells as text, one line per row, trailing blanks trimmed: the session drawn by the
/// console's own renderer into a zoomed pane whose inner area is [`COLS`]x[`ROWS`].
pub fn pane_text(pty: &Arc<PtySession>, agent: &str) -> String {
    let mut s = AppState::new("sqlite", fixed_now());
    s.now = fixed_now();
    s.set_data(
        plan(None, 0.0),
        vec![task(1, "AGENT-1", whilly::domain::Status::InProgress)],
        Vec::new(),
    );
    let mut p = pane(
        1,
        "AGENT-1",
        SessionState::Running,
        s.now,
        Duration::from_secs(1),
    );
    p.agent = agent.into();
    s.set_panes(vec![p]);
    s.focus = Focus::Pane(1);
    s.handle(Action::Zoom);
    let mut screens: BTreeMap<i64, Arc<PtySession>> = BTreeMap::new();
    screens.insert(1, pty.clone());
    let keymap = Keymap::default();
    let theme = Theme::default();
    let ctx = UiContext {
        keymap: &keymap,
        theme: &theme,
        screens: &screens,
    };
    // Zoomed: header 2 rows, footer 1, borders 1 each side.
    let mut term = Terminal::new(TestBackend::new(COLS + 2, ROWS + 5)).unwrap();
    let mut info = FrameInfo::default();
    term.draw(|f| info = ui::draw(f, &s, &ctx)).unwrap();
    let rect = info
        .panes
        .first()
        .map(|(_, r)| *r)
        .expect("a pane was drawn");
    assert_eq!((rect.width, rect.height), (COLS, ROWS), "pane inner size");
    let buf = term.backend().buffer();
    let mut out = String::new();
    for y in rect.y..rect.y + rect.height {
        let line: String = (rect.x..rect.x + rect.width)
            .map(|x| buf[(x, y)].symbol().to_string())
            .collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A private tmux server running the command alone in a [`COLS`]x[`ROWS`] pane.
struct TmuxPane(String);

impl TmuxPane {
    fn start(name: &str, run: &TuiRun) -> TmuxPane {
        let tmux = TmuxPane(format!("whilly-{name}-{}", std::process::id()));
        // A detached session's window is its pane: `-y` rows, with no status line taken from
        // them (checked below).
        let mut cmd = tmux.cmd();
        cmd.args([
            "new-session",
            "-d",
            "-x",
            &COLS.to_string(),
            "-y",
            &ROWS.to_string(),
            "-c",
        ])
        .arg(run.cwd)
        .arg("env");
        for (k, v) in &run.tmux_env {
            cmd.arg(format!("{k}={v}"));
        }
        cmd.args(&run.argv);
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "tmux: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let size = tmux
            .cmd()
            .args([
                "display-message",
                "-p",
                "-t",
                "0",
                "#{pane_width}x#{pane_height}",
            ])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&size.stdout).trim(),
            format!("{COLS}x{ROWS}"),
            "tmux pane size"
        );
        tmux
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.0, "-f", "/dev/null"]);
        c
    }

    fn screen(&self) -> String {
        let out = self
            .cmd()
            .args(["capture-pane", "-p", "-t", "0"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| format!("{}\n", l.trim_end()))
            .collect()
    }
}

impl Drop for TmuxPane {
    fn drop(&mut self) {
        // Gemini CLI outlives the SIGHUP of `kill-server`: its process group is killed first.
        if let Ok(out) = self
            .cmd()
            .args(["display-message", "-p", "-t", "0", "#{pane_pid}"])
            .output()
        {
            let pid = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if !pid.is_empty() {
                let _ = Command::new("kill")
                    .args(["-KILL", "--", &format!("-{pid}")])
                    .output();
            }
        }
        let _ = self.cmd().arg("kill-server").output();
    }
}

/// Kills every process whose program lies under its path when dropped: interactive Codex starts
/// an app-server daemon from a copy of itself in `CODEX_HOME` that detaches (its own session)
/// and would outlive the test.
pub struct KillUnder(pub PathBuf);

impl Drop for KillUnder {
    fn drop(&mut self) {
        let Ok(procs) = std::fs::read_dir("/proc") else {
            return;
        };
        for p in procs.flatten() {
            let Ok(pid) = p.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(cmdline) = std::fs::read(p.path().join("cmdline")) else {
                continue;
            };
            let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
            if Path::new(&*String::from_utf8_lossy(argv0)).starts_with(&self.0) {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .output();
            }
        }
    }
}

/// Lines that differ between two runs of the same program for reasons of time, not rendering:
/// spinners, elapsed seconds, token counters.
fn stable(line: &str) -> bool {
    let l = line.trim();
    !(l.is_empty()
        || l.contains("esc to interrupt")
        || l.contains("tokens")
        || l.chars().next().is_some_and(|c| "✻✽✶✳✢·*".contains(c)))
}

/// A line with elapsed times ("6.1s", "12s") written as `<t>`: two runs of one program finish
/// a turn in different times, and the line around the time is what must read the same.
fn untimed(line: &str) -> String {
    line.split(' ')
        .map(|w| {
            // "6.1s", "<1s", "2m", and a clock "02:18".
            let t = w.trim_start_matches('<');
            let duration = t.strip_suffix(['s', 'm', 'h']).is_some_and(|d| {
                d.starts_with(|c: char| c.is_ascii_digit())
                    && d.chars().all(|c| c.is_ascii_digit() || c == '.')
            });
            let clock = t.contains(':') && t.chars().all(|c| c.is_ascii_digit() || c == ':');
            if duration || clock { "<t>" } else { w }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The screen's rows for comparison, row for row: unstable lines blanked (not dropped, so a
/// row drawn one line off still shows), times written as `<t>`.
fn rows(screen: &str) -> Vec<String> {
    let mut rows: Vec<String> = screen
        .lines()
        .map(|l| if stable(l) { untimed(l) } else { String::new() })
        .collect();
    rows.resize(usize::from(ROWS), String::new());
    rows
}

fn differing_rows(ours: &str, theirs: &str) -> String {
    rows(ours)
        .iter()
        .zip(rows(theirs))
        .enumerate()
        .filter(|(_, (a, b))| *a != b)
        .map(|(i, (a, b))| format!("{:2}: {a:?} | {b:?}\n", i + 1))
        .collect()
}

fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_blank_unstable_lines_in_place_and_untime_the_rest() {
        let r = rows("a\n✻ Thinking 3s\n  took 6.1s at 02:18\n");
        assert_eq!(r.len(), usize::from(ROWS));
        assert_eq!(&r[..3], ["a", "", "  took <t> at <t>"]);
        // A row drawn one line lower differs.
        assert_ne!(rows("x\ny\n"), rows("x\n\ny\n"));
    }
}
