//! The real Claude Code CLI's interactive TUI (not `-p`) inside a whilly pane renders legibly:
//! the same program at the same size, once in a whilly PTY session drawn into a console pane and
//! once in tmux, both 100x30, and the two screens read the same row for row
//! (`support/tui_compare.rs`, shared with `agent_tui_panes.rs`). The CLI talks to the local
//! scripted model server; onboarding and the trust dialog are marked done in a private config dir.

#[path = "support/claude_bin.rs"]
mod claude_bin;
#[path = "support/claude_env.rs"]
mod claude_env;
#[path = "support/engine.rs"]
mod engine;
#[path = "support/model_server.rs"]
mod model_server;
#[path = "support/tui_compare.rs"]
mod tui_compare;

use model_server::{ModelServer, Scenario};
use std::path::Path;
use tui_compare::TuiRun;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_interactive_tui_in_a_pane_reads_like_tmux() {
    let Some(bin) = claude_env::claude_bin() else {
        return;
    };
    let server = ModelServer::start(Scenario::Complete);
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let project = project.canonicalize().unwrap();
    // One config dir per run, so neither run shares the other's state.
    let env = claude_env(&server, &home.path().join("claude"));
    prepare_config(&home.path().join("claude"), &project);
    let tmux_env = claude_env(&server, &home.path().join("claude-tmux"));
    prepare_config(&home.path().join("claude-tmux"), &project);

    let pty = tui_compare::pane_reads_like_tmux(&TuiRun {
        agent: "claude",
        argv: vec![bin.to_string_lossy().to_string(), PROMPT.to_string()],
        env,
        tmux_env,
        cwd: &project,
        log_path: home.path().join("claude-pane.log"),
        prompt: PROMPT,
        answer: "Task complete.",
        server_log: &|| server.log(),
    });
    let _ = pty.kill();
    // Re-recording the replay fixture (tests/pty_replay.rs, tests/fake_agents/fixtures/claude_interactive_100x30.ans) is this test with a path to copy to.
    if let Some(to) = std::env::var_os("WHILLY_RECORD_CLAUDE_TO") {
        std::fs::copy(home.path().join("claude-pane.log"), to).unwrap();
    }
}
