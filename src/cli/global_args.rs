//! The flags every command takes: which repository, which queue, configuration overrides. A leaf,
//! so the context and the shell completion read them without the whole command line.

use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args, Clone)]
pub struct GlobalArgs {
    /// Repository to work on (default: the git repository containing the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    pub repo: Option<PathBuf>,
    /// Queue database URL (`sqlite:PATH` or `postgres://…`); overrides config and WHILLY_DATABASE_URL.
    #[arg(long, global = true, value_name = "URL")]
    pub database_url: Option<String>,
    /// Override a config value for this run, e.g. `-c queue.lease_secs=60` (repeatable).
    #[arg(short = 'c', long = "set", global = true, value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
}
