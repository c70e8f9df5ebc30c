//! Where the real agent CLIs are for the tests that run them (Claude Code, Codex, OpenCode,
//! Gemini CLI). `.ci/run` installs each with npm into `~/.cache/whilly-ci/<name>-cli` and exports
//! `WHILLY_<NAME>_BIN`; `WHILLY_SKIP_REAL_AGENT=1` skips every such test, nothing else does.

#![allow(dead_code)]

use std::path::PathBuf;

/// One real agent CLI: its binary name, npm package and the variable that overrides its path.
#[derive(Debug, Clone, Copy)]
pub struct RealCli {
    pub bin: &'static str,
    pub npm: &'static str,
    pub env: &'static str,
}

pub const CLAUDE: RealCli = RealCli {
    bin: "claude",
    npm: "@anthropic-ai/claude-code",
    env: "WHILLY_CLAUDE_BIN",
};
pub const CODEX: RealCli = RealCli {
    bin: "codex",
    npm: "@openai/codex",
    env: "WHILLY_CODEX_BIN",
};
pub const OPENCODE: RealCli = RealCli {
    bin: "opencode",
    npm: "opencode-ai",
    env: "WHILLY_OPENCODE_BIN",
};
pub const GEMINI: RealCli = RealCli {
    bin: "gemini",
    npm: "@google/gemini-cli",
    env: "WHILLY_GEMINI_BIN",
};

fn install_hint(cli: RealCli) -> String {
    format!(
        "the real {bin} CLI is needed for this test and was not found.\n\
         Install it outside the repository (as .ci/run does):\n  \
         npm install --prefix ~/.cache/whilly-ci/{bin}-cli {npm}\n\
         or point {env} at a `{bin}` binary, or set WHILLY_SKIP_REAL_AGENT=1 to skip these tests.",
        bin = cli.bin,
        npm = cli.npm,
        env = cli.env
    )
}

/// The CLI to run, `None` when skipping was asked for; panics when it is missing otherwise.
pub fn agent_bin(cli: RealCli) -> Option<PathBuf> {
    if std::env::var("WHILLY_SKIP_REAL_AGENT").is_ok_and(|v| v == "1") {
        eprintln!(
            "WHILLY_SKIP_REAL_AGENT=1: skipping a real {} CLI test",
            cli.bin
        );
        return None;
    }
    if let Some(p) = std::env::var_os(cli.env) {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "{}={} is not a file; {}",
            cli.env,
            p.display(),
            install_hint(cli)
        );
        return Some(p);
    }
    // Where `.ci/run` installs it, then an install beside the checkout.
    let rel = format!("{0}-cli/node_modules/.bin/{0}", cli.bin);
    let ci_cache = std::env::var_os("WHILLY_CI_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/whilly-ci")))
        .map(|d| d.join(&rel));
    for local in ci_cache
        .into_iter()
        .chain([PathBuf::from("/work").join(&rel)])
    {
        if local.is_file() {
            return Some(local);
        }
    }
    match whilly::agent::resolve_binary(cli.bin, "") {
        Ok(p) => Some(p),
        Err(e) => panic!("{e}\n{}", install_hint(cli)),
    }
}
