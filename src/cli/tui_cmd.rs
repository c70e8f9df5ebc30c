//! `whilly tui [same args as run]`: the plan run with the operator console on the terminal
//! (`crate::tui`). Without a terminal (piped, CI: `tui::terminal::available`) or with
//! `--headless` it is the headless run.

use super::args::RunArgs;
use super::context::Context;
use super::run_cmd;
use crate::engine::progress::summary_line;
use crate::engine::sessions::SessionRegistry;
use crate::tui::app::{self, Background, ConsoleOptions};
use crate::tui::terminal::TerminalGuard;
use std::io::Write;

/// `whilly run`: the console on a terminal (`tui::terminal::available`) unless `--headless`;
/// headless otherwise. With `--http`, the HTTP surface beside it for the run's length.
pub(crate) async fn run_interactive(ctx: &Context, args: RunArgs) -> anyhow::Result<i32> {
    let _http = match &args.http {
        Some(addr) => Some(super::serve_cmd::beside(ctx, addr).await?),
        None => None,
    };
    run(ctx, args).await
}

pub(crate) async fn run(ctx: &Context, args: RunArgs) -> anyhow::Result<i32> {
    if run_cmd::headless(ctx, &args) || !crate::tui::terminal::available() {
        return run_cmd::run(ctx, args).await;
    }
    let cfg = ctx.config()?;
    // Bad `[keys]` are refused before anything is imported or started.
    let mut opts = ConsoleOptions::from_env(&cfg)?;
    opts.background = crate::tui::detach::Launcher::from_env().map(|launcher| Background {
        launcher,
        log_dir: ctx.state_dir().join("logs"),
    });
    let store = ctx.store().await?;
    // A refused plan file prints its problems on the normal screen, before the console starts.
    let plan_id = match run_cmd::resolve_plan(ctx, &store, &args).await? {
        Ok(id) => id,
        Err(code) => return Ok(code),
    };
    let plan = store.get_plan(&plan_id).await?;
    let report_store = store.clone();
    let report_after = super::report_cmd::run_start(&store).await;
    // The console appears at once (the plan in its header); a large plan's tasks follow when
    // loaded.
    let sessions = SessionRegistry::new();
    let (guard, mut terminal) = TerminalGuard::enter(sessions.clone())
        .map_err(|e| anyhow::anyhow!("cannot take over the terminal: {e}"))?;
    if let Err(e) = app::draw_splash(&mut terminal, &opts, plan, store.info().backend) {
        tracing::warn!("first frame: {e}");
    }
    let setup =
        match run_cmd::prepare_run_in(ctx, &args, store, plan_id.clone(), sessions, true).await {
            Ok(s) => s,
            Err(e) => {
                // The terminal is restored before the error is printed.
                drop(guard);
                return Err(e);
            }
        };
    let outcome = app::run(setup, opts, guard, terminal).await?;
    let mut out = std::io::stdout().lock();
    match (&outcome.summary, &outcome.engine_error) {
        (Some(s), _) => {
            writeln!(out, "{}", summary_line(&plan_id, s))?;
            out.flush()?;
            drop(out);
            super::report_cmd::write_run_report(ctx, &report_store, &plan_id, report_after).await;
            Ok(s.exit_code)
        }
        (None, Some(e)) => Err(anyhow::anyhow!("the engine stopped: {e}")),
        (None, None) => Err(anyhow::anyhow!(
            "the engine did not report how the run ended"
        )),
    }
}
