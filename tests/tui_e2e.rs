//! The console end to end: the real binary (`whilly tui plan.json`) in a tmux session with a
//! `command` agent in a temporary git repository. Panes show the agent's output live, `?` shows
//! help, `z` zooms, `i` types into the agent and Ctrl-] returns, `q` quits (stopping running
//! agents when asked) and the terminal is restored: the shell is back, not the alternate screen.
//!
//! Until `whilly tui` is mounted in the CLI, the console is started through this test binary
//! itself (`console_child`, which calls the same `whilly::tui::command::run`).

#[path = "support/engine.rs"]
mod engine;
#[path = "support/tmux.rs"]
mod tmux;

use clap::Parser;
use engine::{Repo, plan, task, wait_for};
use std::process::Command;
use std::time::Duration;
use tmux::{Tmux, sh_quote};

const CHILD_VAR: &str = "WHILLY_TUI_TEST_CHILD";

#[derive(Parser)]
struct ChildCli {
    #[command(flatten)]
    global: whilly::cli::args::GlobalArgs,
    #[command(flatten)]
    run: whilly::cli::args::RunArgs,
}

/// Not a test of its own: the console process when this binary is started by the tests below.
#[test]
fn console_child() {
    let Ok(args) = std::env::var(CHILD_VAR) else {
        return;
    };
    let cli = ChildCli::parse_from(
        std::iter::once("whilly").chain(args.split(' ').filter(|a| !a.is_empty())),
    );
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let code = rt.block_on(async {
        let ctx = whilly::cli::context::Context::new(cli.global)?;
        whilly::tui::command::run(&ctx, cli.run).await
    });
    let code = match code {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e:#}");
            1
        }
    };
    std::process::exit(code);
}

fn tui_is_mounted() -> bool {
    Command::new(env!("CARGO_BIN_EXE_whilly"))
        .args(["tui", "--help"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A script that starts the console in `repo` with the sealed environment of the engine tests.
fn console_script(repo: &Repo) -> std::path::PathBuf {
    let probe = repo.whilly(&[]);
    let mut env_line = String::from("env -i");
    for (k, v) in probe.get_envs() {
        if let Some(v) = v {
            env_line.push_str(&format!(
                " {}={}",
                k.to_string_lossy(),
                sh_quote(&v.to_string_lossy())
            ));
        }
    }
    let program = if tui_is_mounted() {
        format!("{} tui plan.json", sh_quote(env!("CARGO_BIN_EXE_whilly")))
    } else {
        let exe = std::env::current_exe().expect("test exe");
        format!(
            "{CHILD_VAR}=plan.json {} console_child --exact --nocapture --test-threads=1 -q",
            sh_quote(&exe.to_string_lossy())
        )
    };
    let script = format!(
        "cd {}\n{env_line} TERM=xterm-256color {program}\necho \"EXIT=$?\"\n",
        sh_quote(&repo.repo.to_string_lossy())
    );
    let path = repo.home.join("console.sh");
    std::fs::write(&path, script).expect("write script");
    path
}

fn agent_template(rounds: u32) -> String {
    format!(
        "sh -c 'for i in $(seq 1 {rounds}); do echo working $i on $WHILLY_TASK_ID; echo size $(stty size); sleep 1; done; echo done > out-$WHILLY_TASK_ID.txt; echo \"<promise>COMPLETE</promise>\"'"
    )
}

#[test]
fn console_shows_live_panes_help_zoom_takeover_and_quits_cleanly() {
    if std::env::var(CHILD_VAR).is_ok() {
        return;
    }
    let repo = Repo::new(&plan("p", vec![task("A"), task("B")]), &agent_template(120));
    repo.write("whilly.toml", &{
        let mut c = std::fs::read_to_string(repo.repo.join("whilly.toml")).expect("config");
        c = c.replace("parallel = 1", "parallel = 2");
        c
    });
    let script = console_script(&repo);
    let tmux = Tmux::start("live", &repo.repo);
    tmux.literal(&format!("sh {}", script.display()));
    tmux.keys(&["Enter"]);

    // Both agents' output appears in their panes, titled with the engine's state.
    let s = tmux.wait("both panes with agent output", 90, |s| {
        s.contains("working 2 on A") && s.contains("working 2 on B") && s.contains("[running]")
    });
    assert!(s.contains("whilly p"), "{s}");
    if std::env::var_os("WHILLY_TUI_E2E_SHOW").is_some() {
        eprintln!("{s}");
    }
    assert_eq!(tmux.alternate_on(), "1");
    // Each PTY is resized to its pane's inner size: 120×40 leaves two 36-column panes of 37
    // rows next to a 48-column task list; borders take one cell each side.
    tmux.wait("agents see their pane size", 20, |s| {
        s.matches("size 35 34").count() >= 2
    });

    tmux.literal("?");
    let s = tmux.wait("help", 10, |s| s.contains("Help: main view"));
    assert!(s.contains("ctrl-]"), "{s}");
    tmux.literal("?");
    tmux.wait("help closed", 10, |s| !s.contains("Help: main view"));

    // Focus the first pane and zoom it: the task list and the other pane go away.
    tmux.keys(&["Tab"]);
    tmux.literal("z");
    let s = tmux.wait("zoomed pane", 10, |s| {
        !s.contains("Tasks ") && s.contains("on A")
    });
    assert!(!s.contains("on B"), "{s}");
    // Zoomed: the agent's terminal grows to the whole body (118 columns, 35 rows).
    tmux.wait("zoomed agent sees the full size", 20, |s| {
        s.contains("size 35 118")
    });
    tmux.literal("z");
    tmux.wait("unzoomed", 10, |s| {
        s.contains("Tasks ") && s.contains("on B")
    });

    // Takeover: typed text reaches the agent's terminal (echoed by its tty); Ctrl-] returns.
    tmux.literal("i");
    tmux.wait("takeover banner", 10, |s| s.contains("TAKEOVER"));
    tmux.literal("hello-operator");
    tmux.wait("typed text in the pane", 10, |s| {
        s.contains("hello-operator")
    });
    tmux.keys(&["C-]"]);
    tmux.wait("control back", 10, |s| !s.contains("TAKEOVER"));
    // Keys act on the console again: `?` opens help instead of going to the agent.
    tmux.literal("?");
    tmux.wait("help after release", 10, |s| s.contains("Help: main view"));
    tmux.keys(&["Escape"]);

    // Quit with agents running asks; `s` stops them and the shell comes back.
    tmux.literal("q");
    tmux.wait("quit confirmation", 10, |s| s.contains("still running"));
    tmux.literal("s");
    let s = tmux.wait("shell after quit", 60, |s| s.contains("EXIT="));
    assert_eq!(tmux.alternate_on(), "0", "{s}");
    assert!(
        s.contains("EXIT=130"),
        "stopped by the operator is an interrupted run: {s}"
    );
    assert!(s.contains("whilly: plan p: interrupted"), "{s}");
    // Tasks went back to the queue and no agent survived.
    for t in repo.tasks("p") {
        assert_eq!(t["status"], "PENDING", "{t}");
    }
    let left = wait_for(Duration::from_secs(5), "agents to be gone", || {
        let pids = repo.marked_pids(&[]);
        pids.is_empty().then_some(pids)
    });
    assert!(left.is_empty());
}

#[test]
fn finished_run_keeps_the_summary_until_q_and_exits_like_headless() {
    if std::env::var(CHILD_VAR).is_ok() {
        return;
    }
    let repo = Repo::new(&plan("p", vec![task("A")]), &agent_template(2));
    let script = console_script(&repo);
    let tmux = Tmux::start("done", &repo.repo);
    tmux.literal(&format!("sh {}", script.display()));
    tmux.keys(&["Enter"]);
    let s = tmux.wait("run finished", 90, |s| s.contains("Run finished"));
    assert!(s.contains("AllDone (exit 0)"), "{s}");
    assert_eq!(tmux.alternate_on(), "1", "the summary stays until q");
    tmux.literal("q");
    let s = tmux.wait("shell after quit", 30, |s| s.contains("EXIT="));
    assert!(s.contains("EXIT=0"), "{s}");
    assert!(s.contains("whilly: plan p: all_done · 1 done"), "{s}");
    assert_eq!(tmux.alternate_on(), "0");
}

/// The handoff inbox end to end: two tasks for a human; the operator reads one's work (a diff of
/// its worktree) and approves it, rejects the other with a reason typed in the console. The
/// decisions are events, the tasks end DONE and FAILED, the run exits 1.
#[test]
fn inbox_approves_one_handoff_and_rejects_another_with_a_reason() {
    if std::env::var(CHILD_VAR).is_ok() {
        return;
    }
    let mut h1 = task("H1");
    h1["agent"] = "handoff".into();
    let mut h2 = task("H2");
    h2["agent"] = "handoff".into();
    let mut h3 = task("H3");
    h3["agent"] = "handoff".into();
    let repo = Repo::new(&plan("p", vec![h1, h2, h3]), &agent_template(1));
    repo.write("whilly.toml", &{
        let c = std::fs::read_to_string(repo.repo.join("whilly.toml")).expect("config");
        c.replace("parallel = 1", "parallel = 3")
    });
    let script = console_script(&repo);
    let tmux = Tmux::start("inbox", &repo.repo);
    tmux.literal(&format!("sh {}", script.display()));
    tmux.keys(&["Enter"]);
    tmux.wait("the handoffs in the inbox", 90, |s| s.contains("inbox 3"));

    // The human does H1's work in its worktree (the path is in the handoff's meta.json).
    let meta: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo.repo.join(".whilly/handoff/H1/meta.json")).expect("meta"),
    )
    .expect("meta json");
    let cwd = std::path::PathBuf::from(meta["cwd"].as_str().expect("cwd"));
    std::fs::create_dir_all(cwd.join("files")).expect("mkdir");
    std::fs::write(cwd.join("files/H1.txt"), "reviewed by a human\n").expect("work");

    tmux.literal("H");
    tmux.wait("inbox view", 10, |s| s.contains("Inbox (3)"));
    tmux.keys(&["Enter"]);
    let s = tmux.wait("H1's diff", 20, |s| s.contains("+reviewed by a human"));
    assert!(s.contains("files/H1.txt"), "{s}");
    assert!(s.contains("What was asked"), "{s}");
    tmux.literal("a");
    tmux.wait("H1 left the inbox", 60, |s| s.contains("Inbox (2)"));

    // H3 goes back with a comment: its next attempt's prompt carries it.
    tmux.keys(&["Down"]);
    tmux.literal("b");
    tmux.wait("comment popup", 10, |s| s.contains("Send back H3: comment"));
    tmux.literal("add a title line");
    tmux.keys(&["Enter"]);
    let prompt = wait_for(Duration::from_secs(60), "H3's second handoff", || {
        let meta = std::fs::read_to_string(repo.repo.join(".whilly/handoff/H3/meta.json")).ok()?;
        let meta: serde_json::Value = serde_json::from_str(&meta).ok()?;
        if meta["attempt"].as_u64()? < 2 {
            return None;
        }
        std::fs::read_to_string(repo.repo.join(".whilly/handoff/H3/prompt.md")).ok()
    });
    assert!(
        prompt.contains("The operator sent an earlier attempt back"),
        "{prompt}"
    );
    assert!(prompt.contains("add a title line"), "{prompt}");
    tmux.wait("H3 back in the inbox", 30, |s| s.contains("Inbox (2)"));
    tmux.keys(&["Down"]);
    tmux.literal("a");
    tmux.wait("H3 approved", 60, |s| s.contains("Inbox (1)"));

    tmux.keys(&["Home"]);
    tmux.literal("x");
    tmux.wait("reason popup", 10, |s| s.contains("Reject H2: reason"));
    tmux.literal("out of scope");
    tmux.keys(&["Enter"]);
    let s = tmux.wait("run finished", 60, |s| s.contains("finished:"));
    assert!(s.contains("exit 1"), "{s}");
    tmux.literal("q");
    let s = tmux.wait("shell after quit", 30, |s| s.contains("EXIT="));
    assert!(s.contains("EXIT=1"), "{s}");
    assert_eq!(tmux.alternate_on(), "0");

    assert_eq!(repo.task("p", "H1")["status"], "DONE");
    let h2 = repo.task("p", "H2");
    assert_eq!(h2["status"], "FAILED", "{h2}");
    let decisions = repo.events_of_type("operator.decision");
    let summary: Vec<(String, String, String)> = decisions
        .iter()
        .map(|e| {
            (
                e["task_id"].as_str().unwrap_or("").to_string(),
                e["payload"]["decision"].as_str().unwrap_or("").to_string(),
                e["payload"]["message"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("H1".into(), "approve".into(), String::new()),
            ("H3".into(), "send_back".into(), "add a title line".into()),
            ("H3".into(), "approve".into(), String::new()),
            ("H2".into(), "reject".into(), "out of scope".into())
        ],
        "{decisions:?}"
    );
    assert_eq!(repo.task("p", "H3")["status"], "DONE");
    // H1's work was committed and delivered: the file is in the repository.
    assert_eq!(
        std::fs::read_to_string(repo.repo.join("files/H1.txt")).expect("delivered"),
        "reviewed by a human\n"
    );
}

/// `whilly demo` as a newcomer runs it (the README's run command), driven from the keyboard in
/// tmux: panes appear and finish, zoom, take over a pane and type, the budget panel, the PRD
/// wizard to tasks merged into the running plan (the demo agent answers read-only calls), the
/// handoff approved from the inbox after reading its diff, the challenge, quit, terminal
/// restored; every task, the wizard's included, ends DONE.
#[test]
fn demo_from_panes_to_wizard_to_inbox() {
    if std::env::var(CHILD_VAR).is_ok() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let demo = tmp.path().join("demo");
    let tmux = Tmux::start("demo", tmp.path());
    // Slow agents down so there is time to watch and type into them.
    tmux.literal(&format!(
        "DEMO_DELAY=1.2 {} demo --dir {}; echo EXIT=$?",
        sh_quote(env!("CARGO_BIN_EXE_whilly")),
        sh_quote(&demo.to_string_lossy())
    ));
    tmux.keys(&["Enter"]);
    tmux.wait("agents working in panes", 60, |s| {
        s.contains("demo-agent working on") && s.contains("[running]")
    });

    tmux.literal("$");
    tmux.wait("budget panel", 10, |s| s.contains("Budget ($ back)"));
    tmux.literal("$");
    tmux.wait("main view again", 10, |s| s.contains("Tasks "));

    // Focus the first pane, zoom it, type into it, give control back.
    tmux.keys(&["Tab"]);
    tmux.literal("z");
    tmux.wait("zoomed", 10, |s| !s.contains("Tasks "));
    tmux.literal("i");
    tmux.wait("takeover", 10, |s| s.contains("TAKEOVER"));
    tmux.literal("hi-agent");
    tmux.keys(&["C-]"]);
    tmux.wait("control back", 10, |s| !s.contains("TAKEOVER"));
    tmux.literal("z");
    tmux.wait("unzoomed", 10, |s| s.contains("Tasks "));

    // The wizard: idea, two answers, the PRD, the plan, merged into the running plan.
    tmux.literal("n");
    tmux.wait("wizard", 10, |s| s.contains("step 1/5"));
    tmux.literal("A FAQ for newcomers");
    tmux.keys(&["C-s"]);
    tmux.wait("first question", 30, |s| s.contains("Q: Who reads this"));
    tmux.literal("newcomers");
    tmux.keys(&["C-s"]);
    tmux.wait("second question", 30, |s| s.contains("Q: Which one check"));
    tmux.literal("FAQ.md exists");
    tmux.keys(&["C-s"]);
    let s = tmux.wait("the PRD to edit", 30, |s| s.contains("step 3/5"));
    assert!(s.contains("PRD-a-faq-for-newcomers.md"), "{s}");
    tmux.keys(&["C-s"]);
    let s = tmux.wait("the plan", 30, |s| s.contains("· ready"));
    assert!(s.contains("TASK-001") && s.contains("TASK-002"), "{s}");
    tmux.literal("m");
    tmux.wait("merged", 30, |s| {
        s.contains("merged 2 task(s) into plan demo")
    });
    tmux.literal(" ");
    tmux.wait("wizard closed", 10, |s| {
        s.contains("Tasks ") && s.contains("TASK-002")
    });
    assert!(demo.join("docs/PRD-a-faq-for-newcomers.md").is_file());

    // The handoff: the demo drafted REVIEW.md in its worktree; read the diff, approve.
    tmux.wait("the handoff waits", 120, |s| s.contains("inbox 1"));
    tmux.literal("H");
    tmux.wait("inbox", 10, |s| s.contains("Inbox (1)"));
    tmux.keys(&["Enter"]);
    tmux.wait("the draft in the diff", 20, |s| s.contains("+Verdict:"));
    tmux.literal("a");

    // The challenge while the last tasks run.
    tmux.literal("c");
    tmux.wait("challenge", 30, |s| s.contains("## Verdict"));
    tmux.keys(&["Escape"]);

    tmux.wait("run finished, all 8 done", 180, |s| {
        s.contains("finished: AllDone") && s.contains("8/8 tasks")
    });
    tmux.literal("q");
    // A line of its own: the command line typed above contains `EXIT=$?` too.
    let s = tmux.wait("shell after quit", 30, |s| {
        s.lines().any(|l| l.starts_with("EXIT="))
    });
    assert!(s.lines().any(|l| l == "EXIT=0"), "{s}");
    assert!(s.contains("8 done, 0 failed"), "{s}");
    assert_eq!(tmux.alternate_on(), "0");
}
