//! `whilly events`: print the audit trail, optionally following it.

use super::args::EventsArgs;
use super::context::Context;
use super::exit::{self, Interrupted};
use crate::store::{Event, EventFilter};
use std::io::Write;
use std::time::Duration;

pub(crate) async fn run(ctx: &Context, args: EventsArgs) -> anyhow::Result<i32> {
    let store = ctx.store().await?;
    let mut filter = EventFilter {
        plan_id: args.plan.clone(),
        task_id: args.task.clone(),
        ..EventFilter::default()
    };
    let mut events = store.events(&filter).await?;
    if let Some(n) = args.last {
        let n = n.max(0) as usize;
        if events.len() > n {
            events.drain(..events.len() - n);
        }
    }
    let mut out = std::io::stdout().lock();
    for e in &events {
        writeln!(out, "{}", format_event(e, args.json))?;
    }
    out.flush()?;
    drop(out);
    if !args.follow {
        return Ok(exit::OK);
    }
    filter.after_id = events.last().map(|e| e.id).or(Some(0));
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => return Err(Interrupted.into()),
            _ = store.wait_for_work(Duration::from_millis(250)) => {}
        }
        let new = store.events(&filter).await?;
        if let Some(last) = new.last() {
            filter.after_id = Some(last.id);
        }
        let mut out = std::io::stdout().lock();
        for e in &new {
            writeln!(out, "{}", format_event(e, args.json))?;
        }
        out.flush()?;
    }
}

/// One event per line: its JSON, or a readable line with what matters
/// ([`crate::engine::trail::event_line`]).
pub(crate) fn format_event(e: &Event, json: bool) -> String {
    if json {
        return serde_json::to_string(e).unwrap_or_default();
    }
    crate::engine::trail::event_line(e)
}
