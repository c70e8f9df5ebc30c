//! What can go wrong talking to GitHub, each saying what to do. Never holds the token.

use super::token::TokenSource;

#[derive(Debug, thiserror::Error)]
pub enum GitHubError {
    #[error(
        "no GitHub token was found: set WHILLY_GITHUB_TOKEN, or [github] token in whilly.toml (e.g. \"keyring:whilly/github.token\" after `whilly config set github.token --secret`), or log in with `gh auth login`"
    )]
    NoToken,
    #[error(
        "the GitHub token from {token} was refused (401 {message}): check that it is valid and not expired, or set another with WHILLY_GITHUB_TOKEN"
    )]
    Unauthorized { token: TokenSource, message: String },
    #[error("{what} not found (or the token from {token} cannot see it)")]
    NotFound { what: String, token: TokenSource },
    #[error("cannot reach GitHub at {host} ({request}): {detail}")]
    Network {
        host: String,
        /// `GET /repos/o/r/issues`: the request that failed.
        request: String,
        detail: String,
    },
    #[error(
        "GitHub's rate limit is spent until {until} (local time), longer than [github] max_wait; try again then"
    )]
    RateLimited { until: String },
    #[error("GitHub at {host} answered {status} to {method} {path}: {message}")]
    Api {
        host: String,
        status: u16,
        method: String,
        path: String,
        message: String,
    },
    #[error("GitHub's GraphQL API refused the request: {}", messages.join("; "))]
    Graphql { messages: Vec<String> },
    #[error("GitHub's answer to {what} did not have the expected shape: {detail}")]
    BadAnswer { what: String, detail: String },
    /// Adding columns cleared every card's column (GitHub replaces the whole option list) and
    /// some could not be put back.
    #[error(
        "board {board}: added the column(s) {added}, which GitHub does by replacing every column, so every card lost its column; {reset} card(s) were put back, {} could not be: {}. Set those by hand on the board",
        lost.len(),
        lost.join("; ")
    )]
    CardsNotReset {
        board: String,
        added: String,
        reset: usize,
        /// `owner/repo#N → Column (why)`, one per card.
        lost: Vec<String>,
    },
}

impl GitHubError {
    /// 4 for what is wrong with the environment (token, network), 1 for bad input.
    pub fn exit_code(&self) -> i32 {
        match self {
            GitHubError::NoToken
            | GitHubError::Unauthorized { .. }
            | GitHubError::Network { .. }
            | GitHubError::RateLimited { .. } => crate::domain::exit_codes::ENVIRONMENT,
            _ => 1,
        }
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, GitHubError::NotFound { .. })
    }

    /// Worth trying again later (the work is kept meanwhile).
    pub fn is_transient(&self) -> bool {
        match self {
            GitHubError::Network { .. } | GitHubError::RateLimited { .. } => true,
            GitHubError::Api { status, .. } => *status >= 500,
            _ => false,
        }
    }
}
