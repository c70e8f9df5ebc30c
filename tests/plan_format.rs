//! The plan format a new user meets, with the real binary: `whilly plan new` writes a plan that
//! checks clean and runs to DONE as written, `whilly plan schema` is the schema editors use and
//! an independent validator holds plans to it, `docs/plan-format.md` names every field and its
//! example passes `plan check`, `status` may be left out, and errors about a field say what it
//! takes.

use std::path::Path;
use std::process::{Command, Output};

fn whilly(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_whilly"))
        .args(args)
        .current_dir(dir)
        .env_remove("WHILLY_DATABASE_URL")
        .env("XDG_CONFIG_HOME", dir.join(".xdg"))
        .env("HOME", dir)
        .output()
        .expect("run whilly")
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A git repository with one commit and a command agent `agent.sh` (its script given).
fn repo(agent: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let repo = git2::Repository::init(p).unwrap();
    let script = p.join("agent.sh");
    std::fs::write(&script, agent).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(p.join(".gitignore"), ".whilly/\n").unwrap();
    let mut index = repo.index().unwrap();
    index.add_path(Path::new("agent.sh")).unwrap();
    index.add_path(Path::new(".gitignore")).unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("t", "t@example.com").unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "init", &tree, &[])
        .unwrap();
    std::fs::write(
        p.join("whilly.toml"),
        format!(
            "[run]\nagent = \"command\"\n[agents.command]\ntemplate = \"{}\"\n",
            script.display()
        ),
    )
    .unwrap();
    dir
}

fn schema() -> jsonschema::Validator {
    let dir = tempfile::tempdir().unwrap();
    let o = whilly(dir.path(), &["plan", "schema"]);
    assert!(o.status.success(), "{}", text(&o));
    let schema: serde_json::Value = serde_json::from_slice(&o.stdout).expect("schema is JSON");
    jsonschema::draft202012::new(&schema).expect("a valid draft 2020-12 schema")
}

fn doc() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/plan-format.md"))
        .expect("docs/plan-format.md")
}

/// The ```json blocks of the doc, in order.
fn doc_examples() -> Vec<String> {
    let doc = doc();
    let mut out = Vec::new();
    let mut rest = doc.as_str();
    while let Some(start) = rest.find("```json\n") {
        let body = &rest[start + 8..];
        let end = body.find("```").expect("a closed block");
        out.push(body[..end].to_string());
        rest = &body[end..];
    }
    out
}

#[test]
fn plan_new_writes_a_plan_that_checks_clean_and_runs_to_done() {
    // The agent does what the starter's two tasks ask, so the whole loop runs as written.
    let dir = repo(
        "#!/bin/sh\n\
         if [ -s NOTES.md ]; then printf '\\n## How to test\\n\\nmake test\\n' >> NOTES.md; \
         else printf 'What this is.\\n\\n- agent.sh: the agent\\n' > NOTES.md; fi\n\
         echo '<promise>COMPLETE</promise>'\n",
    );
    let p = dir.path();
    let o = whilly(p, &["plan", "new"]);
    assert!(o.status.success(), "{}", text(&o));
    let said = text(&o);
    assert!(
        said.contains("tasks.json") && said.contains("whilly-plan.schema.json"),
        "{said}"
    );
    assert!(
        said.contains("whilly run tasks.json"),
        "the next step is said: {said}"
    );
    let plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(p.join("tasks.json")).unwrap()).unwrap();
    assert_eq!(plan["$schema"], "./whilly-plan.schema.json");
    // The schema beside it is what `plan schema` prints, and the plan passes it.
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(p.join("whilly-plan.schema.json")).unwrap()).unwrap();
    let printed = whilly(p, &["plan", "schema"]);
    assert_eq!(
        written,
        serde_json::from_slice::<serde_json::Value>(&printed.stdout).unwrap()
    );
    let errors: Vec<String> = schema().iter_errors(&plan).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");

    let o = whilly(p, &["plan", "check", "tasks.json", "--strict"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("0 errors, 0 warnings"),
        "no warning: {}",
        text(&o)
    );

    // Never over a plan someone wrote.
    std::fs::write(p.join("tasks.json"), b"{\"mine\": true}").unwrap();
    let o = whilly(p, &["plan", "new"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("--force"), "{}", text(&o));
    assert_eq!(
        std::fs::read(p.join("tasks.json")).unwrap(),
        b"{\"mine\": true}"
    );
    let o = whilly(p, &["plan", "new", "--force", "--project", "Billing API"]);
    assert!(o.status.success(), "{}", text(&o));

    let o = whilly(p, &["run", "tasks.json", "--headless"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let shown = whilly(p, &["plan", "show", "billing-api", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("plan show --json");
    let statuses: Vec<&str> = v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["DONE", "DONE"], "{v}");
    let notes = String::from_utf8_lossy(
        &Command::new("git")
            .args(["show", "HEAD:NOTES.md"])
            .current_dir(p)
            .output()
            .unwrap()
            .stdout,
    )
    .into_owned();
    assert!(notes.contains("## How to test"), "landed: {notes}");
}

#[test]
fn the_docs_examples_pass_check_and_the_schema() {
    let examples = doc_examples();
    assert!(examples.len() >= 2, "a v4 and a v3 example");
    let validator = schema();
    let dir = repo("#!/bin/sh\necho '<promise>COMPLETE</promise>'\n");
    for (i, example) in examples.iter().enumerate() {
        let v: serde_json::Value = serde_json::from_str(example)
            .unwrap_or_else(|e| panic!("example {i} is not JSON: {e}\n{example}"));
        let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "example {i}: {errors:?}");
        let file = format!("example-{i}.json");
        std::fs::write(dir.path().join(&file), example).unwrap();
        let o = whilly(dir.path(), &["plan", "check", &file, "--json"]);
        let report: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
        let unexpected: Vec<&serde_json::Value> = report["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            // The example's checks call pytest, which this machine may lack: said, not an error.
            .filter(|d| d["code"] != "check_program_missing")
            .collect();
        assert!(
            unexpected.is_empty() && o.status.success(),
            "example {i}: {unexpected:?}\n{}",
            text(&o)
        );
    }
    // The first example is v4 and leaves `status` out: a new plan need not say it.
    let first: serde_json::Value = serde_json::from_str(&examples[0]).unwrap();
    assert!(first.get("plan_id").is_some());
    assert!(
        first["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t.get("status").is_none())
    );
}

#[test]
fn the_doc_names_every_field_the_schema_knows() {
    let dir = tempfile::tempdir().unwrap();
    let o = whilly(dir.path(), &["plan", "schema"]);
    let schema: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let doc = doc();
    let mut missing = Vec::new();
    for at in [
        "/properties",
        "/$defs/task/properties",
        "/$defs/verification_command/properties",
        "/$defs/repo_target/properties",
    ] {
        for key in schema.pointer(at).unwrap().as_object().unwrap().keys() {
            if !doc.contains(&format!("`{key}`")) {
                missing.push(format!("{at}: {key}"));
            }
            let described = schema
                .pointer(&format!("{at}/{}", key.replace('/', "~1")))
                .and_then(|p| p.get("description"))
                .is_some();
            assert!(described, "{at}/{key} has no description for editors");
        }
    }
    assert!(
        missing.is_empty(),
        "not in docs/plan-format.md: {missing:?}"
    );
    for status in [
        "pending",
        "done",
        "skipped",
        "failed",
        "blocked",
        "human_loop",
    ] {
        assert!(doc.contains(&format!("`{status}`")), "status {status}");
    }
}

#[test]
fn the_schema_refuses_what_the_parser_refuses() {
    let validator = schema();
    for bad in [
        serde_json::json!({"tasks": []}),
        serde_json::json!({"project": "p"}),
        serde_json::json!({"project": "p", "tasks": [{"id": "A", "status": "sleeping"}]}),
        serde_json::json!({"project": "p", "tasks": [{"id": "A", "priority": 5}]}),
        serde_json::json!({"project": "p", "tasks": [{"id": "A", "dependencies": "B"}]}),
        serde_json::json!({"project": "p", "tasks": [{"description": "no id"}]}),
        serde_json::json!({"project": "p", "budget_usd": -1, "tasks": []}),
        serde_json::json!({"project": "p", "verification_commands": [{"name": "x"}], "tasks": []}),
    ] {
        assert!(!validator.is_valid(&bad), "the schema accepts {bad}");
    }
}

#[test]
fn status_is_optional_and_bad_values_say_what_the_field_takes() {
    let dir = repo("#!/bin/sh\necho '<promise>COMPLETE</promise>'\n");
    let p = dir.path();
    let task = |extra: serde_json::Value| {
        let mut t = serde_json::json!({"id": "A", "priority": "high",
            "description": "Write the output file for the report generator",
            "acceptance_criteria": ["out.txt exists"], "test_steps": ["true"]});
        for (k, v) in extra.as_object().unwrap() {
            t[k] = v.clone();
        }
        serde_json::json!({"plan_id": "p", "project": "p", "tasks": [t]})
    };
    std::fs::write(p.join("ok.json"), task(serde_json::json!({})).to_string()).unwrap();
    let o = whilly(p, &["plan", "check", "ok.json", "--strict"]);
    assert!(o.status.success(), "v4 without status: {}", text(&o));

    for (field, value, says) in [
        ("status", serde_json::json!("sleeping"), ["pending", "done"]),
        ("status", serde_json::json!(3), ["pending", "done"]),
        ("priority", serde_json::json!("urgent"), ["critical", "low"]),
        ("priority", serde_json::json!(true), ["critical", "low"]),
    ] {
        std::fs::write(
            p.join("bad.json"),
            task(serde_json::json!({ field: value })).to_string(),
        )
        .unwrap();
        let o = whilly(p, &["plan", "check", "bad.json"]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let all = text(&o);
        assert!(
            all.contains(&format!("/tasks/0/{field}")) && says.iter().all(|w| all.contains(w)),
            "{field}={value}: {all}"
        );
    }
}
