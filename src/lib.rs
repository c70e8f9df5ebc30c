//! Whilly: a terminal-first control plane for AI coding agents.
//!
//! The library holds everything; `main.rs` is a thin clap front end. See `docs/architecture.md`.

// unwrap() is refused in library code; tests may use it.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]
// The public surface is deliberate (what `main.rs`, the integration tests and the benches use);
// everything else is `pub(crate)`, so the compiler sees dead code.
#![warn(unreachable_pub)]
// Functions a reader can hold in their head: the threshold is in clippy.toml; the few longer
// ones carry an `expect` that says why.
#![warn(clippy::too_many_lines)]

pub mod agent;
pub mod bench;
pub mod cli;
pub mod config;
pub mod domain;
pub mod engine;
pub(crate) mod failpoint;
pub mod forge;
pub(crate) mod fsutil;
pub(crate) mod http;
pub(crate) mod notify;
pub mod plan;
pub mod prd;
pub(crate) mod procguard;
pub(crate) mod procinfo;
pub mod pty;
pub(crate) mod sandbox;
pub mod store;
pub mod tui;
pub mod workspace;
