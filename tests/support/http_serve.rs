//! `whilly serve --http 127.0.0.1:0` started by the real binary in a test repository, and the
//! address it printed. Builds on `engine.rs` (the including test has `mod engine`); the server
//! is killed when dropped (by its [`Running`]).
#![allow(dead_code)]

use super::engine::{Repo, Running, wait_for};
use std::time::Duration;

/// A running `whilly serve` and its base URL (`http://127.0.0.1:PORT`).
pub struct Served {
    pub running: Running,
    pub url: String,
}

/// Starts `whilly serve` on a free loopback port in `repo`, with `env` added, and waits for the
/// address it prints on stdout.
pub fn serve(repo: &Repo, env: &[(&str, &str)]) -> Served {
    let running = repo.spawn_in(&repo.repo, &["serve", "--http", "127.0.0.1:0"], env);
    let url = wait_for(Duration::from_secs(20), "the server's address", || {
        url_after(&running.stdout_now(), "")
    });
    Served { running, url }
}

/// The first `http://…` URL in `text` that follows `prefix` (`""` for any): how `serve` prints
/// its address on stdout, and `run --http` ("serving http://…") on stderr.
pub fn url_after(text: &str, prefix: &str) -> Option<String> {
    let at = text.find(&format!("{prefix}http://"))? + prefix.len();
    Some(text[at..].split_whitespace().next()?.to_string())
}
