//! The canonical plan file: v4 shape, fixed key order, two-space indent, trailing newline.
//!
//! Canonical means `export(parse(export(p)))` is byte-identical to `export(p)`, so exports can be
//! diffed and committed. Rules: statuses and priorities lower-case; `None` fields and empty `tags`
//! left out; the four list fields of the original (dependencies, key_files, acceptance_criteria,
//! test_steps) always written, as the original's tools expect them; unknown keys kept, sorted,
//! after the known ones (nested values keep their own order); `tasks` last.

use super::parse::{PLAN_KEYS, REPO_TARGET_KEYS, TASK_KEYS};
use crate::domain::{PlanSpec, RepoTarget, Status, TaskSpec, Usd, VerificationCommand};
use serde_json::{Map, Number, Value};

/// The canonical JSON text of `plan`.
pub fn canonical_json(plan: &PlanSpec) -> String {
    let mut text =
        serde_json::to_string_pretty(&canonical_value(plan)).unwrap_or_else(|_| "{}".to_string());
    text.push('\n');
    text
}

/// The canonical document as a value (keys in canonical order).
pub fn canonical_value(plan: &PlanSpec) -> Value {
    let mut m = Map::new();
    m.insert("project".into(), Value::String(plan.project.clone()));
    m.insert("plan_id".into(), Value::String(plan.id.clone()));
    if let Some(b) = plan.budget_usd {
        m.insert("budget_usd".into(), usd(b));
    }
    put_opt(&mut m, "agent", &plan.agent);
    if !plan.verification_commands.is_empty() {
        let vcs = plan
            .verification_commands
            .iter()
            .map(verification_command)
            .collect();
        m.insert("verification_commands".into(), Value::Array(vcs));
    }
    if !plan.repo_targets.is_empty() {
        let rts = plan.repo_targets.iter().map(repo_target).collect();
        m.insert("repo_targets".into(), Value::Array(rts));
    }
    put_extra(&mut m, &plan.extra, PLAN_KEYS);
    m.insert(
        "tasks".into(),
        Value::Array(plan.tasks.iter().map(task).collect()),
    );
    Value::Object(m)
}

/// Whole dollars as integers (`5`, not `5.0`), fractions as the shortest exact decimal.
fn usd(u: Usd) -> Value {
    if u.0 % 1_000_000 == 0 {
        Value::Number(Number::from(u.0 / 1_000_000))
    } else {
        Number::from_f64(u.as_f64()).map_or(Value::Null, Value::Number)
    }
}

fn status_str(s: Status) -> String {
    s.as_str().to_ascii_lowercase()
}

fn put_opt(m: &mut Map<String, Value>, key: &str, v: &Option<String>) {
    if let Some(s) = v {
        m.insert(key.into(), Value::String(s.clone()));
    }
}

fn strings(v: &[String]) -> Value {
    Value::Array(v.iter().cloned().map(Value::String).collect())
}

/// Unknown keys, sorted; a key that collides with a known one (only possible for plans built in
/// code) is dropped rather than written twice.
fn put_extra(m: &mut Map<String, Value>, extra: &Map<String, Value>, known: &[&str]) {
    let mut keys: Vec<&String> = extra
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .collect();
    keys.sort();
    for k in keys {
        if let Some(v) = extra.get(k) {
            m.insert(k.clone(), v.clone());
        }
    }
}

fn verification_command(vc: &VerificationCommand) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), Value::String(vc.name.clone()));
    m.insert("command".into(), Value::String(vc.command.clone()));
    m.insert("required".into(), Value::Bool(vc.required));
    m.insert(
        "repair_max_attempts".into(),
        Value::Number(vc.repair_max_attempts.into()),
    );
    if let Some(t) = vc.timeout_secs {
        m.insert("timeout".into(), Value::Number(t.into()));
    }
    Value::Object(m)
}

fn repo_target(rt: &RepoTarget) -> Value {
    let mut m = Map::new();
    m.insert("id".into(), Value::String(rt.id.clone()));
    put_opt(&mut m, "provider", &rt.provider);
    put_opt(&mut m, "repo_full_name", &rt.repo);
    put_opt(&mut m, "clone_url", &rt.clone_url);
    put_opt(&mut m, "default_branch", &rt.default_branch);
    // `repo` may legitimately be in extra (a second spelling next to repo_full_name).
    let known: Vec<&str> = REPO_TARGET_KEYS
        .iter()
        .copied()
        .filter(|k| *k != "repo" || rt.repo.is_none())
        .collect();
    put_extra(&mut m, &rt.extra, &known);
    Value::Object(m)
}

fn task(t: &TaskSpec) -> Value {
    let mut m = Map::new();
    m.insert("id".into(), Value::String(t.id.clone()));
    m.insert(
        "status".into(),
        Value::String(status_str(t.status.unwrap_or(Status::Pending))),
    );
    m.insert(
        "priority".into(),
        Value::String(t.priority.as_str().to_string()),
    );
    m.insert("description".into(), Value::String(t.description.clone()));
    put_opt(&mut m, "phase", &t.phase);
    put_opt(&mut m, "category", &t.category);
    m.insert("dependencies".into(), strings(&t.dependencies));
    m.insert("key_files".into(), strings(&t.key_files));
    m.insert(
        "acceptance_criteria".into(),
        strings(&t.acceptance_criteria),
    );
    m.insert("test_steps".into(), strings(&t.test_steps));
    put_opt(&mut m, "prd_requirement", &t.prd_requirement);
    put_opt(&mut m, "repo_target_id", &t.repo_target_id);
    if let Some(b) = t.budget_usd {
        m.insert("budget_usd".into(), usd(b));
    }
    if let Some(s) = t.timeout_secs {
        m.insert("timeout".into(), Value::Number(s.into()));
    }
    put_opt(&mut m, "agent", &t.agent);
    if let Some(n) = t.max_attempts {
        m.insert("max_attempts".into(), Value::Number(n.into()));
    }
    if !t.tags.is_empty() {
        m.insert("tags".into(), strings(&t.tags));
    }
    put_extra(&mut m, &t.extra, TASK_KEYS);
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{PlanFormat, Priority};
    use crate::plan::parse::parse_plan;
    use serde_json::json;

    fn reparse(text: &str) -> PlanSpec {
        let p = parse_plan(text.as_bytes(), "export.json");
        // Keys of our own making (`zeta`, `alpha`) are kept, with a warning that nothing reads them.
        assert!(
            p.diagnostics.iter().all(|d| d.code == "unknown_field"),
            "{:?}",
            p.diagnostics
        );
        p.plan.expect("plan")
    }

    #[test]
    fn key_order_and_shape() {
        let mut extra = Map::new();
        extra.insert("zeta".into(), json!(1));
        extra.insert("alpha".into(), json!({"b": 1, "a": 2}));
        let plan = PlanSpec {
            id: "p".into(),
            project: "proj".into(),
            budget_usd: Some(Usd(5_000_000)),
            extra,
            tasks: vec![TaskSpec {
                id: "T-1".into(),
                status: Some(Status::InProgress),
                priority: Priority::High,
                description: "Описание задачи".into(),
                budget_usd: Some(Usd(250_000)),
                timeout_secs: Some(90),
                ..TaskSpec::default()
            }],
            ..PlanSpec::default()
        };
        let text = canonical_json(&plan);
        let expected = r#"{
  "project": "proj",
  "plan_id": "p",
  "budget_usd": 5,
  "alpha": {
    "b": 1,
    "a": 2
  },
  "zeta": 1,
  "tasks": [
    {
      "id": "T-1",
      "status": "in_progress",
      "priority": "high",
      "description": "Описание задачи",
      "dependencies": [],
      "key_files": [],
      "acceptance_criteria": [],
      "test_steps": [],
      "budget_usd": 0.25,
      "timeout": 90
    }
  ]
}
"#;
        assert_eq!(text, expected);
        let back = reparse(&text);
        assert_eq!(back.format, PlanFormat::V4);
        assert_eq!(
            PlanSpec {
                format: plan.format,
                ..back.clone()
            },
            plan
        );
        assert_eq!(canonical_json(&back), text);
    }

    #[test]
    fn full_plan_round_trips() {
        let src = json!({
            "project": "p", "plan_id": "p", "agent": "claude", "budget_usd": 0.1,
            "verification_commands": [{"name": "t", "command": "make test", "required": false, "repair_max_attempts": 2, "timeout": "5m"}],
            "repo_targets": [{"id": "main", "provider": "github", "repo_full_name": "o/r", "repo": "o/x", "clone_url": "u", "default_branch": "main", "k": [1]}],
            "tasks": [{"id": "A", "status": "HUMAN_LOOP", "priority": "p0", "description": "x", "repo_target_id": "main",
                       "agent": "codex", "max_attempts": 4, "tags": ["linux"], "phase": "1", "category": "c", "prd_requirement": "r",
                       "github_issue": 7, "timeout": "1h"}]
        });
        let plan = reparse(&src.to_string());
        let text = canonical_json(&plan);
        let again = reparse(&text);
        assert_eq!(again, plan);
        assert_eq!(canonical_json(&again), text);
        assert!(text.contains("\"status\": \"human_loop\""));
        assert!(text.contains("\"priority\": \"critical\""));
    }
}
