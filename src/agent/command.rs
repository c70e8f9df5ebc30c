//! Any agent as a command line template, e.g. `my-agent --task {task_id} --prompt-file {prompt_file}`.
//!
//! The template is split into words once, shell-style, and the placeholders are substituted
//! inside each word afterwards, so a prompt with spaces, quotes or `$(…)` stays one argument and
//! is never seen by a shell.

use super::backend::{AgentSettings, BackendKind, Invocation, prompt_arg};
use super::binary::resolve_binary;
use super::claude::parse_claude_output;
use super::error::AgentError;
use super::jsonscan::json_objects;
use super::process_backend::{Cli, ProcessBackend};
use super::result::{AgentResult, COMPLETION_MARKER, PriceTable, apply_prices, tail_lines};
use super::shellwords;

/// The placeholders a template may use.
pub(crate) const PLACEHOLDERS: [&str; 4] = ["prompt_file", "prompt", "workdir", "task_id"];

/// A command line template, split into words.
#[derive(Debug, Clone)]
pub(crate) struct Template {
    /// Every word after the program.
    words: Vec<String>,
}

pub(crate) type CommandBackend = ProcessBackend<Template>;

/// Parses and checks `settings.command` and resolves its program (the first word).
pub(crate) fn build(settings: AgentSettings) -> Result<CommandBackend, AgentError> {
    let bad = |message: String| AgentError::BadTemplate {
        backend: settings.name.clone(),
        message,
    };
    let template = settings
        .command
        .as_deref()
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| {
            bad(
                "is required for a command agent, e.g. \"my-agent --prompt-file {prompt_file}\""
                    .to_string(),
            )
        })?;
    let words = shellwords::split(template).map_err(|e| bad(format!("{e} in {template:?}")))?;
    let Some((first, rest)) = words.split_first() else {
        return Err(bad("is empty".to_string()));
    };
    for word in &words {
        for name in placeholders_in(word) {
            if !PLACEHOLDERS.contains(&name) {
                return Err(bad(format!(
                    "unknown placeholder {{{name}}} (known: {})",
                    PLACEHOLDERS.map(|p| format!("{{{p}}}")).join(", ")
                )));
            }
        }
    }
    if !placeholders_in(first).is_empty() {
        return Err(bad(
            "the program (first word) cannot contain a placeholder".to_string()
        ));
    }
    let configured = if settings.bin.trim().is_empty() {
        first.as_str()
    } else {
        settings.bin.as_str()
    };
    let program = resolve_binary(&settings.name, configured)?;
    let cli = Template {
        words: rest.to_vec(),
    };
    Ok(ProcessBackend::new(settings, program, cli))
}

impl Cli for Template {
    const KIND: BackendKind = BackendKind::Command;

    fn args(&self, settings: &AgentSettings, inv: &Invocation<'_>) -> Vec<String> {
        let prompt = prompt_arg(inv);
        let workdir = inv.workdir.to_string_lossy();
        let prompt_file = inv.prompt_file.to_string_lossy();
        self.words
            .iter()
            .map(|w| {
                substitute(w, |name| match name {
                    "prompt" => Some(prompt.as_str()),
                    "prompt_file" => Some(&prompt_file),
                    "workdir" => Some(&workdir),
                    "task_id" => Some(inv.task_id),
                    _ => None,
                })
            })
            .chain(settings.extra_args.iter().cloned())
            .collect()
    }

    /// A command that wraps Claude (prints a `{"type":"result"}` object) is read like Claude.
    /// Otherwise the final answer is the tail of the output, and the marker counts only on the
    /// last non-empty line, so echoing the prompt (which mentions the marker) proves nothing.
    fn parse(&self, clean: &str, model: Option<&str>, prices: &PriceTable) -> AgentResult {
        parse_command_output(clean, model, prices)
    }
}

/// Names of `{name}` placeholders in `word` (`name` is `[a-z_]+`; other braces are literal).
fn placeholders_in(word: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = word;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close)
                if close > 0
                    && after[..close]
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b == b'_') =>
            {
                out.push(&after[..close]);
                rest = &after[close + 1..];
            }
            _ => rest = after,
        }
    }
    out
}

/// `word` with every known placeholder replaced, in one pass (a substituted value is never
/// scanned again, so a prompt containing `{workdir}` stays as written).
fn substitute<'a>(word: &str, value: impl Fn(&str) -> Option<&'a str>) -> String {
    let mut out = String::with_capacity(word.len());
    let mut rest = word;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after
            .find('}')
            .and_then(|close| value(&after[..close]).map(|v| (close, v)))
        {
            Some((close, v)) => {
                out.push_str(v);
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

pub(crate) fn parse_command_output(
    clean: &str,
    model: Option<&str>,
    prices: &PriceTable,
) -> AgentResult {
    if json_objects(clean).iter().any(|v| v["type"] == "result") {
        return parse_claude_output(clean, model, prices);
    }
    let last = clean
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default();
    let mut out = AgentResult {
        text: tail_lines(clean, 40),
        marker_found: last.contains(COMPLETION_MARKER),
        subtype: "text".to_string(),
        ..AgentResult::default()
    };
    apply_prices(&mut out, None, prices);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::agent::backend::test_support::inv;

    fn settings(template: &str) -> AgentSettings {
        let mut s = AgentSettings::new(BackendKind::Command);
        s.name = "mine".into();
        s.command = Some(template.into());
        s
    }

    #[test]
    fn substitutes_inside_words_without_resplitting() {
        let b = build(settings(
            "sh -c 'echo \"$1\"' whilly --p={prompt} -f {prompt_file} '{workdir}/x' {task_id}",
        ))
        .unwrap();
        let prompt = "it's a \"quoted\" $(rm -rf /) {workdir} prompt";
        let args = b.args(&inv(prompt));
        assert_eq!(
            args,
            [
                "-c",
                "echo \"$1\"",
                "whilly",
                &format!("--p={prompt}"),
                "-f",
                "/wt/.whilly/prompt.md",
                "/wt/x",
                "TASK-1"
            ]
        );
        assert!(b.program().ends_with("sh"));
    }

    #[test]
    fn template_errors_name_the_key() {
        let err = build(settings("sh {promt}")).unwrap_err().to_string();
        assert!(
            err.starts_with("agents.mine.command:")
                && err.contains("{promt}")
                && err.contains("{prompt_file}"),
            "{err}"
        );
        let err = build(settings("sh 'oops")).unwrap_err().to_string();
        assert!(err.contains("unterminated single quote"), "{err}");
        assert!(build(settings("   ")).is_err());
        let err = build(settings("no-such-agent-binary {prompt}"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("agents.mine.bin"), "{err}");
        // JSON-ish braces are not placeholders.
        assert!(build(settings(r#"sh -c 'echo {"a":1}' {}"#)).is_ok());
    }

    #[test]
    fn marker_counts_only_on_the_last_line() {
        let echoed =
            "Rules: print <promise>COMPLETE</promise> only on success\nworking...\nfailed\n";
        assert!(!parse_command_output(echoed, None, &PriceTable::new()).marker_found);
        let ok = "working...\nall good\n<promise>COMPLETE</promise>\n\n";
        let r = parse_command_output(ok, None, &PriceTable::new());
        assert!(r.marker_found && !r.is_error);
        let wrapped = "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"<promise>COMPLETE</promise>\",\"total_cost_usd\":0.5}\n";
        let r = parse_command_output(wrapped, None, &PriceTable::new());
        assert!(r.marker_found && r.cost == crate::domain::Usd(500_000));
    }
}
