//! Which checks prove a task: its `test_steps` that are shell commands, and — when a plan has
//! no `verification_commands` — the repository's own checks (Cargo, Python, npm, Go). Pure:
//! whether a program exists and what the repository's files say are handed in.

use super::VerificationCommand;

/// A test step, as whilly will treat it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepKind {
    /// Runs in the worktree as a required check; the text is the command (a `$ ` prompt or
    /// surrounding backticks taken off).
    Command(String),
    /// Stays in the prompt only.
    Prose,
}

/// Shell builtins that begin commands in test steps (`test -s x`, `[ -f x ]`, `cd d && make`).
/// `read`, `wait`, `type`, `set`… are builtins too but begin English sentences far more often
/// than commands ("read the attempt log"), so they are left out.
const BUILTINS: &[&str] = &[
    "test", "[", "[[", "true", "false", "cd", "exit", "command", "printf", "echo", ":", "!",
];

/// Programs whose names are also English words a step may begin with ("make sure the tests
/// pass", "test that the page loads", "find the bug"): with these, a step made of plain words
/// only is prose.
const WORDY: &[&str] = &[
    "make", "test", "find", "read", "open", "look", "file", "time", "watch", "see", "touch",
    "write", "more", "less", "last", "check", "run", "install", "link", "print", "patch", "rename",
    "reset", "script", "size", "sort", "split", "join", "head", "tail", "type", "wait", "help",
    "set", "kill", "top", "who", "sleep", "cut", "paste", "yes", "echo", "ensure", "verify",
    "confirm", "start", "stop", "review", "build", "deploy", "compare", "show", "list", "use",
];

/// Classifies one step. `is_program(name)`: whether `name` is an executable on PATH.
pub fn classify_step(step: &str, is_program: impl Fn(&str) -> bool) -> StepKind {
    let text = strip_decoration(step);
    if text.is_empty() {
        return StepKind::Prose;
    }
    let words: Vec<&str> = text.split_whitespace().collect();
    let Some(&first) = words.first() else {
        return StepKind::Prose;
    };
    // Assignments (`FOO=1 cmd`) and paths (`./run.sh`, `bin/check`) begin commands.
    let starts_command = if first.contains('/') {
        true
    } else if first.contains('=') && !first.starts_with('=') {
        words.len() > 1
    } else {
        BUILTINS.contains(&first) || is_program(first)
    };
    if !starts_command {
        return StepKind::Prose;
    }
    if WORDY.contains(&first) && reads_like_a_sentence(text, &words) {
        return StepKind::Prose;
    }
    StepKind::Command(text.to_string())
}

/// `$ cmd`, `` `cmd` `` and trailing whitespace are decoration, not part of the command.
fn strip_decoration(step: &str) -> &str {
    let mut t = step.trim();
    if let Some(rest) = t.strip_prefix("$ ") {
        t = rest.trim_start();
    }
    if t.len() >= 2 && t.starts_with('`') && t.ends_with('`') && !t[1..t.len() - 1].contains('`') {
        t = t[1..t.len() - 1].trim();
    }
    t
}

/// Three or more words, none of them with anything a command line has (flags, paths, quotes,
/// operators, variables, digits, globs), and not `make <target>`-short: English.
fn reads_like_a_sentence(text: &str, words: &[&str]) -> bool {
    if words.len() < 3 {
        return false;
    }
    let shellish = |c: char| "-/.=|&><;$'\"`*~:[](){}\\0123456789_@%+,".contains(c);
    let body = text.trim_end_matches(['.', '!', '?']);
    !body.chars().any(shellish)
}

/// The checks a task's test steps add, named `test_steps[i]`, required, with `repair_max_attempts`
/// repair rounds; and the steps that stay prose, with their index.
pub fn step_checks(
    steps: &[String],
    repair_max_attempts: u32,
    is_program: impl Fn(&str) -> bool,
) -> (Vec<VerificationCommand>, Vec<(usize, String)>) {
    let (mut checks, mut prose) = (Vec::new(), Vec::new());
    for (i, s) in steps.iter().enumerate() {
        match classify_step(s, &is_program) {
            StepKind::Command(command) => checks.push(VerificationCommand {
                name: format!("test_steps[{i}]"),
                command,
                required: true,
                repair_max_attempts,
                timeout_secs: None,
            }),
            StepKind::Prose => prose.push((i, s.clone())),
        }
    }
    (checks, prose)
}

/// The changed `files` that no key file covers (a key file names a file, or a directory and
/// everything under it). Key files are advisory: this is what the agent wrote beyond them.
pub fn outside_key_files(files: &[String], key_files: &[String]) -> Vec<String> {
    let keys: Vec<&str> = key_files
        .iter()
        .map(|k| k.trim().trim_start_matches("./").trim_end_matches('/'))
        .filter(|k| !k.is_empty())
        .collect();
    files
        .iter()
        .filter(|f| {
            !keys.iter().any(|k| {
                f.as_str() == *k || f.strip_prefix(k).is_some_and(|rest| rest.starts_with('/'))
            })
        })
        .cloned()
        .collect()
}

/// What a repository says about itself, read by the caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepoFiles {
    pub cargo_toml: bool,
    /// `pyproject.toml`'s text, if there is one.
    pub pyproject: Option<String>,
    pub setup_cfg: bool,
    /// `ruff.toml` or `.ruff.toml` exists.
    pub ruff_toml: bool,
    /// `package.json`'s text, if there is one.
    pub package_json: Option<String>,
    pub go_mod: bool,
}

/// One check the repository's profile proposes; `program` is what must be on PATH for it to
/// run (a missing one is skipped with a notice, not failed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileCheck {
    pub name: String,
    pub command: String,
    pub program: String,
}

/// The repository's own checks, in the order they should run.
pub fn profile_checks(files: &RepoFiles) -> Vec<ProfileCheck> {
    let mut out = Vec::new();
    let mut add = |name: &str, command: &str, program: &str| {
        out.push(ProfileCheck {
            name: name.to_string(),
            command: command.to_string(),
            program: program.to_string(),
        })
    };
    if files.cargo_toml {
        add("cargo test", "cargo test", "cargo");
        add("cargo clippy", "cargo clippy -- -D warnings", "cargo");
    }
    if files.pyproject.is_some() || files.setup_cfg {
        add("pytest", "pytest -q", "pytest");
        let ruff_configured = files.ruff_toml
            || files
                .pyproject
                .as_deref()
                .is_some_and(|t| t.contains("[tool.ruff"));
        if ruff_configured {
            add("ruff", "ruff check", "ruff");
        }
    }
    if let Some(pkg) = &files.package_json
        && npm_has_tests(pkg)
    {
        add("npm test", "npm test", "npm");
    }
    if files.go_mod {
        add("go test", "go test ./...", "go");
        add("go vet", "go vet ./...", "go");
    }
    out
}

/// A `scripts.test` that is not npm's placeholder (`echo "Error: no test specified" && exit 1`).
fn npm_has_tests(package_json: &str) -> bool {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(package_json) else {
        return false;
    };
    v.get("scripts")
        .and_then(|s| s.get("test"))
        .and_then(|t| t.as_str())
        .is_some_and(|t| !t.trim().is_empty() && !t.contains("no test specified"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on_path(name: &str) -> bool {
        [
            "pytest", "grep", "make", "cargo", "sh", "python3", "find", "npm", "read",
        ]
        .contains(&name)
    }

    fn kind(s: &str) -> StepKind {
        classify_step(s, on_path)
    }

    #[test]
    fn commands_from_published_plans_run() {
        for (step, cmd) in [
            ("test -s HELLO.md", "test -s HELLO.md"),
            (
                "pytest -q tests/test_calc.py",
                "pytest -q tests/test_calc.py",
            ),
            ("grep -q '^# ' README.md", "grep -q '^# ' README.md"),
            (
                "test $(grep -c '^- ' NOTES.md) -ge 3",
                "test $(grep -c '^- ' NOTES.md) -ge 3",
            ),
            ("$ cargo test calc", "cargo test calc"),
            ("`pytest -q`", "pytest -q"),
            ("make test", "make test"),
            ("./scripts/check.sh", "./scripts/check.sh"),
            ("[ -f out.txt ]", "[ -f out.txt ]"),
            ("CI=1 npm test", "CI=1 npm test"),
            ("find . -name '*.py'", "find . -name '*.py'"),
            ("true", "true"),
        ] {
            assert_eq!(kind(step), StepKind::Command(cmd.into()), "{step}");
        }
    }

    #[test]
    fn prose_stays_prose() {
        for step in [
            "read the attempt log",
            "make sure the tests pass",
            "test that the page loads",
            "find the bug and fix it",
            "Run pytest and check the output",
            "Open the app in a browser.",
            "y",
            "none",
            "",
            "   ",
            "unbalanced 'quote",
            "cargo2 nothing here",
            "the output has three lines",
        ] {
            assert_eq!(kind(step), StepKind::Prose, "{step}");
        }
    }

    #[test]
    fn files_beyond_the_key_files_are_named() {
        let files: Vec<String> = ["calc.py", "src/a/b.rs", "README.md", "srcx/y"]
            .map(String::from)
            .to_vec();
        let keys = vec!["./calc.py".to_string(), "src/".to_string()];
        assert_eq!(outside_key_files(&files, &keys), ["README.md", "srcx/y"]);
        assert_eq!(outside_key_files(&files, &[]).len(), 4);
    }

    #[test]
    fn step_checks_are_named_by_index_and_required() {
        let steps = vec![
            "read the attempt log".to_string(),
            "test -s HELLO.md".to_string(),
        ];
        let (checks, prose) = step_checks(&steps, 2, on_path);
        assert_eq!(prose, [(0, "read the attempt log".to_string())]);
        assert_eq!(checks.len(), 1);
        assert_eq!(checks[0].name, "test_steps[1]");
        assert_eq!(checks[0].command, "test -s HELLO.md");
        assert!(checks[0].required);
        assert_eq!(checks[0].repair_max_attempts, 2);
    }

    #[test]
    fn profiles_propose_the_repository_s_own_checks() {
        let names = |f: &RepoFiles| -> Vec<String> {
            profile_checks(f).into_iter().map(|c| c.command).collect()
        };
        assert!(names(&RepoFiles::default()).is_empty());
        assert_eq!(
            names(&RepoFiles {
                cargo_toml: true,
                ..Default::default()
            }),
            ["cargo test", "cargo clippy -- -D warnings"]
        );
        assert_eq!(
            names(&RepoFiles {
                pyproject: Some("[project]\nname='x'\n".into()),
                ..Default::default()
            }),
            ["pytest -q"]
        );
        assert_eq!(
            names(&RepoFiles {
                pyproject: Some("[tool.ruff]\nline-length=100\n".into()),
                ..Default::default()
            }),
            ["pytest -q", "ruff check"]
        );
        assert_eq!(
            names(&RepoFiles {
                package_json: Some(
                    r#"{"scripts":{"test":"echo \"Error: no test specified\" && exit 1"}}"#.into()
                ),
                ..Default::default()
            }),
            Vec::<String>::new()
        );
        assert_eq!(
            names(&RepoFiles {
                package_json: Some(r#"{"scripts":{"test":"jest"}}"#.into()),
                go_mod: true,
                ..Default::default()
            }),
            ["npm test", "go test ./...", "go vet ./..."]
        );
    }
}
