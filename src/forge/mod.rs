//! Forges work comes from and goes to: GitHub issues in, pull requests out. The client speaks
//! the forge's API (`github`); the rest turns its answers into plans and a task's evidence
//! into a pull request. Depends only on `domain` and `config` types; the engine and the CLI call it.

pub mod answer;
pub(crate) mod board;
pub(crate) mod compose;
pub mod github;
pub(crate) mod import;
pub mod intake;
pub mod jira;
pub mod refs;

/// The HTTP client both forges' API clients use: named, with bounded connect and request
/// times (a hung forge must not hang a run); `timeout` bounds a request with its answer.
pub(crate) fn http_client(timeout: std::time::Duration) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .user_agent(concat!("whilly/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(timeout.min(std::time::Duration::from_secs(10)))
        .timeout(timeout)
        .build()
}
