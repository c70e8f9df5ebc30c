//! The interview: the agent asks one question at a time until it says DONE (the wizard holds
//! the cap on their number).

use super::error::PrdError;
use super::oneshot::OneShot;
pub use super::prompts::QaPair;
use super::prompts::{self, DONE_SENTINEL, QUESTION_PREFIX};
use crate::domain::Usd;
use std::path::Path;

/// The most questions the wizard asks, in the console and on the command line alike (the
/// original asked 8–12; the operator can end the interview at any question, the agent can say
/// DONE sooner).
pub const DEFAULT_MAX_QUESTIONS: usize = 10;

/// Longest question kept; anything longer is an essay, not a question.
const MAX_QUESTION_CHARS: usize = 2000;

/// What the interview wants next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Ask the operator this.
    Question(String),
    /// Enough is known: write the PRD.
    Done,
}

/// The agent's next question, or [`Step::Done`], and the cost of the call. `max_questions` is
/// what the prompt tells the agent; the wizard holds the cap (it does not ask once it is reached).
pub async fn next_question(
    agent: &OneShot,
    cwd: &Path,
    idea: &str,
    qa: &[QaPair],
    max_questions: usize,
) -> Result<(Step, Usd), PrdError> {
    let prompt = prompts::interview(idea, qa, max_questions);
    let reply = agent.ask("prd-interview", &prompt, cwd).await?;
    let step = parse_step(&reply.text).ok_or_else(|| PrdError::Unparseable {
        what: "an interview question (a `QUESTION:` line or DONE)",
        reply: reply.text.clone(),
    })?;
    Ok((step, reply.cost))
}

/// Markdown decoration an agent may put around a line (`**QUESTION:** …`, `> DONE`, `- …`).
fn undecorate(line: &str) -> &str {
    let mut l = line.trim();
    loop {
        let before = l;
        for p in ["**", "__", "*", "_", "`", ">", "#", "- "] {
            l = l.strip_prefix(p).unwrap_or(l).trim_start();
        }
        for s in ["**", "__", "*", "_", "`"] {
            l = l.strip_suffix(s).unwrap_or(l).trim_end();
        }
        if l == before {
            return l;
        }
    }
}

/// The question or DONE in an agent's reply, tolerating chatter around it: a `QUESTION:` line
/// wins (its text may continue on the following lines until a blank one); else a line that is
/// just DONE; else the last line that ends with a question mark.
pub fn parse_step(reply: &str) -> Option<Step> {
    let lines: Vec<&str> = reply.lines().collect();
    for (i, raw) in lines.iter().enumerate() {
        let l = undecorate(raw);
        let upper = l.to_ascii_uppercase();
        let Some(rest) = upper
            .strip_prefix(QUESTION_PREFIX)
            .map(|r| &l[l.len() - r.len()..])
        else {
            continue;
        };
        let mut text = undecorate(rest).to_string();
        for next in &lines[i + 1..] {
            let n = undecorate(next);
            if n.is_empty() || n.eq_ignore_ascii_case(DONE_SENTINEL) {
                if text.is_empty() && n.is_empty() {
                    continue;
                }
                break;
            }
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(n);
        }
        if !text.is_empty() {
            return Some(Step::Question(bounded(&text)));
        }
    }
    if lines.iter().any(|l| is_done(undecorate(l))) {
        return Some(Step::Done);
    }
    lines
        .iter()
        .rev()
        .map(|l| undecorate(l))
        .find(|l| l.ends_with('?'))
        .map(|l| Step::Question(bounded(l)))
}

/// `DONE`, `done.`, `DONE — I have enough`: the sentinel as a word at the start of the line.
fn is_done(line: &str) -> bool {
    let n = DONE_SENTINEL.len();
    line.len() >= n
        && line.is_char_boundary(n)
        && line[..n].eq_ignore_ascii_case(DONE_SENTINEL)
        && !line[n..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
}

fn bounded(text: &str) -> String {
    text.chars().take(MAX_QUESTION_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Option<Step> {
        Some(Step::Question(s.to_string()))
    }

    #[test]
    fn plain_and_decorated_questions() {
        assert_eq!(
            parse_step("QUESTION: Who are the users?"),
            q("Who are the users?")
        );
        assert_eq!(
            parse_step(
                "Great idea! Let me ask.\n\n**Question:** What problem does it solve?\n\nThanks."
            ),
            q("What problem does it solve?")
        );
        assert_eq!(
            parse_step("QUESTION:\nWhich database\nshould it use?\n\nlater text"),
            q("Which database should it use?")
        );
    }

    #[test]
    fn done_sentinel_in_any_dress() {
        for reply in [
            "DONE",
            "done.",
            "**DONE**",
            "I have enough information.\n\nDONE\n",
            "DONE — I have what I need",
        ] {
            assert_eq!(parse_step(reply), Some(Step::Done), "{reply:?}");
        }
        // A question wins over a mention of DONE elsewhere.
        assert_eq!(
            parse_step("QUESTION: Is it done when the tests pass?\nDONE"),
            q("Is it done when the tests pass?")
        );
    }

    #[test]
    fn fallback_to_the_last_question_mark() {
        assert_eq!(
            parse_step("Thanks for the idea.\nWhat is the deadline?\nAnd who pays?"),
            q("And who pays?")
        );
        assert_eq!(parse_step("I refuse to answer in the format."), None);
        assert_eq!(parse_step("Donezo, no more"), None);
        assert_eq!(parse_step(""), None);
    }

    #[test]
    fn long_questions_are_bounded() {
        let long = format!("QUESTION: {}?", "why ".repeat(2000));
        match parse_step(&long) {
            Some(Step::Question(s)) => assert_eq!(s.chars().count(), MAX_QUESTION_CHARS),
            other => panic!("{other:?}"),
        }
    }
}
