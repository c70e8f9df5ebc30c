//! The GitHub REST and GraphQL client: token resolution ([`token`]), GitHub's rate limits
//! ([`pace`]), typed answers ([`types`]), and the issue-level operations intake and delivery
//! use ([`issues`]); every GraphQL document it sends is in [`graphql`].

mod client;
mod error;
pub mod graphql;
pub(crate) mod issues;
pub(crate) mod pace;
pub mod project;
pub(crate) mod token;
pub(crate) mod types;

pub use client::{GitHub, GitHubOptions, next_link, rate_limit_wait};
pub use error::GitHubError;
pub use project::{Board, Card, ColumnsAdded};
pub use token::TokenSource;
pub use types::{Comment, Issue, NewPull, Opened, PrState, PullRequest, Repo};
