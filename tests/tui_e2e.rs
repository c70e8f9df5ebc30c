//! The console end to end: the real binary (`whilly tui plan.json`) in a tmux session with a
//! `command` agent in a temporary git repository. Panes show the agent's output live, `?` shows
//! help, `z` zooms, `i` types into the agent and Ctrl-] returns, `q` quits (stopping running
//! agents when asked, or leaving them to finish in the background) and the terminal is
//! restored: the shell is back, not the alternate screen.

#[path = "support/engine.rs"]
mod engine;
#[path = "support/tmux.rs"]
mod tmux;

use engine::{Repo, plan, task, wait_for};
use std::time::Duration;
use tmux::{Tmux, console_script, sh_quote};

fn agent_template(rounds: u32) -> String {
    format!(
        "sh -c 'for i in $(seq 1 {rounds}); do echo working $i on $WHILLY_TASK_ID; echo size $(stty size); sleep 1; done; echo done > out-$WHILLY_TASK_ID.txt; echo \"<promise>COMPLETE</promise>\"'"
    )
}

#[test]
fn console_shows_live_panes_help_zoom_takeover_and_quits_cleanly() {
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
    // `wait_for` fails the test naming what it waited for when an agent outlives the console.
    wait_for(Duration::from_secs(5), "agents to be gone", || {
        repo.marked_pids(&[]).is_empty().then_some(())
    });
}

#[test]
fn finished_run_keeps_the_summary_until_q_and_exits_like_headless() {
    let repo = Repo::new(&plan("p", vec![task("A")]), &agent_template(2));
    let script = console_script(&repo);
    let tmux = Tmux::start("done", &repo.repo);
    tmux.literal(&format!("sh {}", script.display()));
    tmux.keys(&["Enter"]);
    let s = tmux.wait("run finished", 90, |s| s.contains("Run finished"));
    assert!(s.contains("all tasks done (exit 0)"), "{s}");
    assert_eq!(tmux.alternate_on(), "1", "the summary stays until q");
    tmux.literal("q");
    let s = tmux.wait("shell after quit", 30, |s| s.contains("EXIT="));
    assert!(s.contains("EXIT=0"), "{s}");
    assert!(s.contains("whilly: plan p: all tasks done · 1 done"), "{s}");
    assert_eq!(tmux.alternate_on(), "0");
}

/// While the console is open its engine serves the plan: a task reset after the run finished
/// runs again without a restart, and the console says the run is over again afterwards.
#[test]
fn the_open_console_runs_a_task_reset_after_the_run_finished() {
    // Each attempt leaves a new line, so the second one has work to land too.
    let agent =
        "sh -c 'date +%s%N >> out-$WHILLY_TASK_ID.txt; echo \"<promise>COMPLETE</promise>\"'";
    let repo = Repo::new(&plan("p", vec![task("A")]), agent);
    let script = console_script(&repo);
    let tmux = Tmux::start("serve", &repo.repo);
    tmux.literal(&format!("sh {}", script.display()));
    tmux.keys(&["Enter"]);
    tmux.wait("run finished", 90, |s| s.contains("Run finished"));
    let done = |repo: &Repo| repo.events_of_type("task.done").len();
    assert_eq!(done(&repo), 1);
    tmux.literal("r");
    tmux.wait("reset confirmation", 20, |s| s.contains("Reset A"));
    tmux.literal("y");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while done(&repo) < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the reset task did not run again: {}\n{}",
            repo.task("p", "A"),
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    tmux.wait("run finished again", 60, |s| s.contains("Run finished"));
    tmux.literal("q");
    let s = tmux.wait("shell after quit", 30, |s| s.contains("EXIT="));
    assert!(s.contains("EXIT=0"), "{s}");
}

/// A console that cannot run the plan's tasks (their agent is not installed) opens anyway, as
/// an observer saying which agent is missing, and claims nothing.
#[test]
fn a_console_without_the_tasks_agent_opens_as_an_observer() {
    let mut t = task("A");
    t["agent"] = serde_json::json!("absent");
    let repo = Repo::new(&plan("p", vec![t]), &agent_template(1));
    let mut toml = std::fs::read_to_string(repo.repo.join("whilly.toml")).expect("toml");
    toml.push_str("\n[agents.absent]\nbackend = \"claude\"\nbin = \"/nonexistent/claude\"\n");
    repo.write("whilly.toml", &toml);
    let script = console_script(&repo);
    let tmux = Tmux::start("observer", &repo.repo);
    tmux.literal(&format!("sh {}", script.display()));
    tmux.keys(&["Enter"]);
    let s = tmux.wait("observer banner", 60, |s| s.contains("Observer:"));
    assert!(s.contains("absent"), "the banner names the agent: {s}");
    // Nothing is claimed while it watches.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(repo.task("p", "A")["status"], "PENDING");
    tmux.literal("q");
    let s = tmux.wait("shell after quit", 30, |s| s.contains("EXIT="));
    assert_eq!(tmux.alternate_on(), "0", "{s}");
    assert_eq!(repo.task("p", "A")["status"], "PENDING");
}

/// The handoff inbox end to end: two tasks for a human; the operator reads one's work (a diff of
/// its worktree) and approves it, rejects the other with a reason typed in the console. The
/// decisions are events, the tasks end DONE and FAILED, the run exits 1.
#[test]
fn inbox_approves_one_handoff_and_rejects_another_with_a_reason() {
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
    assert!(s.contains("The task"), "{s}");
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
    // Step 3 also covers the PRD being written: wait for the written file, not the step.
    let s = tmux.wait("the PRD to edit", 30, |s| {
        s.contains("step 3/5") && s.contains("PRD-a-faq-for-newcomers.md")
    });
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
        s.contains("finished: all tasks done") && s.contains("8/8 tasks")
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

/// A detached console: stopped (SIGTERM, which stops its agents) when the test ends, so a failing
/// test leaves nothing running.
struct Detached {
    pid: i32,
}

impl Drop for Detached {
    fn drop(&mut self) {
        // Still the console (a finished test's pid may be reused by then).
        let ours = std::fs::read(format!("/proc/{}/cmdline", self.pid))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains("whilly"));
        if ours && alive(self.pid) {
            // SAFETY: kill(2) on the pid the console printed for itself.
            unsafe { libc::kill(self.pid, libc::SIGTERM) };
        }
    }
}

/// An agent that runs until the test creates `go` (an absolute path), recording its pid.
fn waiting_agent(repo: &Repo) -> String {
    let dir = repo.shared.display();
    format!(
        "sh -c 'echo $$ > {dir}/agent-$WHILLY_TASK_ID.pid; echo waiting on $WHILLY_TASK_ID; while [ ! -e {dir}/go ]; do sleep 0.1; done; echo done > out-$WHILLY_TASK_ID.txt; echo \"<promise>COMPLETE</promise>\"'"
    )
}

/// The pid the waiting agent of `task` recorded.
fn agent_pid(repo: &Repo, task: &str) -> i32 {
    wait_for(Duration::from_secs(10), "agent pid file", || {
        std::fs::read_to_string(repo.shared.join(format!("agent-{task}.pid")))
            .ok()
            .and_then(|p| p.trim().parse().ok())
    })
}

/// Waits until `pid` has exited (a zombie counts as gone).
fn wait_gone(pid: i32, secs: u64, what: &str) {
    wait_for(
        Duration::from_secs(secs),
        &format!("{what} to exit"),
        || (!alive(pid)).then_some(()),
    );
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| {
        !st.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

/// Quits with `b` while an agent runs: the prompt comes back at once (exit 0) with the detached
/// process's pid, the terminal is restored, and the agent runs on, past the grace period of a
/// graceful stop, until it finishes: its task DONE, the task that never started still PENDING,
/// and then nothing of the run is left (the process exits, no agent orphaned).
fn start_then_background(name: &str, key: &str, told: &str) -> (Repo, Tmux, Detached, i32) {
    start_plan_then_background(name, key, told, vec![task("A"), task("B")])
}

fn start_plan_then_background(
    name: &str,
    key: &str,
    told: &str,
    tasks: Vec<serde_json::Value>,
) -> (Repo, Tmux, Detached, i32) {
    let repo = Repo::new(&plan("p", tasks), "true");
    // The base config's grace period is 1 s.
    repo.write(
        "whilly.toml",
        &engine::config(&waiting_agent(&repo), &repo.wt_dir),
    );
    let script = console_script(&repo);
    let tmux = Tmux::start(name, &repo.repo);
    tmux.literal(&format!("sh {}", script.display()));
    tmux.keys(&["Enter"]);
    tmux.wait("A running in its pane", 90, |s| s.contains("waiting on A"));
    let agent = agent_pid(&repo, "A");
    tmux.literal("q");
    let s = tmux.wait("quit popup", 10, |s| {
        s.contains("let them finish in the background")
    });
    assert!(s.contains("start nothing new"), "{s}");
    tmux.literal(key);
    let s = tmux.wait("shell back", 20, |s| s.contains("EXIT="));
    assert!(s.contains("EXIT=0"), "{s}");
    assert_eq!(tmux.alternate_on(), "0", "terminal restored");
    assert!(s.contains(told), "{s}");
    let pid: i32 = s
        .split("process ")
        .nth(1)
        .map(|r| {
            r.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
        })
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in:\n{s}"));
    assert!(alive(pid), "the background process runs");
    assert!(alive(agent), "the agent runs");
    (repo, tmux, Detached { pid }, agent)
}

#[test]
fn background_lets_the_running_agent_finish_after_the_prompt_is_back() {
    let (repo, tmux, bg, agent) =
        start_then_background("bg", "b", "1 agent running (A) in the background");
    let pid = bg.pid;
    // A graceful stop would have killed the agent 1 s after the quit; it must outlive that.
    let since = std::time::Instant::now();
    wait_for(
        Duration::from_secs(20),
        "3 s of the agent running detached",
        || {
            assert!(alive(agent), "the agent was stopped in the background");
            assert_eq!(repo.task("p", "A")["status"], "IN_PROGRESS");
            (since.elapsed() >= Duration::from_secs(3)).then_some(())
        },
    );
    // The terminal is the shell's: typing reaches the shell, not the console.
    tmux.literal("echo shell-is-back");
    tmux.keys(&["Enter"]);
    tmux.wait("shell answers", 10, |s| s.contains("\nshell-is-back"));

    std::fs::write(repo.shared.join("go"), "").expect("go");
    wait_gone(pid, 60, "the background process");
    assert_eq!(repo.task("p", "A")["status"], "DONE");
    assert_eq!(
        repo.task("p", "B")["status"],
        "PENDING",
        "nothing new started"
    );
    assert!(
        repo.marked_pids(&[]).is_empty(),
        "nothing of the run is left"
    );
}

#[test]
fn a_background_run_stops_its_agents_when_signalled() {
    let (repo, _tmux, bg, agent) =
        start_then_background("bgkill", "b", "1 agent running (A) in the background");
    let pid = bg.pid;
    // SAFETY: kill(2) on the pid the console printed for itself.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    wait_gone(pid, 30, "the background process");
    assert!(!alive(agent), "the agent was stopped with it");
    assert_eq!(repo.task("p", "A")["status"], "PENDING", "A went back");
    assert!(
        repo.marked_pids(&[]).is_empty(),
        "nothing of the run is left"
    );
}

/// `d` detaches the whole run: once A finishes, B starts in the background too, and the process
/// exits when the plan is done.
#[test]
fn detach_goes_on_with_the_whole_plan() {
    let (repo, _tmux, bg, _agent) =
        start_then_background("detach", "d", "plan p goes on in the background, process");
    let pid = bg.pid;
    std::fs::write(repo.shared.join("go"), "").expect("go");
    wait_gone(pid, 60, "the background process");
    assert_eq!(repo.task("p", "A")["status"], "DONE");
    assert_eq!(
        repo.task("p", "B")["status"],
        "DONE",
        "B ran in the background"
    );
    assert!(repo.shared.join("agent-B.pid").exists());
    assert!(
        repo.marked_pids(&[]).is_empty(),
        "nothing of the run is left"
    );
}

/// SIGKILL to the console (nothing of it can run): its launcher puts the terminal back (the
/// shell answers a typed command, so the tty left raw mode), stops the agent it left behind and
/// exits 137.
#[test]
fn a_killed_console_leaves_a_sane_terminal_and_no_agent() {
    let repo = Repo::new(&plan("p", vec![task("A")]), "true");
    repo.write(
        "whilly.toml",
        &engine::config(&waiting_agent(&repo), &repo.wt_dir),
    );
    let script = console_script(&repo);
    let tmux = Tmux::start("killed", &repo.repo);
    tmux.literal(&format!("sh {}", script.display()));
    tmux.keys(&["Enter"]);
    tmux.wait("A running in its pane", 90, |s| s.contains("waiting on A"));
    let agent = agent_pid(&repo, "A");
    let parent_of = |pid: i32| -> i32 {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|st| {
                st.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1).map(str::to_string))
            })
            .and_then(|p| p.parse().ok())
            .expect("a parent")
    };
    // The agent runs under its guard (`whilly __guard`), a child of the console.
    let guard = parent_of(agent);
    let cmdline = std::fs::read(format!("/proc/{guard}/cmdline")).unwrap_or_default();
    assert!(
        String::from_utf8_lossy(&cmdline).contains("__guard"),
        "the agent's parent is its guard"
    );
    let console = parent_of(guard);
    assert_eq!(tmux.alternate_on(), "1");
    // SAFETY: kill(2) on the agent's parent, the console this test started.
    unsafe { libc::kill(console, libc::SIGKILL) };
    let s = tmux.wait("shell back", 30, |s| s.contains("EXIT="));
    assert!(s.contains("EXIT=137"), "{s}");
    assert!(s.contains("the console was killed"), "{s}");
    assert_eq!(tmux.alternate_on(), "0", "alternate screen left");
    wait_gone(agent, 10, "the agent");
    tmux.literal("echo tty-is-sane");
    tmux.keys(&["Enter"]);
    tmux.wait("the shell answers", 10, |s| s.contains("\ntty-is-sane"));
    assert!(
        repo.marked_pids(&[]).is_empty(),
        "nothing of the run is left"
    );
}

/// A console opened beside a background run names the task that run holds and shows its agent's
/// output live with `o` (the log that process is writing); quitting it leaves that agent alone.
#[test]
fn a_second_console_watches_the_background_agent() {
    // B waits for A, so the second console has no agent of its own.
    let mut b = task("B");
    b["dependencies"] = serde_json::json!(["A"]);
    let (repo, tmux, bg, agent) = start_plan_then_background(
        "watch",
        "b",
        "1 agent running (A) in the background",
        vec![task("A"), b],
    );
    let pid = bg.pid;
    tmux.literal(&format!("sh {}", console_script(&repo).display()));
    tmux.keys(&["Enter"]);
    // A's terminal, published by the background process, in a remote pane of this console.
    let s = tmux.wait("A's remote pane", 60, |s| {
        s.contains("waiting on A") && s.contains(" on ")
    });
    assert!(s.contains("RUN  A"), "{s}");
    // Read-only: typing into another worker's agent is refused by default.
    tmux.literal("i");
    tmux.wait("the read-only note", 20, |s| s.contains("read-only"));
    // A is first in the list and selected: its live log, refreshed while it runs.
    tmux.literal("o");
    tmux.wait("A's output in the replay", 20, |s| {
        s.contains("waiting on A")
    });
    tmux.literal("o");
    // No agent of this console runs: q quits at once, the background agent untouched.
    tmux.literal("q");
    let s = tmux.wait("shell back", 30, |s| s.matches("EXIT=").count() >= 2);
    assert_eq!(tmux.alternate_on(), "0", "{s}");
    assert!(
        alive(pid) && alive(agent),
        "the background run is untouched"
    );
    std::fs::write(repo.shared.join("go"), "").expect("go");
    wait_gone(pid, 60, "the background process");
    assert_eq!(repo.task("p", "A")["status"], "DONE");
    assert!(
        repo.marked_pids(&[]).is_empty(),
        "nothing of the run is left"
    );
}

/// An agent that leaves `setsid`, double-forked and `nohup` sleepers behind, writing its pid
/// first (issue 26, item 4, the console's case); with `linger` it keeps working after.
fn detaching_agent(repo: &Repo, linger: bool) -> String {
    let dir = repo.shared.display();
    let tail = if linger { "sleep 30; " } else { "" };
    format!(
        "sh -c 'echo $$ > {dir}/agent-$WHILLY_TASK_ID.pid; \
         setsid sleep 3001 < /dev/null > /dev/null 2>&1 & \
         (sh -c \"sleep 3002 < /dev/null > /dev/null 2>&1 &\" &) ; \
         nohup setsid sh -c \"sleep 3003\" < /dev/null > /dev/null 2>&1 & \
         sleep 0.3; echo detached on $WHILLY_TASK_ID; {tail}\
         echo done > out-$WHILLY_TASK_ID.txt; echo \"<promise>COMPLETE</promise>\"'"
    )
}

/// The run's processes still alive whose command line is one of the sleepers.
fn sleepers(repo: &Repo) -> Vec<String> {
    repo.marked_pids(&[])
        .into_iter()
        .filter_map(|p| {
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            (cmd.contains("sleep 300") && alive(p)).then(|| format!("{p}: {cmd}"))
        })
        .collect()
}

#[test]
fn a_console_run_leaves_no_detached_descendant() {
    let repo = Repo::new(&plan("p", vec![task("A")]), "true");
    repo.write(
        "whilly.toml",
        &engine::config(&detaching_agent(&repo, false), &repo.wt_dir),
    );
    let script = console_script(&repo);
    let tmux = Tmux::start("detached", &repo.repo);
    tmux.literal(&format!("sh {}", script.display()));
    tmux.keys(&["Enter"]);
    tmux.wait("run finished", 90, |s| s.contains("Run finished"));
    wait_for(Duration::from_secs(5), "the sleepers to be gone", || {
        sleepers(&repo).is_empty().then_some(())
    });
    tmux.literal("q");
    let s = tmux.wait("shell after quit", 30, |s| s.contains("EXIT="));
    assert!(s.contains("EXIT=0"), "{s}");
}

#[test]
fn a_console_killed_with_sigkill_leaves_no_detached_descendant() {
    let repo = Repo::new(&plan("p", vec![task("A")]), "true");
    repo.write(
        "whilly.toml",
        &engine::config(&detaching_agent(&repo, true), &repo.wt_dir),
    );
    let script = console_script(&repo);
    let tmux = Tmux::start("detached-killed", &repo.repo);
    tmux.literal(&format!("sh {}", script.display()));
    tmux.keys(&["Enter"]);
    tmux.wait("A detached its sleepers", 90, |s| {
        s.contains("detached on A")
    });
    wait_for(Duration::from_secs(10), "three sleepers", || {
        (sleepers(&repo).len() >= 3).then_some(())
    });
    let agent = agent_pid(&repo, "A");
    let parent_of = |pid: i32| -> i32 {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|st| {
                st.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1).map(str::to_string))
            })
            .and_then(|p| p.parse().ok())
            .expect("a parent")
    };
    let console = parent_of(parent_of(agent));
    // SAFETY: kill(2) on the console this test started (the agent's guard's parent).
    unsafe { libc::kill(console, libc::SIGKILL) };
    let s = tmux.wait("shell back", 30, |s| s.contains("EXIT="));
    assert!(s.contains("EXIT=137"), "{s}");
    wait_for(Duration::from_secs(10), "the sleepers to be gone", || {
        sleepers(&repo).is_empty().then_some(())
    });
    assert!(
        repo.marked_pids(&[]).iter().all(|p| !alive(*p)),
        "nothing of the run is left"
    );
}
