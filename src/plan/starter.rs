//! What `whilly plan new` writes and `whilly plan schema` prints: a starter plan that passes
//! `plan check` as written, and the JSON Schema editors validate plans with.

use serde_json::{Value, json};

/// The JSON Schema of a plan file (draft 2020-12). Kept beside the parser; a test holds its
/// key lists to the parser's, so the two cannot drift apart.
pub const PLAN_SCHEMA: &str = include_str!("plan.schema.json");

/// The file name `plan new` gives the schema beside a new plan, and the starter's `$schema`.
pub const SCHEMA_FILE_NAME: &str = "whilly-plan.schema.json";

/// A v4 plan of two small tasks for `project`, with `$comment`s saying what each part is for.
/// Runs as written in any git repository (its checks are `test` and `grep`), so the first run
/// shows the whole loop before the operator writes tasks of their own.
pub fn starter_plan(project: &str) -> String {
    let id = plan_id_for(project);
    let plan = json!({
        "$schema": format!("./{SCHEMA_FILE_NAME}"),
        "$comment": "A Whilly plan. Fields: docs/plan-format.md, or `whilly plan schema`. \
    Check it with `whilly plan check FILE`, run it with `whilly run FILE`.",
        "project": project,
        "plan_id": id,
        "budget_usd": 5,
        "verification_commands": [
            {
                "$comment": "Run in the task's worktree after the agent; a task is DONE only when every required one passes.",
                "name": "notes-exist",
                "command": "test -s NOTES.md",
                "required": true
            }
        ],
        "tasks": [
            {
                "$comment": "Replace these two tasks with your own. Say what to build and where; list how to tell it is done.",
                "id": "T-001",
                "priority": "high",
                "description": "Write NOTES.md at the repository root: one paragraph saying what this repository is for, then a list of its top-level directories with one line each on what they hold.",
                "key_files": ["NOTES.md"],
                "acceptance_criteria": [
                    "NOTES.md exists at the repository root",
                    "every top-level directory is listed with one line"
                ],
                "test_steps": ["test -s NOTES.md"]
            },
            {
                "id": "T-002",
                "priority": "medium",
                "description": "Add a section headed '## How to test' to NOTES.md giving the exact command that runs this repository's tests, found from its build files.",
                "dependencies": ["T-001"],
                "key_files": ["NOTES.md"],
                "acceptance_criteria": ["NOTES.md has a '## How to test' section naming one command"],
                "test_steps": ["grep -q '^## How to test' NOTES.md"]
            }
        ]
    });
    let mut text = serde_json::to_string_pretty(&plan).unwrap_or_default();
    text.push('\n');
    text
}

/// A plan id from a directory name: lowercase letters, digits and `-`, never empty.
fn plan_id_for(project: &str) -> String {
    let mut id = String::new();
    for c in project.chars() {
        if c.is_ascii_alphanumeric() {
            id.push(c.to_ascii_lowercase());
        } else if !id.ends_with('-') && !id.is_empty() {
            id.push('-');
        }
    }
    let id = id.trim_end_matches('-');
    if id.is_empty() {
        "my-plan".to_string()
    } else {
        id.to_string()
    }
}

/// The schema as a value (it is a constant of this crate; a parse failure is a build bug the
/// tests catch).
pub fn schema_value() -> Value {
    serde_json::from_str(PLAN_SCHEMA).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::parse::{
        CARRIED_PLAN_KEYS, CARRIED_TASK_KEYS, PLAN_KEYS, REPO_TARGET_KEYS, TASK_KEYS,
        VERIFICATION_KEYS,
    };
    use crate::plan::{check_plan, parse_plan};

    #[test]
    fn the_starter_passes_check_with_no_warnings() {
        let text = starter_plan("My Repo!");
        let report = check_plan(text.as_bytes(), "tasks.json", true);
        assert!(report.diagnostics.is_empty(), "{:?}", report.diagnostics);
        let plan = report.plan.expect("plan");
        assert_eq!(plan.id, "my-repo");
        assert_eq!(plan.tasks.len(), 2);
    }

    #[test]
    fn plan_ids_are_tame() {
        assert_eq!(plan_id_for("--"), "my-plan");
        assert_eq!(plan_id_for("Web_App 2"), "web-app-2");
    }

    fn keys(schema: &Value, at: &str) -> Vec<String> {
        let mut k: Vec<String> = schema
            .pointer(at)
            .and_then(Value::as_object)
            .unwrap_or_else(|| panic!("no {at} in the schema"))
            .keys()
            .cloned()
            .collect();
        k.sort();
        k
    }

    fn sorted(lists: &[&[&str]]) -> Vec<String> {
        let mut k: Vec<String> = lists
            .iter()
            .flat_map(|l| l.iter().map(|s| (*s).to_string()))
            .collect();
        k.sort();
        k.dedup();
        k
    }

    #[test]
    fn the_schema_names_exactly_the_keys_the_parser_reads() {
        let s = schema_value();
        assert!(s.is_object(), "plan.schema.json is not JSON");
        assert_eq!(
            keys(&s, "/properties"),
            sorted(&[PLAN_KEYS, CARRIED_PLAN_KEYS])
        );
        assert_eq!(
            keys(&s, "/$defs/task/properties"),
            sorted(&[TASK_KEYS, CARRIED_TASK_KEYS])
        );
        assert_eq!(
            keys(&s, "/$defs/repo_target/properties"),
            sorted(&[REPO_TARGET_KEYS])
        );
        let mut vc = keys(&s, "/$defs/verification_command/properties");
        vc.retain(|k| k != "$comment");
        assert_eq!(vc, sorted(&[VERIFICATION_KEYS]));
    }

    #[test]
    fn the_starter_parses_as_v4() {
        let p = parse_plan(starter_plan("x").as_bytes(), "tasks.json");
        assert_eq!(
            p.plan.map(|p| p.format),
            Some(crate::domain::PlanFormat::V4)
        );
    }
}
