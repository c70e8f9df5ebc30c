//! The status page as HTML, from a [`StatusSnapshot`]. Pure. Every piece of data goes through
//! [`esc`]: task titles, notes and event payloads come from plan files, agents and forges.
//! The sections marked `data-live` are what the page's script swaps for fresh ones.

use super::snapshot::{InboxRow, PlanRow, RunningRow, StatusSnapshot, WorkerRow};
use crate::domain::Usd;
use crate::store::Event;
use std::fmt::Write;

const CSS: &str = include_str!("page.css");
const JS: &str = include_str!("page.js");
/// An event's payload is cut to this many characters in the list.
const PAYLOAD_CHARS: usize = 160;

/// Text made safe for HTML element content and quoted attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The whole page. `event_types` are the names the stream sends (an `EventSource` hears a
/// named event only with a listener for its name).
pub(crate) fn page(s: &StatusSnapshot, event_types: &[&str]) -> String {
    let types = serde_json::to_string(event_types).unwrap_or_else(|_| "[]".into());
    let mut h = String::with_capacity(16 * 1024);
    let _ = write!(
        h,
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>whilly · status</title>
<style>{CSS}</style></head>
<body data-last-event="{last}" data-event-types="{types}">
<header><h1>whilly</h1><span id="conn" class="conn">static</span>
<span class="meta">v{version} · {backend} · <time data-at="{gen}">{gen_text}</time> UTC</span></header>
<main>
"#,
        last = s.last_event_id,
        types = esc(&types),
        version = esc(s.version),
        backend = esc(&s.backend),
        gen = esc(&s.generated_at.to_rfc3339()),
        gen_text = s.generated_at.format("%Y-%m-%d %H:%M:%S"),
    );
    section(&mut h, "plans", "Plans", s.plans.len(), |h| {
        plans(h, &s.plans)
    });
    section(&mut h, "running", "Running", s.running.len(), |h| {
        running(h, &s.running)
    });
    section(&mut h, "inbox", "Inbox", s.inbox.len(), |h| {
        inbox(h, &s.inbox)
    });
    section(&mut h, "workers", "Workers", s.workers.len(), |h| {
        workers(h, &s.workers)
    });
    section(&mut h, "events", "Events", s.events.len(), |h| {
        events(h, &s.events)
    });
    let _ = write!(h, "</main>\n<script>{JS}</script>\n</body></html>\n");
    h
}

fn section(h: &mut String, id: &str, title: &str, n: usize, body: impl FnOnce(&mut String)) {
    let _ = write!(
        h,
        r#"<section id="{id}" data-live><h2>{title} <span class="n">{n}</span></h2>"#
    );
    body(h);
    h.push_str("</section>\n");
}

fn empty(h: &mut String, what: &str) {
    let _ = write!(h, r#"<p class="empty">{}</p>"#, esc(what));
}

fn plans(h: &mut String, rows: &[PlanRow]) {
    if rows.is_empty() {
        return empty(h, "No plans yet: whilly plan import PLAN.json");
    }
    for p in rows {
        let pct = (p.done * 100).checked_div(p.total).unwrap_or(0);
        let _ = write!(
            h,
            r#"<div class="plan" data-plan="{id}"><div class="row"><b>{id}</b> <span class="dim">{project}</span>{paused}<span class="right">{done}/{total} done</span></div>
<div class="bar" role="progressbar" aria-valuenow="{pct}" aria-valuemin="0" aria-valuemax="100"><i style="width:{pct}%"></i></div><div class="chips">"#,
            id = esc(&p.id),
            project = esc(&p.project),
            paused = if p.paused {
                r#" <span class="badge warn">paused</span>"#
            } else {
                ""
            },
            done = p.done,
            total = p.total,
        );
        for (state, n) in &p.states {
            let _ = write!(
                h,
                r#"<span class="chip s-{cls}">{name} {n}</span>"#,
                cls = state.as_str().to_ascii_lowercase(),
                name = state.as_str(),
            );
        }
        h.push_str("</div>");
        let budget = match (p.budget_usd, p.remaining_usd) {
            (Some(b), Some(r)) => format!(
                "budget: {} spent of {} · {} reserved · <b>{} left</b>",
                p.spent_usd, b, p.reserved_usd, r
            ),
            _ => format!("no budget · {} spent", p.spent_usd),
        };
        let _ = write!(h, r#"<div class="budget">{budget}</div></div>"#);
    }
}

fn running(h: &mut String, rows: &[RunningRow]) {
    if rows.is_empty() {
        return empty(h, "Nothing is running.");
    }
    h.push_str(r#"<table><thead><tr><th>Task</th><th>Agent</th><th>Attempt</th><th>Elapsed</th><th>Cost</th><th>Worker</th></tr></thead><tbody>"#);
    for r in rows {
        let _ = write!(
            h,
            r#"<tr data-task="{plan}/{task}"><td data-label="Task"><b>{task}</b> <span class="dim">{plan}</span> <span class="badge">{status}</span><div class="title">{title}</div></td><td data-label="Agent">{agent}</td><td data-label="Attempt">{attempt}</td><td data-label="Elapsed">{elapsed}</td><td data-label="Cost">{cost}</td><td data-label="Worker">{worker}</td></tr>"#,
            plan = esc(&r.plan_id),
            task = esc(&r.task_id),
            status = r.status.as_str(),
            title = esc(&r.title),
            agent = esc(&r.agent),
            attempt = esc(&r.attempt),
            elapsed = ticking(r.since.map(|s| s.to_rfc3339()), r.elapsed_secs),
            cost = money(r.cost_usd),
            worker = esc(r.worker_id.as_deref().unwrap_or("-")),
        );
    }
    h.push_str("</tbody></table>");
}

fn inbox(h: &mut String, rows: &[InboxRow]) {
    if rows.is_empty() {
        return empty(h, "Nothing waits for a human.");
    }
    h.push_str("<ul class=\"list\">");
    for r in rows {
        let _ = write!(
            h,
            r#"<li data-task="{plan}/{task}"><span class="badge warn">{label}</span> <b>{task}</b> <span class="dim">{plan}</span><div class="title">{title}</div><div class="note">{note}</div></li>"#,
            plan = esc(&r.plan_id),
            task = esc(&r.task_id),
            label = esc(r.label),
            title = esc(&r.title),
            note = esc(&r.note),
        );
    }
    h.push_str("</ul>");
}

fn workers(h: &mut String, rows: &[WorkerRow]) {
    if rows.is_empty() {
        return empty(h, "No workers registered.");
    }
    h.push_str(r#"<table><thead><tr><th>Worker</th><th>Host</th><th>Slots</th><th>Heartbeat</th></tr></thead><tbody>"#);
    for w in rows {
        let _ = write!(
            h,
            r#"<tr><td data-label="Worker"><span class="dot {state}" title="{state}"></span>{id}</td><td data-label="Host">{host}</td><td data-label="Slots">{slots}</td><td data-label="Heartbeat">{age} ago · {state}</td></tr>"#,
            state = if w.online { "online" } else { "offline" },
            id = esc(&w.id),
            host = esc(&w.host),
            slots = w.slots,
            age = ticking(
                Some(w.heartbeat_at.to_rfc3339()),
                Some(w.heartbeat_age_secs)
            ),
        );
    }
    h.push_str("</tbody></table>");
}

fn events(h: &mut String, rows: &[Event]) {
    h.push_str(r#"<ol id="event-list" class="events">"#);
    for e in rows {
        h.push_str(&event_item(e));
    }
    h.push_str("</ol>");
    if rows.is_empty() {
        empty(h, "No events yet.");
    }
}

/// One event of the list (the page's script builds the same from a streamed one).
pub(crate) fn event_item(e: &Event) -> String {
    let mut subject = [e.plan_id.as_deref(), e.task_id.as_deref()]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("/");
    if let (Some(from), Some(to)) = (e.from_status, e.to_status) {
        subject.push_str(&format!(" {} → {}", from.as_str(), to.as_str()));
    }
    format!(
        r#"<li data-id="{id}"><time title="{ts}">{time}</time> <b>{kind}</b> <span class="subj">{subject}</span> <code>{payload}</code></li>"#,
        id = e.id,
        ts = esc(&e.ts.to_rfc3339()),
        time = e.ts.format("%H:%M:%S"),
        kind = esc(&e.event_type),
        subject = esc(&subject),
        payload = esc(&payload_text(&e.payload)),
    )
}

/// A payload in one short line; nothing for an empty one.
fn payload_text(v: &serde_json::Value) -> String {
    let text = match v {
        serde_json::Value::Null => return String::new(),
        serde_json::Value::Object(m) if m.is_empty() => return String::new(),
        v => v.to_string(),
    };
    if text.chars().count() <= PAYLOAD_CHARS {
        return text;
    }
    let cut: String = text.chars().take(PAYLOAD_CHARS - 1).collect();
    format!("{cut}…")
}

/// A duration the page's script keeps counting from `since`.
fn ticking(since: Option<String>, secs: Option<i64>) -> String {
    match (since, secs) {
        (Some(at), Some(s)) => format!(
            r#"<span data-since="{}">{}</span>"#,
            esc(&at),
            duration_text(s)
        ),
        _ => "-".into(),
    }
}

fn money(u: Usd) -> String {
    esc(&u.to_string())
}

/// `42s`, `3m 05s`, `1h 02m`, `2d 03h` (the script's `age` says the same).
pub(crate) fn duration_text(secs: i64) -> String {
    let s = secs.max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        3600..86400 => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {:02}h", s / 86400, s % 86400 / 3600),
    }
}
