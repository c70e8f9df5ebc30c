//! Checks that need more than types: ranges, cross-field rules, regexes that must compile.
//! Pure: returns (dotted key, message) pairs; the loader attaches where each value came from.

use super::model::{Backend, Config, TEMPLATE_PLACEHOLDERS};
use super::schema::join_key;

#[expect(
    clippy::too_many_lines,
    reason = "every key of the configuration is checked in one place, in file order, so the messages come out in the order the operator reads the file"
)]
pub(super) fn check(config: &Config) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut bad = |key: &str, msg: String| out.push((key.to_string(), msg));

    // Upper bounds: a value past these is a typo, and some would overflow the store's
    // timestamps (a lease of i64::MAX seconds made every later read "corrupt").
    const HOUR: u64 = 3_600;
    const WEEK: u64 = 7 * 24 * HOUR;
    const YEAR: u64 = 365 * 24 * HOUR;
    let q = &config.queue;
    let bounds: [(&str, u64, u64); 23] = [
        (
            "logging.attempt_log_max_mb",
            config.logging.attempt_log_max_mb,
            1 << 20,
        ),
        (
            "http.max_connections",
            u64::from(config.http.max_connections),
            4_096,
        ),
        (
            "http.header_timeout_secs",
            config.http.header_timeout_secs,
            600,
        ),
        ("queue.heartbeat_secs", q.heartbeat_secs, HOUR),
        ("queue.lease_secs", q.lease_secs, WEEK),
        ("queue.reaper_interval_secs", q.reaper_interval_secs, HOUR),
        ("queue.poll_interval_ms", q.poll_interval_ms, HOUR * 1000),
        ("queue.notify_debounce_ms", q.notify_debounce_ms, 60_000),
        (
            "queue.default_max_attempts",
            u64::from(q.default_max_attempts),
            1_000,
        ),
        ("queue.outage_secs", q.outage_secs, WEEK),
        ("queue.worker_offline_secs", q.worker_offline_secs, WEEK),
        ("run.parallel", u64::from(config.run.parallel), 1_024),
        ("run.grace_period_secs", config.run.grace_period_secs, HOUR),
        (
            "verification.timeout_secs",
            config.verification.timeout_secs,
            WEEK,
        ),
        (
            "retry.rate_limit_cooldown_secs",
            config.retry.rate_limit_cooldown_secs,
            WEEK,
        ),
        ("handoff.timeout_secs", config.handoff.timeout_secs, YEAR),
        ("tui.fps", u64::from(config.tui.fps), 240),
        ("tui.ssh_fps", u64::from(config.tui.ssh_fps), 240),
        (
            "tui.scrollback_lines",
            u64::from(config.tui.scrollback_lines),
            1_000_000,
        ),
        ("delivery.max_file_mb", config.delivery.max_file_mb, 1 << 20),
        ("jira.page_size", u64::from(config.jira.page_size), 100),
        ("github.timeout_secs", config.github.timeout_secs, HOUR),
        ("jira.timeout_secs", config.jira.timeout_secs, HOUR),
    ];
    for (key, v) in [
        (
            "http.max_connections",
            u64::from(config.http.max_connections),
        ),
        ("http.header_timeout_secs", config.http.header_timeout_secs),
        ("github.timeout_secs", config.github.timeout_secs),
        ("jira.timeout_secs", config.jira.timeout_secs),
    ] {
        if v == 0 {
            bad(key, "must be at least 1".into());
        }
    }
    for (key, v, max) in bounds {
        if v > max {
            bad(key, format!("must be at most {max}, got {v}"));
        }
    }
    if let Some(v) = config.retry.backoff_secs.iter().find(|v| **v > 24 * HOUR) {
        bad(
            "retry.backoff_secs",
            format!(
                "each pause must be at most {} seconds (a day), got {v}",
                24 * HOUR
            ),
        );
    }
    for (key, v) in [
        ("queue.heartbeat_secs", q.heartbeat_secs),
        ("queue.poll_interval_ms", q.poll_interval_ms),
    ] {
        if v == 0 {
            bad(key, "must be at least 1".into());
        }
    }
    if q.lease_secs <= q.heartbeat_secs {
        // A lease that expires before the next heartbeat renews it would let the reaper steal live work.
        bad(
            "queue.lease_secs",
            format!(
                "must be greater than queue.heartbeat_secs ({}), got {}",
                q.heartbeat_secs, q.lease_secs
            ),
        );
    }
    if q.worker_offline_secs <= q.heartbeat_secs {
        // A live worker between two heartbeats must never look dead.
        bad(
            "queue.worker_offline_secs",
            format!(
                "must be greater than queue.heartbeat_secs ({}), got {}",
                q.heartbeat_secs, q.worker_offline_secs
            ),
        );
    }
    if q.reaper_interval_secs == 0 {
        bad("queue.reaper_interval_secs", "must be at least 1".into());
    }
    if q.default_max_attempts == 0 {
        bad("queue.default_max_attempts", "must be at least 1".into());
    }
    non_negative(
        &mut bad,
        "queue.default_task_estimate_usd",
        Some(q.default_task_estimate_usd),
    );

    if config.run.parallel == 0 {
        bad("run.parallel", "must be at least 1".into());
    }
    non_negative(&mut bad, "run.budget_usd", config.run.budget_usd);
    if !config.agents.contains_key(&config.run.agent) {
        let known: Vec<&str> = config.agents.keys().map(String::as_str).collect();
        bad(
            "run.agent",
            format!(
                "no agent named {:?}; configured agents: {}",
                config.run.agent,
                known.join(", ")
            ),
        );
    }

    for (name, agent) in &config.agents {
        let key = |field: &str| join_key(&["agents".into(), name.clone(), field.into()]);
        if agent.max_parallel == Some(0) {
            bad(
                &key("max_parallel"),
                "must be at least 1 (leave it out for no cap)".into(),
            );
        }
        match agent.backend(name) {
            None => bad(
                &key("backend"),
                format!(
                    "agent {name:?} is not a built-in agent; set backend = \"command\" and a template"
                ),
            ),
            Some(Backend::Command) => match &agent.template {
                Some(t) => {
                    if let Err(msg) = check_template(t) {
                        bad(&key("template"), msg);
                    }
                }
                // The built-in `command` entry is a placeholder until someone fills in its template.
                None if name != "command" || config.run.agent == "command" => bad(
                    &key("template"),
                    "the command backend needs a template, e.g. \"my-agent --file {prompt_file}\""
                        .into(),
                ),
                None => {}
            },
            Some(_) => {}
        }
    }

    for (model, price) in &config.prices {
        for (field, v) in [
            ("input_per_mtok", price.input_per_mtok),
            ("output_per_mtok", price.output_per_mtok),
        ] {
            let key = join_key(&["prices".into(), model.clone(), field.into()]);
            non_negative(&mut bad, &key, Some(v));
        }
    }

    if let Some(size) = &config.worktrees.max_disk
        && let Err(msg) = crate::domain::doctor::parse_size(size)
    {
        bad("worktrees.max_disk", msg);
    }

    if config.verification.timeout_secs == 0 {
        bad("verification.timeout_secs", "must be at least 1".into());
    }
    if config.retry.backoff_secs.is_empty() {
        bad(
            "retry.backoff_secs",
            "needs at least one value, e.g. [5, 10, 20]".into(),
        );
    }
    if config.handoff.timeout_secs == 0 {
        bad("handoff.timeout_secs", "must be at least 1".into());
    }
    for (i, pattern) in config.guards.injection_patterns.iter().enumerate() {
        if let Err(e) = regex::Regex::new(pattern) {
            let first = e
                .to_string()
                .lines()
                .last()
                .unwrap_or_default()
                .trim()
                .to_string();
            bad(
                "guards.injection_patterns",
                format!(
                    "pattern #{} {pattern:?} is not a valid regex: {first}",
                    i + 1
                ),
            );
        }
    }
    for (key, fps) in [
        ("tui.fps", config.tui.fps),
        ("tui.ssh_fps", config.tui.ssh_fps),
    ] {
        if !(1..=240).contains(&fps) {
            bad(key, format!("must be between 1 and 240, got {fps}"));
        }
    }
    for (chord, action) in &config.keys {
        let snake = action.starts_with(|c: char| c.is_ascii_lowercase())
            && action
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !snake {
            bad(
                &join_key(&["keys".into(), chord.clone()]),
                format!("action {action:?} must be a snake_case action name"),
            );
        }
    }
    if let Err(msg) = check_level(&config.logging.level) {
        bad("logging.level", msg);
    }
    out
}

/// A level (`info`) or tracing directives (`whilly::store=debug,info`). A bare word is a valid
/// directive to tracing (a target name), so a typo like `inf` is caught here instead.
fn check_level(filter: &str) -> Result<(), String> {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    let hint =
        "use off, error, warn, info, debug, trace, or directives like \"whilly::store=debug,info\"";
    for directive in filter.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let level = directive
            .rsplit_once('=')
            .map_or(directive, |(_, l)| l)
            .trim();
        if !LEVELS.contains(&level.to_ascii_lowercase().as_str()) {
            return Err(format!("{filter:?}: {level:?} is not a log level; {hint}"));
        }
    }
    tracing_subscriber::EnvFilter::builder()
        .parse(filter)
        .map(|_| ())
        .map_err(|e| format!("{filter:?} is not a log filter ({e}); {hint}"))
}

fn non_negative(bad: &mut impl FnMut(&str, String), key: &str, value: Option<f64>) {
    if let Some(v) = value
        && !(v.is_finite() && v >= 0.0)
    {
        bad(key, format!("must be zero or more, got {v}"));
    }
}

/// A template may only use the known placeholders; an unknown one would be passed to the agent
/// verbatim, which is never what was meant.
fn check_template(template: &str) -> Result<(), String> {
    if template.trim().is_empty() {
        return Err("is empty".into());
    }
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            return Err(format!("unclosed `{{` in {template:?}"));
        };
        let name = &after[..close];
        if !TEMPLATE_PLACEHOLDERS.contains(&name) {
            return Err(format!(
                "unknown placeholder {{{name}}}; available: {}",
                TEMPLATE_PLACEHOLDERS.map(|p| format!("{{{p}}}")).join(" ")
            ));
        }
        rest = &after[close + 1..];
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::config::model::AgentConfig;

    #[test]
    fn defaults_are_valid() {
        assert_eq!(check(&Config::default()), Vec::<(String, String)>::new());
    }

    #[test]
    fn reports_each_bad_value_by_key() {
        let mut c = Config::default();
        c.queue.lease_secs = 5;
        c.run.parallel = 0;
        c.guards.injection_patterns = vec!["(".into()];
        c.keys.insert("ctrl-x".into(), "Quit".into());
        c.agents.insert("bot".into(), AgentConfig::default());
        c.agents.insert(
            "mine".into(),
            AgentConfig {
                backend: Some(Backend::Command),
                template: Some("x {nope}".into()),
                ..Default::default()
            },
        );
        c.logging.level = "loud".into();
        let keys: Vec<String> = check(&c).into_iter().map(|(k, _)| k).collect();
        for want in [
            "queue.lease_secs",
            "run.parallel",
            "guards.injection_patterns",
            "keys.ctrl-x",
            "agents.bot.backend",
            "agents.mine.template",
            "logging.level",
        ] {
            assert!(
                keys.iter().any(|k| k == want),
                "{want} missing from {keys:?}"
            );
        }
    }

    #[test]
    fn templates_accept_only_known_placeholders() {
        assert!(check_template("run {prompt_file} in {workdir} for {task_id}").is_ok());
        assert!(check_template("x {prompt").is_err());
        assert!(
            check_template("x {model}")
                .unwrap_err()
                .contains("{prompt_file}")
        );
    }
}
