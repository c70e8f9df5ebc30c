//! Jira Cloud: what Whilly needs to read issues from Jira and write back to them. For now the
//! Atlassian Document Format ([`adf`]): descriptions and comments arrive and leave as ADF trees,
//! which agents and prompts need as plain, markdown-ish text.

pub mod adf;
