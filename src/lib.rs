//! Whilly: a terminal-first control plane for AI coding agents.
//!
//! The library holds everything; `main.rs` is a thin clap front end. See `docs/architecture.md`.

// unwrap() is refused in library code; tests may use it.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod agent;
pub mod bench;
pub mod cli;
pub mod config;
pub mod domain;
pub mod engine;
pub mod failpoint;
pub mod forge;
pub mod fsutil;
pub mod http;
pub mod notify;
pub mod plan;
pub mod prd;
pub mod procguard;
pub mod procinfo;
pub mod pty;
pub mod sandbox;
pub mod store;
pub mod tui;
pub mod workspace;
