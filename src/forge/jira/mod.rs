//! Jira Cloud: issues read with JQL (`client`), turned into tasks (`intake`), and their text
//! moved between Atlassian Document Format and the markdown-ish plain text agents and prompts
//! need (`adf`). The engine's `jira_sync` keeps the issues in step with their tasks.

pub mod adf;
pub(crate) mod client;
pub mod intake;

pub use client::{Jira, JiraError, JiraIssue};
