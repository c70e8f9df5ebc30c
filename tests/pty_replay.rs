//! PTY-replay: recorded agent output fed straight into the emulator, the screen compared with a
//! snapshot. No process, no timing: what a pane would show for these bytes.

use whilly::pty::{Emulator, TermSize};

fn fixture() -> Vec<u8> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fake_agents/fixtures/agent_session.ans"
    );
    std::fs::read(path).unwrap()
}

/// The fixture up to (not including) leaving the alternate screen, and the rest.
fn split_at_alt_exit(bytes: &[u8]) -> (&[u8], &[u8]) {
    let marker = b"\x1b[?1049l";
    let at = bytes
        .windows(marker.len())
        .position(|w| w == marker)
        .unwrap();
    bytes.split_at(at)
}

#[test]
fn replay_snapshot_of_the_main_and_alternate_screens() {
    let bytes = fixture();
    let (inside, rest) = split_at_alt_exit(&bytes);
    let mut emu = Emulator::new(TermSize::new(8, 50), 100);
    assert!(
        emu.process(inside).is_empty(),
        "the fixture asks no questions"
    );
    assert!(emu.alternate_screen());
    insta::assert_snapshot!(emu.screen_text(), @r"
    ┌──────────┐
    │ approve? │
    │ [y] [n]  │
    └──────────┘
    ");
    emu.process(rest);
    assert!(!emu.alternate_screen());
    assert_eq!(emu.title(), "claude — fix the parser");
    insta::assert_snapshot!(emu.screen_text(), @r"
    ✔ Read src/plan/mod.rs
    ● Running tests [##########] 100%
    error: 2 tests failed        <- moved here

     status: repairing
     done  wide: 日本語 ok
    ");
}

#[test]
fn replay_keeps_colours_and_attributes() {
    let mut emu = Emulator::new(TermSize::new(8, 50), 100);
    emu.process(&fixture());
    let screen = emu.screen();
    let cell = |r, c| screen.cell(r, c).unwrap();
    // ✔ in bold green, the path underlined, the spinner in colour 208.
    assert_eq!(cell(0, 0).fgcolor(), vt100::Color::Idx(2));
    assert!(cell(0, 0).bold());
    assert!(cell(0, 7).underline());
    assert_eq!(cell(1, 0).fgcolor(), vt100::Color::Idx(208));
    assert_eq!(cell(2, 0).fgcolor(), vt100::Color::Idx(1));
    assert!(cell(4, 1).inverse());
    assert_eq!(cell(5, 1).bgcolor(), vt100::Color::Idx(22));
    assert!(cell(5, 13).is_wide(), "日 takes two columns");
}

#[test]
fn replay_in_small_chunks_gives_the_same_screen() {
    let bytes = fixture();
    let mut whole = Emulator::new(TermSize::new(8, 50), 100);
    whole.process(&bytes);
    for chunk in [1, 2, 3, 7, 64] {
        let mut split = Emulator::new(TermSize::new(8, 50), 100);
        for piece in bytes.chunks(chunk) {
            split.process(piece);
        }
        assert_eq!(
            split.screen_text(),
            whole.screen_text(),
            "chunk size {chunk}"
        );
        assert_eq!(
            split.screen().contents_formatted(),
            whole.screen().contents_formatted()
        );
    }
}

/// The real Claude Code CLI's interactive TUI, recorded at 100×30 by tests/claude_tui_pane.rs
/// (`WHILLY_RECORD_CLAUDE_TO=…`): welcome box, the prompt, the model's answer, the input box.
#[test]
fn replay_of_the_real_claude_tui() {
    let bytes = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fake_agents/fixtures/claude_interactive_100x30.ans"
    ))
    .unwrap();
    let mut emu = Emulator::new(TermSize::new(30, 100), 1000);
    emu.process(&bytes);
    let text = emu.screen_text();
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    assert!(lines[0].starts_with("╭─── Claude Code v"), "{text}");
    assert!(
        lines[0].ends_with('╮') && lines[0].chars().count() == 100,
        "{text}"
    );
    assert!(lines.contains(&"❯ say hello"), "{text}");
    assert!(lines.contains(&"● Task complete."), "{text}");
    assert!(
        lines.iter().any(|l| l.contains("? for shortcuts")),
        "{text}"
    );
    // Byte by byte the screen is the same: no sequence is misread when split.
    let mut split = Emulator::new(TermSize::new(30, 100), 1000);
    for b in bytes.chunks(1) {
        split.process(b);
    }
    assert_eq!(split.screen_text(), text);
    // The welcome box's border is drawn in the CLI's accent colour, not the default.
    let border = emu.screen().cell(0, 0).unwrap().fgcolor();
    assert_ne!(border, vt100::Color::Default);
}
