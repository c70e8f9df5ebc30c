//! The `command` backend end to end: the argv our template produces reaches a real process
//! word for word, with nothing shell-interpreted, and its output parses.

use std::path::Path;
use std::process::Command;
use whilly::agent::backend::{AgentSettings, BackendKind, Invocation};
use whilly::agent::{PriceTable, build_backend};

fn run(
    template: &str,
    prompt: &str,
    dir: &Path,
) -> (
    Vec<String>,
    std::process::Output,
    whilly::agent::AgentResult,
) {
    let mut s = AgentSettings::new(BackendKind::Command);
    s.name = "script".into();
    s.command = Some(template.to_string());
    let backend = build_backend(&s).expect("backend");
    let prompt_file = dir.join("prompt.md");
    std::fs::write(&prompt_file, prompt).expect("prompt file");
    let inv = Invocation {
        prompt,
        prompt_file: &prompt_file,
        workdir: dir,
        task_id: "GH-12",
    };
    let cmd = backend.command(&inv).expect("command");
    let out = Command::new(&cmd.program)
        .args(&cmd.args)
        .envs(cmd.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&cmd.cwd)
        .output()
        .expect("run");
    let result = backend.parse_result(&out.stdout, &PriceTable::new());
    (cmd.args, out, result)
}

#[test]
fn hostile_prompt_stays_one_argument_and_is_never_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let prompt = "fix it; touch pwned1 && echo \"$(touch pwned2)\" `touch pwned3` 'quote' {workdir}\nsecond line";
    // printf prints each argument on its own line between markers, so we can see the split.
    let template = r#"sh -c 'for a in "$@"; do printf "<%s>\n" "$a"; done; echo "<promise>COMPLETE</promise>"' agent {task_id} {prompt} --file={prompt_file}"#;
    let (args, out, result) = run(template, prompt, dir.path());
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(args[3], "GH-12");
    assert_eq!(args[4], prompt, "the prompt must be exactly one argument");
    assert!(stdout.contains(&format!("<{prompt}>")), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "<--file={}>",
            dir.path().join("prompt.md").display()
        )),
        "{stdout}"
    );
    for f in ["pwned1", "pwned2", "pwned3"] {
        assert!(
            !dir.path().join(f).exists(),
            "{f} was created: the prompt reached a shell"
        );
    }
    assert!(result.marker_found, "{result:?}");
}

#[test]
fn marker_in_an_echoed_prompt_does_not_count() {
    let dir = tempfile::tempdir().expect("tempdir");
    let prompt = "Rules: end with <promise>COMPLETE</promise> only on success.\nBegin now.";
    let (_, out, result) = run("cat {prompt_file}", prompt, dir.path());
    assert!(out.status.success());
    assert!(!result.marker_found, "{result:?}");
}
