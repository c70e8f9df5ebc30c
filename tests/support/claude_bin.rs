//! Where the real Claude Code CLI is for the tests that run it.

use std::path::PathBuf;

const INSTALL_HINT: &str = "the real Claude Code CLI is needed for this test and was not found.\n\
     Install it outside the repository:\n  cd /work && mkdir -p claude-cli && cd claude-cli && npm install @anthropic-ai/claude-code\n\
     or point WHILLY_CLAUDE_BIN at a `claude` binary, or set WHILLY_SKIP_REAL_AGENT=1 to skip these tests.";

/// The CLI to run, `None` when skipping was asked for; panics when it is missing otherwise.
pub fn claude_bin() -> Option<PathBuf> {
    if std::env::var("WHILLY_SKIP_REAL_AGENT").is_ok_and(|v| v == "1") {
        eprintln!("WHILLY_SKIP_REAL_AGENT=1: skipping a real Claude CLI test");
        return None;
    }
    if let Some(p) = std::env::var_os("WHILLY_CLAUDE_BIN") {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "WHILLY_CLAUDE_BIN={} is not a file; {INSTALL_HINT}",
            p.display()
        );
        return Some(p);
    }
    // Where `.ci/run` installs it, then an install beside the checkout.
    let ci_cache = std::env::var_os("WHILLY_CI_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/whilly-ci")))
        .map(|d| d.join("claude-cli/node_modules/.bin/claude"));
    for local in ci_cache
        .into_iter()
        .chain([PathBuf::from("/work/claude-cli/node_modules/.bin/claude")])
    {
        if local.is_file() {
            return Some(local);
        }
    }
    match whilly::agent::resolve_binary("claude", "") {
        Ok(p) => Some(p),
        Err(e) => panic!("{e}\n{INSTALL_HINT}"),
    }
}
