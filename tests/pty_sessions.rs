//! Real PTYs, real processes: the fake agents in tests/fake_agents stand in for coding agents.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use whilly::pty::{PtyError, PtySession, SpawnSpec, group_members, process_group_of};

const WAIT: Duration = Duration::from_secs(20);

fn agent(name: &str) -> String {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "fake_agents", name]
        .iter()
        .collect();
    path.to_string_lossy().into_owned()
}

fn spawn(argv: &[&str]) -> PtySession {
    match PtySession::spawn(SpawnSpec::new(argv.iter().copied())) {
        Ok(s) => s,
        Err(e) => panic!("spawn {argv:?}: {e}"),
    }
}

fn pid_alive(pid: i32) -> bool {
    // A zombie waiting for init to reap it is dead for our purposes.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .map(|i| &stat[i + 1..])
            .is_some_and(|rest| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// The number after `key=` on the screen, e.g. `child=1234`.
fn screen_number(session: &PtySession, key: &str) -> i32 {
    let text = session.screen_text();
    let Some(start) = text.find(key) else {
        panic!("no {key} on screen:\n{text}")
    };
    let digits: String = text[start + key.len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    match digits.parse() {
        Ok(n) => n,
        Err(_) => panic!("{key} not followed by a number:\n{text}"),
    }
}

async fn until(deadline: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + deadline;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cond()
}

#[test]
fn sessions_can_be_shared_across_tasks() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<PtySession>();
}

#[tokio::test]
async fn typed_input_is_echoed_on_the_screen() {
    let s = spawn(&[&agent("echo_loop.sh")]);
    assert!(s.wait_for_text("ready", WAIT).await, "{}", s.screen_text());
    s.write_input(b"hello\r").unwrap();
    assert!(
        s.wait_for_text("got: hello", WAIT).await,
        "{}",
        s.screen_text()
    );
    s.write_input(b"quit\r").unwrap();
    let exit = s.wait().await;
    assert_eq!(exit.code, Some(0));
    let text = s.screen_text();
    assert!(text.contains("hello\ngot: hello"), "{text}");
}

#[tokio::test]
async fn non_zero_exit_code_is_reported_and_output_logged() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("nested/attempt-1.log");
    let spec = SpawnSpec::new([agent("exit_code.sh"), "7".into()]).log_path(&log);
    let s = PtySession::spawn(spec).unwrap();
    let exit = s.wait().await;
    assert_eq!((exit.code, exit.signal), (Some(7), None));
    assert!(!exit.success());
    assert!(s.screen_text().contains("about to fail"));
    let logged = std::fs::read(&log).unwrap();
    assert!(String::from_utf8_lossy(&logged).contains("about to fail\r\n"));
    assert_eq!(s.stats().total_bytes, logged.len() as u64);
    drop(s);

    // A second attempt appends to the same log.
    let s = PtySession::spawn(SpawnSpec::new([agent("exit_code.sh"), "0".into()]).log_path(&log))
        .unwrap();
    assert_eq!(s.wait().await.code, Some(0));
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches("about to fail").count(), 2, "{text:?}");
}

#[tokio::test]
async fn cursor_position_query_is_answered() {
    let s = spawn(&[&agent("cursor_query.py")]);
    let exit = s.wait().await;
    let text = s.screen_text();
    assert_eq!(exit.code, Some(0), "{text}");
    assert!(text.contains("cursor reply row=3 col=7"), "{text}");
}

#[tokio::test]
async fn child_leads_its_own_process_group() {
    let s = spawn(&[&agent("hang.sh")]);
    assert!(s.wait_for_text("child=", WAIT).await);
    assert_eq!(process_group_of(s.pid()), Some(s.pid()));
    assert_ne!(
        process_group_of(s.pid()),
        process_group_of(std::process::id() as i32)
    );
    let child = screen_number(&s, "child=");
    assert_eq!(process_group_of(child), Some(s.pid()));
}

#[tokio::test]
async fn terminate_ends_a_hanging_agent_and_its_group() {
    let s = spawn(&[&agent("hang.sh")]);
    assert!(s.wait_for_text("child=", WAIT).await);
    let child = screen_number(&s, "child=");
    assert!(pid_alive(child));
    let started = Instant::now();
    let exit = s.terminate(Duration::from_secs(5)).await.unwrap();
    assert_eq!(exit.signal, Some(libc::SIGTERM), "{exit:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "SIGTERM should suffice: {:?}",
        started.elapsed()
    );
    assert!(group_members(s.pgid()).is_empty());
    assert!(until(Duration::from_secs(2), || !pid_alive(child)).await);
}

#[tokio::test]
async fn an_agent_ignoring_sigterm_is_killed_after_the_grace_period() {
    let s = spawn(&[&agent("ignore_term.sh")]);
    assert!(s.wait_for_text("child=", WAIT).await);
    let child = screen_number(&s, "child=");
    let grace = Duration::from_millis(600);
    let started = Instant::now();
    let exit = s.terminate(grace).await.unwrap();
    let took = started.elapsed();
    println!("terminate took {took:?}, exit {exit:?}");
    assert_eq!(exit.signal, Some(libc::SIGKILL), "{exit:?}");
    assert!(
        took >= grace,
        "killed before the grace period ended: {took:?}"
    );
    assert!(
        group_members(s.pgid()).is_empty(),
        "{:?}",
        group_members(s.pgid())
    );
    assert!(
        until(Duration::from_secs(2), || !pid_alive(child)).await,
        "the child sleep {child} survived"
    );
}

#[tokio::test]
async fn dropping_a_session_kills_its_group() {
    let s = spawn(&[&agent("ignore_term.sh")]);
    assert!(s.wait_for_text("child=", WAIT).await);
    let (pid, child) = (s.pid(), screen_number(&s, "child="));
    drop(s);
    assert!(
        until(Duration::from_secs(5), || !pid_alive(pid)
            && !pid_alive(child))
        .await
    );
    assert!(group_members(pid).is_empty());
}

#[tokio::test]
async fn kill_is_immediate() {
    let s = spawn(&[&agent("ignore_term.sh")]);
    assert!(s.wait_for_text("child=", WAIT).await);
    s.kill().unwrap();
    let exit = s.wait().await;
    assert_eq!(exit.signal, Some(libc::SIGKILL));
    assert!(!s.is_running());
    assert!(
        until(Duration::from_secs(2), || group_members(s.pgid())
            .is_empty())
        .await
    );
}

#[tokio::test]
async fn resize_reaches_the_child() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("size.log");
    let spec = SpawnSpec::new([agent("size_report.sh")])
        .size(24, 80)
        .log_path(&log);
    let s = PtySession::spawn(spec).unwrap();
    assert!(
        s.wait_for_text("size: 24 80 tput: 24x80", WAIT).await,
        "{}",
        s.screen_text()
    );
    let applied = s.resize(30, 100).unwrap();
    assert_eq!((applied.rows, applied.cols), (30, 100));
    assert_eq!(s.size(), applied);
    assert!(
        s.wait_for_text("size: 30 100 tput: 30x100", WAIT).await,
        "{}",
        s.screen_text()
    );

    // Clamped to 2x2 rather than refused. At 2x2 the screen wraps everything, so the child's
    // report is looked for in the raw log. bash drops a SIGWINCH that arrives while its WINCH
    // trap still runs, so the report is also asked for by typing "size".
    let tiny = s.resize(0, 1).unwrap();
    assert_eq!((tiny.rows, tiny.cols), (2, 2));
    assert_eq!(s.size(), tiny);
    s.write_input(b"size\r").unwrap();
    let logged = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("size: 2 2 tput: 2x2")
    };
    assert!(
        until(WAIT, logged).await,
        "{:?}",
        std::fs::read_to_string(&log)
    );
    s.write_input(b"quit\r").unwrap();
    assert_eq!(s.wait().await.code, Some(0));
}

#[tokio::test]
async fn environment_and_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"echo "T=$TERM C=${COLUMNS:-unset} L=${LINES:-unset} X=$WHILLY_X"; pwd"#;
    let spec = SpawnSpec::new(["bash", "-c", script])
        .cwd(dir.path())
        .env("WHILLY_X", "forty-two")
        .env("TERM", "dumb")
        .env("COLUMNS", "999");
    let s = PtySession::spawn(spec).unwrap();
    assert_eq!(s.wait().await.code, Some(0));
    let text = s.screen_text();
    // TERM is forced; COLUMNS/LINES never reach the child, even when asked for, because they
    // would go stale on the first resize and then win over the PTY's real size.
    assert!(
        text.contains("T=xterm-256color C=unset L=unset X=forty-two"),
        "{text}"
    );
    let canonical = dir.path().canonicalize().unwrap();
    assert!(text.contains(&*canonical.to_string_lossy()), "{text}");
}

#[tokio::test]
async fn spawn_errors_are_clear() {
    let err = PtySession::spawn(SpawnSpec::new(["/definitely/not/a/program"])).unwrap_err();
    assert!(matches!(err, PtyError::Spawn { .. }), "{err:?}");
    assert!(
        err.to_string().contains("/definitely/not/a/program"),
        "{err}"
    );
    let err = PtySession::spawn(SpawnSpec::new(["true"]).cwd("/no/such/dir")).unwrap_err();
    assert!(matches!(err, PtyError::Cwd { .. }), "{err:?}");
    assert!(err.to_string().contains("/no/such/dir"), "{err}");
    let err = PtySession::spawn(SpawnSpec::new(Vec::<String>::new())).unwrap_err();
    assert!(matches!(err, PtyError::InvalidSpec(_)), "{err:?}");
}

#[tokio::test]
async fn paste_is_bracketed_only_when_the_child_asks() {
    let script = r#"printf '\e[?2004h'; IFS= read -r l; printf 'READ:%q\n' "$l"; printf '\e[?2004l'; IFS= read -r l; printf 'READ2:%q\n' "$l""#;
    let s = spawn(&["bash", "-c", script]);
    assert!(s.wait_for_screen(WAIT, |scr| scr.bracketed_paste()).await);
    s.paste("abc").unwrap();
    s.write_input(b"\r").unwrap();
    assert!(
        s.wait_for_text("READ:$'\\E[200~abc\\E[201~'", WAIT).await,
        "{}",
        s.screen_text()
    );
    assert!(s.wait_for_screen(WAIT, |scr| !scr.bracketed_paste()).await);
    s.paste("plain\n").unwrap();
    assert!(
        s.wait_for_text("READ2:plain", WAIT).await,
        "{}",
        s.screen_text()
    );
    assert_eq!(s.wait().await.code, Some(0));
}

#[tokio::test]
async fn keys_are_encoded_for_the_childs_modes() {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    // od shows exactly what arrived: application cursor mode on, then an Up arrow.
    let script = r#"printf '\e[?1h'; stty raw -echo; head -c 3 | od -An -c; stty sane"#;
    let s = spawn(&["bash", "-c", script]);
    assert!(
        s.wait_for_screen(WAIT, |scr| scr.application_cursor())
            .await
    );
    s.send_key(KeyEvent::new(KeyCode::Up, KeyModifiers::NONE))
        .unwrap();
    assert_eq!(s.wait().await.code, Some(0));
    let text = s.screen_text();
    assert!(text.contains("033   O   A"), "{text}");
}

#[tokio::test]
async fn title_generation_and_stats() {
    let s = spawn(&[
        "bash",
        "-c",
        r#"printf '\e]0;my agent\a\e[?2026h'; echo hi; read -r x; printf '\e[?2026l'"#,
    ]);
    let mut changes = s.subscribe();
    // Output may land before the subscription: only what comes after it must notify.
    let seen_at_subscribe = s.generation();
    assert!(s.wait_for_text("hi", WAIT).await);
    assert_eq!(s.title(), "my agent");
    assert!(s.sync_output_active());
    assert!(s.sync_output_since().is_some());
    assert!(s.generation() > 0);
    if s.generation() > seen_at_subscribe {
        assert!(
            changes.has_changed().unwrap_or(false),
            "a change after subscribing must notify the subscriber"
        );
    }
    changes.borrow_and_update();
    let stats = s.stats();
    assert!(stats.total_bytes >= 4, "{stats:?}");
    assert!(stats.last_output.is_some());
    assert!(s.is_running());
    s.write_input(b"\r").unwrap();
    assert_eq!(s.wait().await.code, Some(0));
    assert!(
        changes.has_changed().unwrap_or(false),
        "exit should bump the generation"
    );
}

#[tokio::test]
async fn scrollback_is_kept_and_bounded() {
    let spec = SpawnSpec::new(["bash", "-c", "for i in $(seq 1 300); do echo row-$i; done"])
        .size(10, 40)
        .scrollback(100);
    let s = PtySession::spawn(spec).unwrap();
    assert_eq!(s.wait().await.code, Some(0));
    let all = s.contents_with_scrollback(10_000);
    let lines: Vec<&str> = all.lines().collect();
    // 100 lines of scrollback + 9 screen rows (the last row, under the cursor, is empty).
    assert_eq!(lines.len(), 109, "{all}");
    assert_eq!(lines.first(), Some(&"row-192"));
    assert_eq!(lines.last(), Some(&"row-300"));
    assert_eq!(s.set_scrollback_offset(5), 5);
    assert!(s.screen_text().starts_with("row-"), "{}", s.screen_text());
    assert_eq!(s.scrollback_offset(), 5);
}

/// An agent blocked reading its terminal is seen waiting for input (from /proc, not from its
/// screen); one that is busy printing is not, and typing ends the wait.
#[tokio::test]
async fn an_agent_reading_its_terminal_waits_for_input() {
    let s = spawn(&[
        "sh",
        "-c",
        "echo 'Continue? (y/n)'; read answer; echo \"got $answer\"; sleep 30",
    ]);
    assert!(
        s.wait_for_text("Continue?", WAIT).await,
        "{}",
        s.screen_text()
    );
    let deadline = Instant::now() + WAIT;
    while !s.waiting_for_input() {
        assert!(
            Instant::now() < deadline,
            "never seen waiting: {}",
            s.screen_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    s.write_input(b"y\r").unwrap();
    assert!(s.wait_for_text("got y", WAIT).await, "{}", s.screen_text());
    // Now in `sleep`: not reading its terminal.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!s.waiting_for_input(), "{}", s.screen_text());
    s.kill().unwrap();
}
