//! The display filter of stream-json agents in a real PTY: the pane reads a transcript, the log
//! keeps the raw JSON, and terminal queries are still answered.

use std::path::PathBuf;
use std::time::Duration;

use whilly::agent::TranscriptFilter;
use whilly::pty::{PtySession, SpawnSpec};

fn fixture(name: &str) -> String {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "fake_agents", name]
        .iter()
        .collect();
    path.to_string_lossy().into_owned()
}

fn spawn_filtered(script: &str, log: &std::path::Path) -> PtySession {
    let spec = SpawnSpec::new(["bash", "-c", script])
        .size(30, 120)
        .log_path(log)
        .display_filter(Box::new(TranscriptFilter));
    PtySession::spawn(spec).unwrap_or_else(|e| panic!("spawn {script}: {e}"))
}

#[tokio::test]
async fn stream_json_shows_as_a_transcript_and_is_logged_raw() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("1.log");
    let recording = fixture("fixtures/claude_stream.jsonl");
    // A CLI warning before the stream, the recording in two writes (one line split across them).
    let script = format!(
        "echo 'warning: plain stderr line'; head -c 700 {r}; sleep 0.2; tail -c +701 {r}",
        r = recording
    );
    let s = spawn_filtered(&script, &log);
    let exit = s.wait().await;
    assert_eq!(exit.code, Some(0));
    let screen = s.contents_with_scrollback(200);
    for want in [
        "warning: plain stderr line",
        "● session started · model claude-sonnet-4-5-20250929 · /tmp/wt/T-1",
        "I'll create the greeting file first.",
        "▶ Write /tmp/wt/T-1/hello.txt (2 lines)",
        "↳ File created successfully at: /tmp/wt/T-1/hello.txt",
        "▶ Bash: cat hello.txt",
        "↳ hello (+1 lines)",
        "<promise>COMPLETE</promise>",
        "✔ finished · 5 turns · 8.4 s · $0.04",
    ] {
        assert!(screen.contains(want), "missing {want:?} in:\n{screen}");
    }
    assert!(
        !screen.contains("{\"type\":"),
        "raw JSON on screen:\n{screen}"
    );
    // Coloured: the tool call line is cyan.
    let cyan = s.with_screen(|sc| {
        let rows: Vec<String> = sc.rows(0, 120).collect();
        let row = rows.iter().position(|r| r.starts_with("▶ Bash"));
        row.map(|r| sc.cell(r as u16, 2).map(|c| c.fgcolor()))
    });
    assert_eq!(cyan, Some(Some(vt100::Color::Idx(6))), "{screen}");

    // The log holds every raw line, byte for byte (the PTY turns \n into \r\n).
    let logged = std::fs::read_to_string(&log).unwrap().replace("\r\n", "\n");
    let raw = std::fs::read_to_string(&recording).unwrap();
    assert!(logged.contains(&raw), "log:\n{logged}");
    // And the result parser still reads the exact cost from it.
    let parsed = whilly::agent::claude::parse_claude_output(
        &whilly::agent::result::clean_output(logged.as_bytes()),
        None,
        &whilly::agent::PriceTable::new(),
    );
    assert_eq!(parsed.cost, whilly::domain::Usd::from_f64(0.0412));
    assert!(parsed.marker_found);
}

#[tokio::test]
async fn queries_are_answered_with_the_filter_on() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("q.log");
    let script = format!(
        "echo '{{\"type\":\"system\",\"subtype\":\"init\",\"model\":\"m\",\"cwd\":\"/w\"}}'; {}",
        fixture("cursor_query.py")
    );
    let s = spawn_filtered(&script, &log);
    let exit = tokio::time::timeout(Duration::from_secs(20), s.wait())
        .await
        .expect("the query was never answered");
    let screen = s.screen_text();
    assert_eq!(exit.code, Some(0), "{screen}");
    assert!(screen.contains("cursor reply row=3 col=7"), "{screen}");
    assert!(screen.contains("● session started · model m"), "{screen}");
}
