//! The prompts of the PRD wizard, plan generation and the challenge, kept together so their
//! wording (and the sentinels the parsers look for) can be read and changed in one place.

use std::fmt::Write as _;

/// One question and the operator's answer (empty: skipped, the agent decides).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct QaPair {
    pub question: String,
    pub answer: String,
}

/// The line prefix of an interview question.
pub(crate) const QUESTION_PREFIX: &str = "QUESTION:";
/// The interview's end sentinel.
pub(crate) const DONE_SENTINEL: &str = "DONE";

/// Operator text quoted inside a prompt, fenced so it reads as data.
fn quoted(out: &mut String, tag: &str, text: &str) {
    let _ = writeln!(out, "<<<{tag}\n{}\n{tag}>>>", text.trim());
}

fn interview_so_far(out: &mut String, qa: &[QaPair]) {
    if qa.is_empty() {
        out.push_str("\nNo questions have been asked yet.\n");
        return;
    }
    out.push_str("\nQuestions asked so far, with the operator's answers:\n");
    for (i, p) in qa.iter().enumerate() {
        let answer = if p.answer.trim().is_empty() {
            "(no answer: decide yourself)"
        } else {
            p.answer.trim()
        };
        let _ = writeln!(
            out,
            "Q{n}: {}\nA{n}: {answer}",
            p.question.trim(),
            n = i + 1
        );
    }
}

pub(crate) fn interview(idea: &str, qa: &[QaPair], max_questions: usize) -> String {
    let mut p = String::from(
        "You are helping an operator turn an idea into a product requirements document (PRD) for \
a change to the software in your working directory (you may read it; do not change anything).\n\n\
Interview the operator: ask exactly ONE question, the most useful one still open, about the \
problem, the users, success criteria, scope and non-goals, constraints, technical needs or \
business value. Never repeat a question that was already answered. One or two sentences.\n\n\
The idea:\n",
    );
    quoted(&mut p, "IDEA", idea);
    interview_so_far(&mut p, qa);
    let _ = write!(
        p,
        "\nReply with exactly one line and nothing else:\n{QUESTION_PREFIX} <your question>\n\
or, when you know enough to write the PRD (at most {max_questions} questions in all), the single word:\n\
{DONE_SENTINEL}\n"
    );
    p
}

pub(crate) fn write_prd(idea: &str, qa: &[QaPair]) -> String {
    let mut p = String::from(
        "Write a product requirements document (PRD) in Markdown for the idea below, using the \
operator's interview answers. You may read the repository in your working directory for context; \
do not change anything.\n\nThe idea:\n",
    );
    quoted(&mut p, "IDEA", idea);
    interview_so_far(&mut p, qa);
    p.push_str(
        "\nStart with a level-one heading holding the PRD's title (a few words). Then these \
sections as level-two headings: Problem, Users, Goals and success criteria, Scope (in and out), \
Functional requirements (numbered FR-1, FR-2, …, each one testable), Non-functional requirements, \
Technical notes (components, files, constraints), Risks and open questions.\n\n\
Reply with the Markdown document only: no preamble, no closing remarks, no code fence.\n",
    );
    p
}

/// The plan format, as the agent must write it.
const PLAN_FORMAT: &str = r#"The plan is one JSON object in this format:
{
  "project": "<project name>",
  "plan_id": "<plan id>",
  "prd_file": "<path of the PRD>",
  "tasks": [
    {
      "id": "TASK-001",
      "status": "pending",
      "priority": "critical | high | medium | low",
      "description": "What to build and where, precise enough for an AI coding agent to do it without asking (at least 20 characters).",
      "dependencies": ["ids of tasks that must be done first"],
      "key_files": ["files the task will create or change"],
      "acceptance_criteria": ["conditions under which the task is done (at least one)"],
      "test_steps": ["commands or checks that prove it (at least one)"],
      "prd_requirement": "FR-1"
    }
  ]
}
Rules: ids are TASK-001, TASK-002, … (unique; letters, digits and - only); every dependency names a
task of this plan; no dependency cycles; every task has a description of at least 20 characters,
at least one acceptance criterion and at least one test step; tasks small enough for one agent
session; order tasks so that foundations come first."#;

pub(crate) fn plan(prd: &str, prd_file: &str, plan_id: &str, project: &str) -> String {
    let mut p = String::from(
        "Turn the product requirements document (PRD) below into an implementation plan of tasks \
for AI coding agents. You may read the repository in your working directory for context; do not \
change anything.\n\n",
    );
    p.push_str(PLAN_FORMAT);
    let _ = write!(
        p,
        "\n\nUse \"project\": {project:?}, \"plan_id\": {plan_id:?}, \"prd_file\": {prd_file:?}.\n\nThe PRD ({prd_file}):\n"
    );
    quoted(&mut p, "PRD", prd);
    p.push_str("\nReply with the JSON object only: no prose before or after it, no code fence.\n");
    p
}

pub(crate) fn plan_repair(original_prompt: &str, reply: &str, problems: &str) -> String {
    repair(
        original_prompt,
        reply,
        problems,
        "Reply again with the complete, corrected plan as one JSON object only: no prose, no \
code fence.",
    )
}

pub(crate) fn challenge(plan_json: &str, triz_summary: &str) -> String {
    let mut p = String::from(
        "You are a sceptical senior engineer reviewing an implementation plan that AI coding \
agents will carry out task by task in the repository in your working directory (you may read it; \
do not change anything). Challenge the plan: play devil's advocate.\n\n\
Report in Markdown, in this order:\n\
## Verdict\none line: approve, revise or reject, and why in one sentence.\n\
## Risks\nwhat is likely to go wrong (wrong order, hidden coupling, tasks too big for one session, \
unsafe changes).\n\
## Missing tasks\nwork the plan forgets (tests, migrations, docs, error handling, rollout).\n\
## Vague criteria\ntasks whose acceptance criteria or test steps cannot be checked, with a sharper \
version.\n\
## Dependencies\nmissing or needless dependencies between tasks.\n\
Name task ids everywhere. Be concrete and brief. Reply with the report only.\n\n\
The deterministic analysis already found:\n",
    );
    p.push_str(triz_summary.trim());
    p.push_str("\n\nThe plan:\n");
    quoted(&mut p, "PLAN", plan_json);
    p
}

/// The answer format of a decomposition, as the agent must write it.
const SPLIT_FORMAT: &str = r#"Reply with one JSON object in this format:
{
  "subtasks": [
    {
      "suffix": "a",
      "description": "What to build and where, precise enough for an AI coding agent (at least 20 characters).",
      "key_files": ["files of the parent task this subtask changes"],
      "acceptance_criteria": ["criteria of the parent task this subtask satisfies, copied verbatim"],
      "test_steps": ["commands or checks that prove it (at least one)"],
      "depends_on": ["suffixes of earlier subtasks it needs; leave the field out to follow the previous one"]
    }
  ],
  "dependents_on": "last | all"
}
Rules: 2 to 5 subtasks, suffixes "a", "b", "c", … in order; every acceptance criterion and every
key file of the parent appears in at least one subtask (criteria copied verbatim); subtasks use
only the parent's key files; each subtask has a description of at least 20 characters, at least
one acceptance criterion and at least one test step; "dependents_on" says whether the tasks that
waited for the parent need only the last subtask ("last") or every subtask ("all")."#;

pub(crate) fn decompose(plan_json: &str, task_id: &str, reason: &str) -> String {
    let mut p = String::from(
        "You are splitting one task of an implementation plan that AI coding agents carry out in \
the repository in your working directory (you may read it; do not change anything). The task is \
too big for one agent session",
    );
    let _ = write!(
        p,
        " ({reason}). Split task {task_id} into 2 to 5 smaller subtasks that together do exactly \
what it does, each one small enough for one session, foundations first.\n\n{SPLIT_FORMAT}\n\n\
The plan (the task to split is {task_id}):\n"
    );
    quoted(&mut p, "PLAN", plan_json);
    p.push_str("\nReply with the JSON object only: no prose before or after it, no code fence.\n");
    p
}

/// The answer format of the agent's TRIZ analysis.
const TRIZ_FORMAT: &str = r#"Reply with one JSON object in this format:
{
  "verdict": "approve | revise | reject",
  "summary": "one or two sentences",
  "contradictions": [
    {
      "task_ids": ["ids of the tasks involved"],
      "improving": "the parameter the plan improves (e.g. speed of delivery)",
      "worsening": "the parameter that gets worse as a result (e.g. reliability)",
      "principles": ["TRIZ inventive principles that resolve it, e.g. \"1 Segmentation\""],
      "severity": "critical | high | medium | low",
      "explanation": "why this is a contradiction and how the principles apply"
    }
  ]
}
Every task id must be a task of the plan; every contradiction names at least one principle."#;

pub(crate) fn triz(plan_json: &str, deterministic: &str) -> String {
    let mut p = String::from(
        "You are a TRIZ analyst reviewing an implementation plan that AI coding agents will \
carry out in the repository in your working directory (you may read it; do not change anything). \
Find the technical contradictions in the plan: places where improving one parameter (speed, \
scope, safety, simplicity, …) makes another worse, and the inventive principles that resolve \
them. Do not repeat what the deterministic analysis below already found; build on it.\n\n",
    );
    p.push_str(TRIZ_FORMAT);
    p.push_str("\n\nThe deterministic analysis found:\n");
    p.push_str(deterministic.trim());
    p.push_str("\n\nThe plan:\n");
    quoted(&mut p, "PLAN", plan_json);
    p.push_str("\nReply with the JSON object only: no prose before or after it, no code fence.\n");
    p
}

/// The answer format of the decision gate's LLM pass.
const GATE_FORMAT: &str = r#"Reply with one JSON object in this format:
{
  "verdicts": [
    {"task_id": "TASK-001", "vague": false, "reason": "one sentence"}
  ]
}
One verdict for every task of the plan; "vague": true when an AI coding agent could not do the
task without asking, or could not tell when it is done."#;

pub(crate) fn gate_llm(plan_json: &str) -> String {
    let mut p = String::from(
        "You are the decision gate of a plan that AI coding agents will carry out in the \
repository in your working directory (you may read it; do not change anything). Judge each task: \
is its description precise enough to act on, and can its acceptance criteria and test steps be \
checked?\n\n",
    );
    p.push_str(GATE_FORMAT);
    p.push_str("\n\nThe plan:\n");
    quoted(&mut p, "PLAN", plan_json);
    p.push_str("\nReply with the JSON object only: no prose before or after it, no code fence.\n");
    p
}

/// A JSON answer that failed its checks, sent back once with its problems.
pub(crate) fn json_repair(original_prompt: &str, reply: &str, problems: &str) -> String {
    repair(
        original_prompt,
        reply,
        problems,
        "Reply again with the complete, corrected JSON object only: no prose, no code fence.",
    )
}

/// `original_prompt` again with the reply that failed, its problems and what to send instead:
/// the one shape of every repair round.
fn repair(original_prompt: &str, reply: &str, problems: &str, ask: &str) -> String {
    let mut p = String::from(original_prompt);
    p.push_str("\nYour previous reply could not be used. Its problems:\n");
    p.push_str(problems.trim());
    p.push_str("\n\nYour previous reply was:\n");
    quoted(&mut p, "REPLY", reply);
    p.push('\n');
    p.push_str(ask);
    p.push('\n');
    p
}
