//! The real terminal: raw mode, alternate screen, bracketed paste and mouse capture on the way
//! in; restored on every way out (normal return, error, panic) before agents are killed, so the
//! operator never gets a broken shell and no agent outlives the console.

use crate::engine::sessions::SessionRegistry;
use crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
};
use crossterm::terminal::{
    BeginSynchronizedUpdate, EndSynchronizedUpdate, EnterAlternateScreen, LeaveAlternateScreen,
    disable_raw_mode, enable_raw_mode,
};
use crossterm::{cursor, execute, queue};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use std::io::{self, BufWriter, Stdout, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once};

/// Frames are written through a large buffer: one write per frame instead of one per cell.
pub(crate) type ConsoleTerminal = Terminal<CrosstermBackend<BufWriter<Stdout>>>;

const WRITE_BUFFER: usize = 256 * 1024;

/// Whether the terminal is in console mode right now (so restore runs once).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// The sessions to kill if the process panics while the console runs.
static PANIC_SESSIONS: Mutex<Option<SessionRegistry>> = Mutex::new(None);
static HOOK: Once = Once::new();

/// Whether the console can run here: it draws on standard output and reads keys from standard
/// input, so both must be terminals (otherwise commands fall back to their headless form).
pub(crate) fn available() -> bool {
    use std::io::IsTerminal;
    io::stdout().is_terminal() && io::stdin().is_terminal()
}

/// Puts the terminal back as it was. Idempotent; safe from a panic hook.
pub(crate) fn restore() {
    if !ACTIVE.swap(false, Ordering::SeqCst) {
        return;
    }
    let mut out = io::stdout();
    let _ = execute!(
        out,
        EndSynchronizedUpdate,
        DisableMouseCapture,
        DisableBracketedPaste,
        LeaveAlternateScreen,
        cursor::Show
    );
    let _ = disable_raw_mode();
    let _ = out.flush();
}

fn install_panic_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // Terminal first, so the panic message is readable; then no orphaned agents.
            restore();
            if let Ok(mut guard) = PANIC_SESSIONS.lock()
                && let Some(sessions) = guard.take()
            {
                sessions.kill_all();
            }
            previous(info);
        }));
    });
}

/// Owns console mode; dropping it restores the terminal and then kills remaining agents.
pub(crate) struct TerminalGuard {
    sessions: SessionRegistry,
}

impl TerminalGuard {
    pub(crate) fn enter(sessions: SessionRegistry) -> io::Result<(TerminalGuard, ConsoleTerminal)> {
        install_panic_hook();
        if let Ok(mut guard) = PANIC_SESSIONS.lock() {
            *guard = Some(sessions.clone());
        }
        enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        let guard = TerminalGuard { sessions };
        let mut out = io::stdout();
        execute!(
            out,
            EnterAlternateScreen,
            EnableBracketedPaste,
            EnableMouseCapture,
            cursor::Hide
        )?;
        let backend = CrosstermBackend::new(BufWriter::with_capacity(WRITE_BUFFER, io::stdout()));
        let mut terminal = Terminal::new(backend)?;
        terminal.clear()?;
        Ok((guard, terminal))
    }

    /// Restores the terminal now, for good: the agents keep running (dropping the guard later
    /// kills what is left, as always).
    pub(crate) fn release_terminal(&self) {
        restore();
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
        self.sessions.kill_all();
        if let Ok(mut guard) = PANIC_SESSIONS.lock() {
            *guard = None;
        }
    }
}

/// Draws one frame inside a synchronized update, so terminals show it whole or not at all.
pub(crate) fn draw_synchronized<F>(terminal: &mut ConsoleTerminal, render: F) -> io::Result<()>
where
    F: FnOnce(&mut ratatui::Frame),
{
    queue!(terminal.backend_mut(), BeginSynchronizedUpdate)?;
    terminal.draw(render)?;
    execute!(terminal.backend_mut(), EndSynchronizedUpdate)?;
    Ok(())
}
