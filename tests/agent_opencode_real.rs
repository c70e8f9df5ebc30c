//! The real OpenCode (npm opencode-ai) against a scripted model server speaking its own wire API: our argv
//! per permission mode, its own tools writing in a real git repository, our parser and pane
//! transcript on its real output, and `whilly run` with it as the agent (see
//! `support/wire_cases.rs`).
//!
//! The binary comes from `WHILLY_OPENCODE_BIN`, the install `.ci/run` makes
//! (`~/.cache/whilly-ci/opencode-cli`), or `opencode` on PATH. Without one these tests fail (set
//! `WHILLY_SKIP_REAL_AGENT=1` to skip them).

#[path = "support/wire_cases.rs"]
mod wire_cases;

use wire_cases::Agent::OpenCode;

#[test]
fn writes_with_its_own_tool_parses_prices_and_renders_a_transcript() {
    wire_cases::writes_parses_prices_and_renders(OpenCode);
}

#[test]
fn read_only_prevents_writes() {
    wire_cases::read_only_prevents_writes(OpenCode);
}

#[test]
fn a_task_runs_end_to_end_and_lands() {
    wire_cases::task_lands(OpenCode);
}

#[test]
fn auth_error_fails_at_once_with_the_clis_message() {
    wire_cases::auth_error_fails_at_once(OpenCode);
}

#[test]
fn rate_limited_once_is_retried_then_done() {
    wire_cases::overload_retried_then_done(OpenCode, 429);
}

#[test]
fn hanging_provider_is_killed_at_the_task_timeout() {
    wire_cases::hang_is_killed_at_the_timeout(OpenCode);
}

#[test]
fn task_budget_stops_it_mid_run() {
    wire_cases::task_budget_stops_the_agent_mid_run(OpenCode);
}

#[test]
fn its_project_root_is_the_task_worktree_in_the_default_location() {
    wire_cases::project_root_is_the_task_worktree(OpenCode);
}
