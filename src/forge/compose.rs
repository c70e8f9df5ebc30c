//! What Whilly writes on the forge, composed from a task and its attempt's evidence: the pull
//! request's title and body, and the one status comment per issue (found again by its hidden
//! marker and edited in place). Pure: the text only, so it is tested directly and the same text
//! is written whether the first try or a re-run (`whilly forge --compose`) opens the PR.

use crate::domain::TaskSpec;
use crate::domain::secrets::redact_secrets;
use serde_json::Value;
use std::fmt::Write as _;

/// Longest output tail of one check that goes into a PR body. GitHub caps a body at 65,536
/// characters; this keeps a dozen failing checks under it.
const CHECK_TAIL_CHARS: usize = 3000;
/// Longest PR body we send (GitHub refuses longer).
const MAX_BODY_CHARS: usize = 60_000;

/// Facts about the run that produced the work.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RunFacts {
    pub plan_id: String,
    pub agent: String,
    pub model: Option<String>,
    pub attempts: i64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Spend of the task so far, e.g. `$0.42`.
    pub cost: String,
    pub duration_secs: Option<u64>,
    /// The attempt log, on the machine that ran it.
    pub log: Option<String>,
    pub branch: String,
    pub commit: Option<String>,
}

/// The PR's title: `<task-id>: <first line of the description>`, at most 120 characters.
pub(crate) fn pr_title(task: &TaskSpec) -> String {
    let first = task.description.lines().next().unwrap_or_default().trim();
    let mut title = format!("{}: {first}", task.id);
    if title.chars().count() > 120 {
        title = title.chars().take(119).collect::<String>() + "…";
    }
    title
}

/// One check of the last verification round, as the evidence records it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CheckEvidence {
    pub name: String,
    pub command: String,
    pub required: bool,
    pub passed: bool,
    pub exit_code: Option<i64>,
    pub timed_out: bool,
    pub duration_ms: u64,
    pub output: String,
}

/// The checks of the newest verification round in an attempt's evidence.
pub(crate) fn last_checks(evidence: &Value) -> Vec<CheckEvidence> {
    let Some(round) = evidence
        .get("verification")
        .and_then(Value::as_array)
        .and_then(|r| r.last())
    else {
        return Vec::new();
    };
    round
        .get("checks")
        .and_then(Value::as_array)
        .map(|checks| {
            checks
                .iter()
                .map(|c| CheckEvidence {
                    name: str_of(c, "name"),
                    command: str_of(c, "command"),
                    required: c.get("required").and_then(Value::as_bool).unwrap_or(true),
                    passed: c.get("passed").and_then(Value::as_bool).unwrap_or(false),
                    exit_code: c.get("exit_code").and_then(Value::as_i64),
                    timed_out: c.get("timed_out").and_then(Value::as_bool).unwrap_or(false),
                    duration_ms: c.get("duration_ms").and_then(Value::as_u64).unwrap_or(0),
                    output: str_of(c, "output"),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether every required check of the newest round passed (and there was a round).
pub(crate) fn verified(evidence: &Value) -> bool {
    let checks = last_checks(evidence);
    !checks.is_empty() && checks.iter().filter(|c| c.required).all(|c| c.passed)
}

fn str_of(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn tail(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.to_string();
    }
    let skip = count - max;
    format!("…{}", text.chars().skip(skip).collect::<String>())
}

/// Text inside a fenced block must not close it early.
fn fence_for(text: &str) -> String {
    let mut fence = "```".to_string();
    while text.contains(&fence) {
        fence.push('`');
    }
    fence
}

fn secs_text(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

/// The PR's body: what closes, what was asked, the evidence, the run, and that a human must
/// review it. Every piece of agent or check output goes through the secret redaction.
/// "Stacked on …": the dependencies whose unmerged work this branch starts from (see
/// `engine::stack`), each by its pull request where it has one.
fn stacked_note(b: &mut String, evidence: &Value) {
    let Some(stacked) = evidence["stacked_on"].as_array().filter(|s| !s.is_empty()) else {
        return;
    };
    let names: Vec<String> = stacked
        .iter()
        .map(|s| {
            let task = s["task"].as_str().unwrap_or("?");
            match s["pull_request"]["number"].as_u64() {
                Some(n) => format!("#{n} ({task})"),
                None => format!("`{}` ({task})", s["branch"].as_str().unwrap_or("?")),
            }
        })
        .collect();
    let _ = if stacked.len() == 1 {
        writeln!(
            b,
            "Stacked on {}: this branch starts from its work, and this pull request shows only \
             this task's changes on top of it. Merge that one first.\n",
            names[0]
        )
    } else {
        writeln!(
            b,
            "Stacked on {}: this branch starts from their work merged together, so until they \
             are merged this pull request shows their changes too. Merge them first.\n",
            names.join(", ")
        )
    };
}

pub(crate) fn pr_body(
    task: &TaskSpec,
    issue: Option<u64>,
    evidence: &Value,
    run: &RunFacts,
) -> String {
    let mut b = String::new();
    if let Some(n) = issue {
        let _ = writeln!(b, "Closes #{n}\n");
    }
    if let Some((key, url)) = crate::forge::jira::intake::source_of(task) {
        let _ = writeln!(b, "Jira: [{key}]({url})\n");
    }
    stacked_note(&mut b, evidence);
    let _ = writeln!(b, "## {}\n", task.id);
    let _ = writeln!(b, "{}\n", task.description.trim());
    if !task.acceptance_criteria.is_empty() {
        b.push_str("### Acceptance criteria\n\n");
        for c in &task.acceptance_criteria {
            let _ = writeln!(b, "- {c}");
        }
        b.push('\n');
    }
    b.push_str("## Verification evidence\n\n");
    let checks = last_checks(evidence);
    if checks.is_empty() {
        b.push_str("No checks were configured for this task: nothing was verified.\n\n");
    } else {
        b.push_str("| check | command | exit | duration | result |\n|---|---|---|---|---|\n");
        for c in &checks {
            let result = match (c.passed, c.timed_out, c.required) {
                (true, _, _) => "passed",
                (false, true, _) => "timed out",
                (false, false, true) => "**failed**",
                (false, false, false) => "failed (optional)",
            };
            let _ = writeln!(
                b,
                "| {} | `{}` | {} | {} | {result} |",
                c.name.replace('|', "\\|"),
                c.command.replace('|', "\\|").replace('`', "'"),
                c.exit_code
                    .map(|e| e.to_string())
                    .unwrap_or_else(|| "–".into()),
                secs_text(c.duration_ms),
            );
        }
        b.push('\n');
        for c in &checks {
            let out = redact_secrets(&tail(c.output.trim_end(), CHECK_TAIL_CHARS));
            if out.trim().is_empty() {
                continue;
            }
            let fence = fence_for(&out);
            let _ = writeln!(
                b,
                "<details><summary>{} output (tail)</summary>\n\n{fence}\n{out}\n{fence}\n\n</details>\n",
                c.name
            );
        }
    }
    b.push_str("## Run\n\n");
    let _ = writeln!(b, "- plan: `{}`", run.plan_id);
    let model = run
        .model
        .as_deref()
        .map(|m| format!(" ({m})"))
        .unwrap_or_default();
    let _ = writeln!(b, "- agent: {}{model}", run.agent);
    let _ = writeln!(b, "- attempts: {}", run.attempts.max(1));
    if run.input_tokens + run.output_tokens > 0 {
        let _ = writeln!(
            b,
            "- tokens: {} in, {} out",
            run.input_tokens, run.output_tokens
        );
    }
    let _ = writeln!(b, "- cost: {}", run.cost);
    if let Some(d) = run.duration_secs {
        let _ = writeln!(
            b,
            "- duration: {}",
            humantime::format_duration(std::time::Duration::from_secs(d))
        );
    }
    let _ = writeln!(b, "- branch: `{}`", run.branch);
    if let Some(c) = &run.commit {
        let _ = writeln!(b, "- commit: {c}");
    }
    if let Some(log) = &run.log {
        let _ = writeln!(b, "- attempt log: `{log}`");
    }
    b.push_str("\n---\n**Human review required.** This pull request was written by an AI agent run by Whilly; review it before merging.\n");
    if b.chars().count() > MAX_BODY_CHARS {
        b = b.chars().take(MAX_BODY_CHARS).collect::<String>()
            + "\n\n…(cut: the full evidence is in the attempt log)\n";
    }
    b
}

/// The hidden line that marks Whilly's status comment on an issue, so it is found and edited
/// again rather than repeated.
pub(crate) fn status_marker(plan_id: &str) -> String {
    format!("<!-- whilly:status plan={plan_id} -->")
}

/// Whether a comment is the status comment of `plan_id`.
pub(crate) fn is_status_comment(body: &str, plan_id: &str) -> bool {
    body.lines().next().map(str::trim) == Some(status_marker(plan_id).as_str())
}

/// Where a task stands, as the status comment says it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Progress {
    Started {
        worker: String,
    },
    InReview {
        pr_url: String,
        draft: bool,
        verified: bool,
    },
    Failed {
        reason: String,
        detail: String,
        /// Where the work is kept, if anywhere.
        branch: Option<String>,
    },
}

/// The status comment's body: the marker, one headline, the facts.
pub(crate) fn status_comment(task_id: &str, progress: &Progress, run: &RunFacts) -> String {
    let mut b = status_marker(&run.plan_id);
    b.push('\n');
    match progress {
        Progress::Started { worker } => {
            let _ = writeln!(
                b,
                "**Whilly is working on this** as `{task_id}` (plan `{}`, agent {}, worker `{worker}`).",
                run.plan_id, run.agent
            );
        }
        Progress::InReview {
            pr_url,
            draft,
            verified,
        } => {
            let kind = if *draft {
                "draft pull request"
            } else {
                "pull request"
            };
            let checks = if *verified {
                "every required check passed"
            } else {
                "no checks verified it"
            };
            let _ = write!(
                b,
                "**Ready for review:** {kind} {pr_url} ({checks}).\n\n- task: `{task_id}` in plan `{}`\n- cost: {}\n",
                run.plan_id, run.cost
            );
            if let Some(d) = run.duration_secs {
                let _ = writeln!(
                    b,
                    "- duration: {}",
                    humantime::format_duration(std::time::Duration::from_secs(d))
                );
            }
        }
        Progress::Failed {
            reason,
            detail,
            branch,
        } => {
            let _ = writeln!(
                b,
                "**Whilly could not finish this** (`{task_id}`, plan `{}`): `{reason}`.",
                run.plan_id
            );
            let detail = redact_secrets(&tail(detail.trim(), 1500));
            if !detail.is_empty() {
                let fence = fence_for(&detail);
                let _ = write!(b, "\n{fence}\n{detail}\n{fence}\n");
            }
            match branch {
                Some(br) => {
                    let _ = write!(b, "\nThe work so far is on branch `{br}`.\n");
                }
                None => b.push_str("\nNo work was kept.\n"),
            }
            let _ = writeln!(b, "- cost: {}", run.cost);
        }
    }
    b
}

/// The status comment on an issue too vague to work on: what is missing and how to add it.
/// Nothing runs until the issue says more.
pub(crate) fn needs_more(plan_id: &str, missing: &[String]) -> String {
    let mut b = status_marker(plan_id);
    b.push_str("\n**Whilly needs more before it can work on this issue.** Nothing was run.\n\n");
    for m in missing {
        let _ = writeln!(b, "- {m}");
    }
    b.push_str(
        "\nSay what to build and where in the body, add a `## Acceptance` section (a list of the \
         conditions under which it is done) and a `## Test` section (commands or checks that \
         prove it), then run `whilly forge` on it again.\n",
    );
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn task() -> TaskSpec {
        TaskSpec {
            id: "GH-7".into(),
            description: "Stream large exports\n\nThe endpoint times out.".into(),
            acceptance_criteria: vec!["exports finish in 5 s".into()],
            ..TaskSpec::default()
        }
    }

    fn evidence() -> Value {
        let token = format!("ghp_{}", "a1B2".repeat(9));
        json!({"verification": [
            {"round": 1, "passed": false, "checks": [{"name": "test", "command": "cargo test", "required": true, "passed": false, "exit_code": 101, "duration_ms": 10}]},
            {"round": 2, "passed": true, "checks": [
                {"name": "test", "command": "cargo test", "required": true, "passed": true, "exit_code": 0, "duration_ms": 1500, "output": format!("ok\n```\nleaked {token}")},
                {"name": "lint", "command": "clippy | tee", "required": false, "passed": false, "exit_code": 1, "duration_ms": 20, "output": ""}
            ]}
        ]})
    }

    #[test]
    fn the_body_carries_the_evidence_of_the_last_round() {
        let run = RunFacts {
            plan_id: "gh-o-r".into(),
            agent: "claude".into(),
            model: Some("sonnet".into()),
            attempts: 2,
            cost: "$0.42".into(),
            branch: "whilly/gh-o-r/GH-7".into(),
            ..RunFacts::default()
        };
        let body = pr_body(&task(), Some(7), &evidence(), &run);
        assert!(body.starts_with("Closes #7\n"));
        assert!(
            body.contains("| test | `cargo test` | 0 | 1.5 s | passed |"),
            "{body}"
        );
        assert!(body.contains("| lint | `clippy \\| tee` | 1 | 20 ms | failed (optional) |"));
        assert!(!body.contains("101"), "only the last round");
        assert!(
            body.contains("````\nok\n```\nleaked"),
            "a fence the output cannot close"
        );
        assert!(!body.contains("ghp_a1B2"), "secrets redacted");
        assert!(body.contains("- agent: claude (sonnet)") && body.contains("- attempts: 2"));
        assert!(body.contains("Human review required"));
        assert!(verified(&evidence()));
        assert_eq!(pr_title(&task()), "GH-7: Stream large exports");
    }

    #[test]
    fn no_checks_is_said_not_hidden() {
        let body = pr_body(&task(), None, &json!({}), &RunFacts::default());
        assert!(!body.contains("Closes"));
        assert!(body.contains("nothing was verified"));
        assert!(!verified(&json!({})));
    }

    #[test]
    fn the_status_comment_is_found_by_its_marker() {
        let run = RunFacts {
            plan_id: "p".into(),
            cost: "$0.10".into(),
            ..RunFacts::default()
        };
        let c = status_comment(
            "GH-7",
            &Progress::InReview {
                pr_url: "https://x/pull/8".into(),
                draft: true,
                verified: true,
            },
            &run,
        );
        assert!(is_status_comment(&c, "p"));
        assert!(!is_status_comment(&c, "q"));
        assert!(c.contains("draft pull request https://x/pull/8"));
        let f = status_comment(
            "GH-7",
            &Progress::Failed {
                reason: "verification_failed".into(),
                detail: "test failed".into(),
                branch: Some("whilly/p/GH-7".into()),
            },
            &run,
        );
        assert!(f.contains("`verification_failed`") && f.contains("branch `whilly/p/GH-7`"));
    }
}
