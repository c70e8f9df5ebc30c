//! The process exit codes every command shares, in one place: the engine's run ends, the
//! importers' errors and the command line all map onto these.

/// The budget is spent (the original's code, kept).
pub const BUDGET_EXHAUSTED: i32 = 2;
/// The run's wall-clock limit was reached.
pub const TIMED_OUT: i32 = 3;
/// The machine must be fixed: the database does not answer, an agent or a check's program is
/// missing, a token is refused. Not 2, so a script tells it from a spent budget by the code.
pub const ENVIRONMENT: i32 = 4;
/// Stopped by Ctrl-C or a signal.
pub const INTERRUPTED: i32 = 130;
