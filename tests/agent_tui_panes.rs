//! The real Codex, OpenCode and Gemini CLIs' interactive TUIs (not `exec` / `run` / `-p`) inside a
//! whilly pane render legibly: the same program at the same size, once in a whilly PTY session
//! drawn into a console pane and once in tmux (both 100x30), and the two screens read the same
//! row for row (`support/tui_compare.rs`, shared with `claude_tui_pane.rs`). Each CLI talks to the scripted
//! model server in its own wire API (`support/wire_server.rs`), configured offline as in
//! `support/wire_cases.rs`, plus what its interactive mode needs to skip first-run dialogs. The
//! terminal queries each TUI sends (cursor position, colours, device attributes) are answered by
//! the PTY session; the test checks that some were.

#[path = "support/tui_compare.rs"]
mod tui_compare;
#[path = "support/wire_cases.rs"]
mod wire_cases;

use std::path::Path;
use std::process::Command;
use tui_compare::{KillUnder, TuiRun};
use wire_cases::Agent;
use wire_cases::wire_server::{Scenario, WireServer};

const PROMPT: &str = "say hello";
/// The scripted model's answer (`Scenario::Complete`).
const ANSWER: &str = "Task complete.";

/// What the interactive mode needs beyond the headless setup, and its argv with the prompt.
fn interactive(
    agent: Agent,
    home: &Path,
    project: &Path,
    bin: &Path,
) -> (Vec<String>, Vec<(String, String)>) {
    let bin = bin.to_string_lossy().to_string();
    match agent {
        Agent::Codex => {
            // The folder is trusted and the update check is off, so no dialog comes first.
            let config = home.join(".codex/config.toml");
            let mut body = std::fs::read_to_string(&config).unwrap();
            body = format!(
                "check_for_update_on_startup = false\n{body}\n[projects.{:?}]\ntrust_level = \"trusted\"\n",
                project.display().to_string()
            );
            std::fs::write(&config, body).unwrap();
            (vec![bin, PROMPT.into()], Vec::new())
        }
        Agent::OpenCode => (vec![bin, "--prompt".into(), PROMPT.into()], Vec::new()),
        Agent::Gemini => (
            vec![
                bin,
                "-m".into(),
                "gemini-2.5-pro".into(),
                "-i".into(),
                PROMPT.into(),
            ],
            vec![("GEMINI_CLI_TRUST_WORKSPACE".into(), "true".into())],
        ),
    }
}

fn pane_reads_like_tmux(agent: Agent) {
    let Some(bin) = agent.bin() else {
        return;
    };
    let name = agent.name();
    let server = WireServer::start(agent.wire(), Scenario::Complete);
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let _reaper = KillUnder(root.clone());
    // The project is outside both homes, so both screens name it by the same absolute path.
    let project = root.join("project");
    std::fs::create_dir_all(&project).unwrap();
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&project)
        .status()
        .unwrap();
    assert!(git.success(), "git init");
    // One home per run: two first runs, neither sharing the other's config or caches.
    let run_env = |home: &Path| {
        std::fs::create_dir_all(home).unwrap();
        let mut env = agent.setup(home, &server);
        let (argv, extra) = interactive(agent, home, &project, &bin);
        env.extend(extra);
        env.push(("TERM".into(), "xterm-256color".into()));
        env.push(("COLORTERM".into(), "truecolor".into()));
        (argv, env)
    };
    let (argv, env) = run_env(&root.join("pane-home"));
    let (_, tmux_env) = run_env(&root.join("tmux-home"));
    let pty = tui_compare::pane_reads_like_tmux(&TuiRun {
        agent: name,
        argv,
        env,
        tmux_env,
        cwd: &project,
        log_path: root.join(format!("{name}-pane.log")),
        prompt: PROMPT,
        answer: ANSWER,
        server_log: &|| server.log(),
    });
    let queries = pty.with_emulator(|e| e.queries_answered());
    if std::env::var_os("WHILLY_SHOW_SCREENS").is_some() {
        eprintln!("{name}: {queries} terminal queries answered");
    }
    assert!(
        queries > 0,
        "{name} sent no terminal query that was answered"
    );
    let _ = pty.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_interactive_tui_in_a_pane_reads_like_tmux() {
    pane_reads_like_tmux(Agent::Codex);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_interactive_tui_in_a_pane_reads_like_tmux() {
    pane_reads_like_tmux(Agent::OpenCode);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_interactive_tui_in_a_pane_reads_like_tmux() {
    pane_reads_like_tmux(Agent::Gemini);
}
