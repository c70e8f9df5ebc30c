//! Which checks prove a task: its `test_steps` that are shell commands, and — when a plan has
//! no `verification_commands` — the repository's own checks (Cargo, Python, npm, Go). Pure:
//! whether a program exists and what the repository's files say are handed in.

use super::VerificationCommand;

/// A test step, as whilly will treat it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StepKind {
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

/// Test tools a step may name whether or not this machine has them: a step that begins with
/// one is a command, and a missing program fails its check instead of turning it into prose.
const KNOWN_TOOLS: &[&str] = &[
    "pytest",
    "py.test",
    "tox",
    "nox",
    "python",
    "python3",
    "pip",
    "uv",
    "poetry",
    "pipenv",
    "hatch",
    "ruff",
    "mypy",
    "pyright",
    "flake8",
    "black",
    "isort",
    "pylint",
    "cargo",
    "rustc",
    "npm",
    "npx",
    "yarn",
    "pnpm",
    "node",
    "deno",
    "bun",
    "jest",
    "vitest",
    "mocha",
    "eslint",
    "tsc",
    "prettier",
    "go",
    "gofmt",
    "golangci-lint",
    "bash",
    "sh",
    "zsh",
    "grep",
    "rg",
    "diff",
    "cmp",
    "jq",
    "curl",
    "git",
    "ctest",
    "cmake",
    "ninja",
    "mvn",
    "gradle",
    "dotnet",
    "ruby",
    "bundle",
    "rake",
    "rspec",
    "php",
    "phpunit",
    "composer",
    "mix",
    "elixir",
    "swift",
    "javac",
    "java",
    "kotlinc",
    "sbt",
    "stack",
    "cabal",
    "zig",
    "just",
    "bats",
    "shellcheck",
    "docker",
    "perl",
    "lua",
    "busted",
    "helm",
    "kubectl",
    "terraform",
];

/// Words that make a line of plain words English rather than a command's arguments.
const STOPWORDS: &[&str] = &[
    "the", "a", "an", "to", "on", "in", "of", "for", "with", "by", "that", "and", "is", "are",
    "every", "all", "it", "its", "at", "from", "into",
];

/// Classifies one step by its shape. `is_program(name)`: whether `name` is an executable on
/// PATH; it only ever makes a step a command, never prose: a step that reads as a command line
/// whose program is missing stays a command (and fails its check, see [`missing_programs`]).
pub(crate) fn classify_step(step: &str, is_program: impl Fn(&str) -> bool) -> StepKind {
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
        BUILTINS.contains(&first)
            || KNOWN_TOOLS.contains(&first)
            || is_program(first)
            || looks_like_a_command_line(first, &words[1..])
    };
    if !starts_command {
        return StepKind::Prose;
    }
    // "make sure the tests pass", "go to the page and log in": English, whatever is on PATH.
    let sentence = reads_like_a_sentence(text, &words);
    let tool_as_word = KNOWN_TOOLS.contains(&first)
        && !is_program(first)
        && words[1..]
            .iter()
            .any(|w| STOPWORDS.contains(&w.to_ascii_lowercase().as_str()));
    if sentence && (WORDY.contains(&first) || tool_as_word) {
        return StepKind::Prose;
    }
    StepKind::Command(text.to_string())
}

/// A program this machine may not have, by the look of its arguments: a lower-case program
/// name that is no English word a step begins with, then a flag (`-q`, `--all`) or a file path
/// (`tests/x.py`, `x.py`).
fn looks_like_a_command_line(first: &str, rest: &[&str]) -> bool {
    let program_shaped = first.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && first
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._+-".contains(c));
    const ENGLISH: &[&str] = &[
        "the",
        "a",
        "an",
        "all",
        "each",
        "every",
        "no",
        "if",
        "when",
        "then",
        "and",
        "or",
        "it",
        "this",
        "that",
        "should",
        "must",
        "add",
        "update",
        "fix",
        "refactor",
        "implement",
        "create",
        "remove",
        "delete",
        "rename",
        "move",
        "document",
        "ask",
        "tell",
        "manually",
        "visually",
        "inspect",
        "observe",
        "go",
        "do",
    ];
    let flag = |w: &&str| {
        w.len() > 1
            && w.starts_with('-')
            && w[1..]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '-')
    };
    let path = |w: &&str| {
        let w = w.trim_matches(|c: char| "'\"`,".contains(c));
        (w.contains('/') && !w.contains("://"))
            || w.rsplit_once('.').is_some_and(|(stem, ext)| {
                !stem.is_empty()
                    && (1..=5).contains(&ext.len())
                    && ext.chars().all(|c| c.is_ascii_alphanumeric())
                    && ext.chars().any(|c| c.is_ascii_alphabetic())
            })
    };
    program_shaped
        && !WORDY.contains(&first)
        && !ENGLISH.contains(&first)
        && rest.first().is_some_and(|w| flag(w) || path(w))
}

/// The programs `command` runs that cannot be found: the first word of each part of a
/// `&&`/`||`/`;`/`|` list, past `VAR=value` assignments, that is no builtin, no path (a script
/// the task may write) and no expansion. A check whose program is missing cannot pass: it is
/// reported before any agent runs, and run anyway it fails (`sh` exits 127).
pub(crate) fn missing_programs(command: &str, is_program: impl Fn(&str) -> bool) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut at_start = true;
    for word in command.split_whitespace() {
        let word = word.trim_start_matches(['(', '{', '!']);
        if SEPARATORS.contains(&word) {
            at_start = true;
            continue;
        }
        if !at_start {
            // `a; b` and `a|b` written without spaces still begin a new part.
            if word.ends_with(';') || word.ends_with('|') {
                at_start = true;
            }
            continue;
        }
        // Assignments, and the flags and numbers of `env -i`, `timeout 60`, come before the program.
        let before_program = (word.contains('=') && !word.starts_with('='))
            || word.starts_with('-')
            || word.starts_with(|c: char| c.is_ascii_digit());
        if word.is_empty() || before_program {
            continue;
        }
        at_start = word.ends_with(';');
        let name = word.trim_end_matches([';', ')', '}']);
        let skip = name.is_empty()
            || name.contains('/')
            || name.contains('$')
            || name.contains('`')
            || name.starts_with(['"', '\''])
            || BUILTINS.contains(&name)
            || SHELL_WORDS.contains(&name);
        if !skip && !is_program(name) && !out.iter().any(|p| p == name) {
            out.push(name.to_string());
        }
    }
    out
}

/// Words after which a command begins again.
const SEPARATORS: &[&str] = &[
    "&&", "||", ";", "|", "if", "elif", "while", "until", "then", "do", "else", "!", "exec",
    "time", "env", "xargs", "nohup", "timeout",
];

/// Shell keywords and builtins a part of a command list may begin with, beyond [`BUILTINS`].
const SHELL_WORDS: &[&str] = &[
    "fi", "for", "while", "until", "done", "case", "esac", "in", "export", "set", "unset",
    "source", ".", "eval", "read", "wait", "type", "shift", "return", "trap", "umask", "ulimit",
    "pwd", "local", "alias", "hash", "let",
];

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
pub(crate) fn step_checks(
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
pub(crate) fn outside_key_files(files: &[String], key_files: &[String]) -> Vec<String> {
    use super::graph::normalize_key_file;
    let keys: Vec<String> = key_files
        .iter()
        .map(|k| normalize_key_file(k))
        .filter(|k| !k.is_empty())
        .collect();
    files
        .iter()
        .filter(|f| {
            let f = normalize_key_file(f);
            // A key file covers itself and, as a directory, what lies under it.
            !keys.iter().any(|k| {
                f == *k
                    || f.strip_prefix(k.as_str())
                        .is_some_and(|r| r.starts_with('/'))
            })
        })
        .cloned()
        .collect()
}

/// What a repository says about itself, read by the caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RepoFiles {
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
/// run (a missing one fails the check: the repository has checks, this machine cannot run them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProfileCheck {
    pub name: String,
    pub command: String,
    pub program: String,
}

/// The repository's own checks, in the order they should run.
pub(crate) fn profile_checks(files: &RepoFiles) -> Vec<ProfileCheck> {
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

    fn nothing_on_path(_: &str) -> bool {
        false
    }

    #[test]
    fn a_missing_program_never_turns_a_command_into_prose() {
        for step in [
            "pytest -q tests/test_stats.py",
            "cargo test calc",
            "npm test",
            "go test ./...",
            "ruff check .",
            "mytool -q",
            "validate-json out/report.json",
        ] {
            assert!(
                matches!(classify_step(step, nothing_on_path), StepKind::Command(_)),
                "{step}"
            );
        }
        for step in [
            "go to the page and log in",
            "pytest passes on every file",
            "Check the output by hand",
            "add a note to the README",
            "fix it -- carefully",
        ] {
            assert_eq!(
                classify_step(step, nothing_on_path),
                StepKind::Prose,
                "{step}"
            );
        }
    }

    #[test]
    fn missing_programs_are_named_once_per_part_of_a_command_list() {
        let only = |have: &'static [&'static str]| move |p: &str| have.contains(&p);
        assert_eq!(
            missing_programs("pytest -q tests/x.py", only(&[])),
            ["pytest"]
        );
        assert!(missing_programs("pytest -q", only(&["pytest"])).is_empty());
        assert_eq!(
            missing_programs(
                "cd api && CI=1 pytest -q | tee out; ruff check",
                only(&["tee"])
            ),
            ["pytest", "ruff"]
        );
        assert_eq!(
            missing_programs("if mypy src; then echo ok; fi", only(&[])),
            ["mypy"]
        );
        // Builtins, scripts the task may write, expansions and arguments are not programs.
        assert!(
            missing_programs(
                "test -s x && [ -f y ] && ./check.sh && $CHECKER a && bin/run --pytest",
                only(&[])
            )
            .is_empty()
        );
        assert_eq!(missing_programs("pytest; pytest -x", only(&[])), ["pytest"]);
        assert_eq!(
            missing_programs("timeout 60 env -i pytest", only(&["timeout"])),
            ["pytest"]
        );
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
            // Missing here, still commands: their check fails instead of vanishing.
            (
                "pytest -q tests/test_stats.py",
                "pytest -q tests/test_stats.py",
            ),
            ("tox -e py311", "tox -e py311"),
            ("mytool --check src/", "mytool --check src/"),
            ("phpunit tests/Unit", "phpunit tests/Unit"),
            ("jest", "jest"),
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
