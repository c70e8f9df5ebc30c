//! The real Claude Code CLI's interactive TUI (not `-p`) inside a whilly pane renders legibly:
//! the same program at the same size, once in a whilly PTY session drawn into a console pane and
//! once in tmux, and the two screens read the same. The CLI talks to the local scripted model
//! server; onboarding and the trust dialog are marked done in a private config dir.

#[path = "support/claude_bin.rs"]
mod claude_bin;
#[path = "support/claude_env.rs"]
mod claude_env;
#[path = "support/engine.rs"]
mod engine;
#[path = "support/model_server.rs"]
mod model_server;

use model_server::{ModelServer, Scenario};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use whilly::engine::sessions::SessionState;
use whilly::pty::{PtySession, SpawnSpec};
use whilly::tui::action::Action;
use whilly::tui::keymap::Keymap;
use whilly::tui::state::{AppState, Focus};
use whilly::tui::testkit::{fixed_now, pane, plan, task};
use whilly::tui::theme::Theme;
use whilly::tui::ui::{self, FrameInfo, UiContext};

const ROWS: u16 = 30;
const COLS: u16 = 100;
const PROMPT: &str = "say hello";

/// The CLI's environment: the model server, a throwaway key, a private config dir.
fn claude_env(server: &ModelServer, config_dir: &Path) -> Vec<(String, String)> {
    vec![
        ("ANTHROPIC_BASE_URL".into(), server.base_url()),
        ("ANTHROPIC_API_KEY".into(), "test-key".into()),
        ("DISABLE_AUTOUPDATER".into(), "1".into()),
        (
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(),
            "1".into(),
        ),
        ("CLAUDE_CONFIG_DIR".into(), config_dir.display().to_string()),
        ("TERM".into(), "xterm-256color".into()),
        ("COLORTERM".into(), "truecolor".into()),
    ]
}

fn prepare_config(config_dir: &Path, project: &Path) {
    std::fs::create_dir_all(config_dir).unwrap();
    let cfg = serde_json::json!({
        "hasCompletedOnboarding": true,
        "theme": "dark",
        // The CLI asks once whether to use a key from the environment; answered here.
        "customApiKeyResponses": { "approved": ["test-key"], "rejected": [] },
        "projects": { project.display().to_string(): { "hasTrustDialogAccepted": true } },
    });
    std::fs::write(config_dir.join(".claude.json"), cfg.to_string()).unwrap();
}

/// The pane's cells as text, one line per row, trailing blanks trimmed.
fn pane_text(pty: &Arc<PtySession>) -> String {
    let mut s = AppState::new("sqlite", fixed_now());
    s.now = fixed_now();
    s.set_data(
        plan(None, 0.0),
        vec![task(1, "CLAUDE-1", whilly::domain::Status::InProgress)],
        Vec::new(),
    );
    let mut p = pane(
        1,
        "CLAUDE-1",
        SessionState::Running,
        s.now,
        Duration::from_secs(1),
    );
    p.agent = "claude".into();
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

struct Tmux(String);

impl Tmux {
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

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").output();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_interactive_tui_in_a_pane_reads_like_tmux() {
    let Some(bin) = claude_env::claude_bin() else {
        return;
    };
    if Command::new("tmux").arg("-V").output().is_err() {
        panic!("tmux is needed for this comparison (apt install tmux)");
    }
    let server = ModelServer::start(Scenario::Complete);
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let project = project.canonicalize().unwrap();
    let env = claude_env(&server, &home.path().join("claude"));
    prepare_config(&home.path().join("claude"), &project);

    // In whilly: a PTY session of the console's size.
    let mut spec = SpawnSpec::new([bin.to_string_lossy().to_string(), PROMPT.to_string()])
        .cwd(&project)
        .size(ROWS, COLS)
        .log_path(home.path().join("claude-pane.log"));
    for (k, v) in &env {
        spec = spec.env(k, v);
    }
    let pty = Arc::new(PtySession::spawn(spec).expect("spawn claude"));

    // In tmux: the same command, same size (31 rows: one is tmux's status line).
    let tmux = Tmux(format!("whilly-claude-{}", std::process::id()));
    let mut cmd = tmux.cmd();
    cmd.args([
        "new-session",
        "-d",
        "-x",
        &COLS.to_string(),
        "-y",
        &(ROWS + 1).to_string(),
        "-c",
    ])
    .arg(&project)
    .arg("env");
    for (k, v) in &env {
        cmd.arg(format!("{k}={v}"));
    }
    cmd.arg(&bin).arg(PROMPT);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "tmux: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let answered = |s: &str| s.contains("Task complete.");
    let both = wait_until(Duration::from_secs(90), || {
        answered(&pty.screen_text()) && answered(&tmux.screen())
    });
    let (ours, theirs) = (pane_text(&pty), tmux.screen());
    assert!(
        both,
        "the CLI did not show the model's answer in time\n--- whilly pane\n{ours}\n--- tmux\n{theirs}\n--- server\n{}",
        server.log()
    );
    // Let both settle (the spinner stops, the input box is redrawn), then compare.
    let mut ours = String::new();
    let mut theirs = String::new();
    let settled = wait_until(Duration::from_secs(20), || {
        ours = pane_text(&pty);
        theirs = tmux.screen();
        let a: Vec<&str> = ours.lines().filter(|l| stable(l)).collect();
        let b: Vec<&str> = theirs.lines().filter(|l| stable(l)).collect();
        a == b
    });
    if std::env::var_os("WHILLY_SHOW_SCREENS").is_some() {
        eprintln!("--- whilly pane\n{ours}\n--- tmux\n{theirs}");
    }
    assert!(
        settled,
        "the pane and tmux disagree on the stable lines\n--- whilly pane\n{ours}\n--- tmux\n{theirs}"
    );
    // Legible, not merely equal: the prompt and the answer are on screen, no stray escapes.
    assert!(ours.contains(PROMPT), "{ours}");
    assert!(ours.contains("Task complete."), "{ours}");
    assert!(!ours.contains('\u{1b}') && !ours.contains("[?"), "{ours}");
    let _ = pty.kill();
    // Re-recording the replay fixture (tests/pty_replay.rs, tests/fake_agents/fixtures/claude_interactive_100x30.ans) is this test with a path to copy to.
    if let Some(to) = std::env::var_os("WHILLY_RECORD_CLAUDE_TO") {
        std::fs::copy(home.path().join("claude-pane.log"), to).unwrap();
    }
}
