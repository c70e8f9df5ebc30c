//! `whilly tui [same args as run]`: the plan run with the operator console on the terminal
//! (`crate::tui`). Without a terminal (piped, CI) or with `--headless` it is the headless run.

use super::args::RunArgs;
use super::context::Context;

pub async fn run(ctx: &Context, args: RunArgs) -> anyhow::Result<i32> {
    crate::tui::command::run(ctx, args).await
}
