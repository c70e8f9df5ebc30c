//! Panes reflow as tmux does. The real console (`whilly tui`) runs in tmux with an agent that
//! prints long lines once and then waits; the same lines are printed by `cat` in a bare tmux
//! pane of the console pane's inner size. After each change of size (the terminal made
//! smaller, 80×24, larger again, the pane zoomed), the bare pane is given the agent's new size
//! and the two must read the same, row for row: no line cut, nothing lost, words wrapped where
//! tmux wraps them.

#[path = "support/engine.rs"]
mod engine;
#[path = "support/tmux.rs"]
mod tmux;

use engine::{Repo, plan, task, wait_for};
use std::path::Path;
use std::time::Duration;
use tmux::{Tmux, console_script, sh_quote};

/// Lines long enough to wrap at every size used, of different lengths, words to break.
fn long_lines() -> String {
    let words = [
        "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
        "lambda", "mu",
    ];
    let mut out = String::new();
    for i in 0..8 {
        out.push_str(&format!("L{i}:"));
        for j in 0..(6 + i * 7) {
            out.push(' ');
            out.push_str(words[(i * 5 + j * 3) % words.len()]);
        }
        out.push('\n');
    }
    out
}

fn find_file(dir: &Path, name: &str) -> Option<std::path::PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.file_name().is_some_and(|n| n == name) {
            return Some(path);
        }
        if path.is_dir()
            && let Some(found) = find_file(&path, name)
        {
            return Some(found);
        }
    }
    None
}

/// The agent's terminal size as it last wrote it: (rows, cols).
fn agent_size(file: &Path) -> Option<(u16, u16)> {
    let text = std::fs::read_to_string(file).ok()?;
    let mut parts = text.split_whitespace().map(|p| p.parse::<u16>().ok());
    Some((parts.next()??, parts.next()??))
}

/// The rows of `console` where the bare pane's rows are, at the column where they start, cut
/// to the pane's width: found by the row holding the last line's start, which is on both.
fn pane_rows(console: &str, reference: &str, cols: u16) -> Option<Vec<String>> {
    let reference: Vec<&str> = reference.lines().collect();
    let anchor = reference.iter().position(|r| r.starts_with("L7:"))?;
    let screen: Vec<Vec<char>> = console.lines().map(|l| l.chars().collect()).collect();
    for (row, line) in screen.iter().enumerate() {
        let text: String = line.iter().collect();
        let Some(byte_col) = text.find(reference[anchor].trim_end()) else {
            continue;
        };
        let col = text[..byte_col].chars().count();
        let top = row.checked_sub(anchor)?;
        return Some(
            (0..reference.len())
                .map(|r| {
                    screen
                        .get(top + r)
                        .map(|l| {
                            l.iter()
                                .skip(col)
                                .take(usize::from(cols))
                                .collect::<String>()
                                .trim_end()
                                .to_string()
                        })
                        .unwrap_or_default()
                })
                .collect(),
        );
    }
    None
}

/// Waits until the console's pane reads like the bare pane at the agent's current size, and
/// returns that size.
fn assert_reads_like_tmux(console: &Tmux, size_file: &Path, lines_file: &Path, what: &str) {
    let mut last = String::new();
    let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_for(Duration::from_secs(20), what, || {
            last = format!("no agent size yet\n--- console\n{}", console.screen());
            let (rows, cols) = agent_size(size_file)?;
            let reference = Tmux::running(
                &format!("ref-{cols}x{rows}"),
                lines_file.parent().unwrap_or(Path::new("/")),
                cols,
                rows,
                &format!(
                    "cat {}; exec sleep 60",
                    sh_quote(&lines_file.to_string_lossy())
                ),
            );
            std::thread::sleep(Duration::from_millis(400));
            let want = reference.screen();
            let screen = console.screen();
            let got = pane_rows(&screen, &want, cols);
            let want_rows: Vec<String> = want.lines().map(|l| l.trim_end().to_string()).collect();
            last = format!(
                "agent size {cols}x{rows}\n--- tmux\n{}\n--- console\n{screen}",
                want_rows.join("\n")
            );
            (got.as_ref() == Some(&want_rows)).then_some(())
        })
    }));
    if found.is_err() {
        panic!("{what}: the pane does not read like tmux\n{last}");
    }
}

#[test]
fn panes_reflow_like_tmux_on_resize_and_zoom() {
    let scripts = tempfile::tempdir().unwrap();
    let lines_file = scripts.path().join("lines.txt");
    std::fs::write(&lines_file, long_lines()).unwrap();
    let agent = scripts.path().join("agent.sh");
    std::fs::write(
        &agent,
        format!(
            "#!/bin/sh\nsleep 1.5\nstty size > {size} < /dev/tty\ncat {lines}\n\
             ( while :; do stty size < /dev/tty > {size}.new && mv {size}.new {size}; sleep 0.2; done ) &\n\
             sleep 300\necho '<promise>COMPLETE</promise>'\n",
            size = ".agent-size",
            lines = sh_quote(&lines_file.to_string_lossy()),
        ),
    )
    .unwrap();
    let repo = Repo::new(
        &plan("p", vec![task("A")]),
        &format!("sh {}", sh_quote(&agent.to_string_lossy())),
    );
    let console = Tmux::start("reflow", &repo.repo);
    console.resize(160, 45);
    console.literal(&format!("sh {}", console_script(&repo).display()));
    console.keys(&["Enter"]);
    console.wait("the agent's lines in its pane", 90, |s| s.contains("L7:"));
    // The agent writes its size in its worktree (the sandbox keeps it there).
    let size_file = wait_for(Duration::from_secs(10), "the agent's size file", || {
        find_file(&repo.wt_dir, ".agent-size")
    });
    let size_file = size_file.as_path();
    assert_reads_like_tmux(&console, size_file, &lines_file, "at 160x45");

    // The terminal gets smaller: every line wraps anew, none is cut.
    console.resize(80, 24);
    wait_for(Duration::from_secs(10), "the agent resized", || {
        agent_size(size_file).filter(|&(_, c)| c < 70).map(|_| ())
    });
    assert_reads_like_tmux(&console, size_file, &lines_file, "at 80x24");

    // Larger again: the wrapped lines join again, as in tmux.
    console.resize(200, 60);
    wait_for(Duration::from_secs(10), "the agent resized", || {
        agent_size(size_file).filter(|&(_, c)| c > 120).map(|_| ())
    });
    assert_reads_like_tmux(&console, size_file, &lines_file, "at 200x60");

    // Zoomed: the pane takes the whole console, and its text follows.
    let before = agent_size(size_file);
    console.keys(&["Tab"]);
    console.literal("z");
    wait_for(Duration::from_secs(10), "the zoomed agent resized", || {
        (agent_size(size_file) != before).then_some(())
    });
    assert_reads_like_tmux(&console, size_file, &lines_file, "zoomed at 200x60");
    console.literal("z");
    console.keys(&["q"]);
}
