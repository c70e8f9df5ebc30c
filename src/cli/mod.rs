//! The command line: parse, set up logging, dispatch, map errors to exit codes.

/// `println!` that hands the write error back instead of panicking: a reader that went away
/// (`whilly … | head -1`) ends the command quietly (see [`main`]), never with a panic.
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout(), $($t)*)?
    }};
}

/// `print!` likewise.
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout(), $($t)*)?
    }};
}

/// `eprintln!` that never panics: a closed stderr (`2>&1 | tee log` after Ctrl-C) must not stop
/// what the message is about, such as forwarding a stop to the engine.
macro_rules! errln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

pub mod args;
pub(crate) mod bench_cmd;
pub(crate) mod board_cmd;
pub(crate) mod complete;
pub mod config_cmd;
pub(crate) mod context;
pub(crate) mod db_cmd;
pub(crate) mod demo_cmd;
pub(crate) mod doctor_cmd;
pub(crate) mod events_cmd;
pub(crate) mod exit;
pub(crate) mod forge_cmd;
pub(crate) mod global_args;
pub(crate) mod handoff_cmd;
pub(crate) mod launcher;
pub(crate) mod logging;
pub(crate) mod merge_cmd;
pub(crate) mod plan_checks;
pub(crate) mod plan_choice;
pub(crate) mod plan_cmd;
pub(crate) mod plan_new;
pub(crate) mod plan_preflight;
pub(crate) mod plan_view;
pub(crate) mod prd_cmd;
pub(crate) mod report_cmd;
pub(crate) mod run_cmd;
pub(crate) mod serve_cmd;
pub(crate) mod signals;
pub(crate) mod task_cmd;
pub(crate) mod tui_cmd;
pub(crate) mod worker_lines;
pub(crate) mod worktrees_cmd;

use args::{Cli, Command};
use context::Context;
use std::process::ExitCode;

/// Entry point of the `whilly` binary.
/// Raises this process's soft limit on open files to its hard limit (at most 65,536): the
/// default soft limit (often 1,024) is shared by the queue, the agents' terminals and logs and
/// the HTTP surface, and a busy run should not find it first. The HTTP surface caps its own
/// share ([`crate::http::listener`]).
fn raise_descriptor_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit on this process with a valid struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return;
        }
        let want = lim.rlim_max.min(65_536);
        if lim.rlim_cur < want {
            lim.rlim_cur = want;
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

pub fn main() -> ExitCode {
    // The guard every agent runs under: before anything else (it forks, single-threaded).
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args
        .get(1)
        .is_some_and(|a| a == crate::procguard::GUARD_ARG)
    {
        crate::procguard::run(&args[2..]);
    }
    // `COMPLETE=bash whilly …`: the shell asks for completions (plan and task ids included).
    clap_complete::CompleteEnv::with_factory(args::command)
        .bin("whilly")
        .complete();
    if let Ok(exe) = std::env::current_exe() {
        crate::procguard::enable(exe);
    }
    launcher::unblock_inherited();
    raise_descriptor_limit();
    let parsed = args::command()
        .try_get_matches()
        .and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m))
        .and_then(Cli::normalize);
    let cli = match parsed {
        Ok(cli) => cli,
        Err(err) => {
            // clap exits 2 for usage errors; ours is 1 (invalid input), 2 is kept for the environment.
            let code = match err.kind() {
                clap::error::ErrorKind::DisplayHelp
                | clap::error::ErrorKind::DisplayVersion
                | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => exit::OK,
                _ => exit::FAILED,
            };
            let _ = err.print();
            return ExitCode::from(code as u8);
        }
    };
    // The console runs in a child so that its agents can outlive the terminal on request.
    if launcher::wanted(&cli)
        && let Some(code) = launcher::launch()
    {
        return code;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            errln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(exit::ENVIRONMENT as u8);
        }
    };
    let code = runtime.block_on(async {
        match dispatch(cli).await {
            Ok(code) => code,
            // The reader of our output went away (`| head`): not an error of ours.
            Err(err) if exit::is_broken_pipe(&err) => exit::OK,
            Err(err) => {
                let text = exit::describe(&err);
                // The log file keeps what ended the command, next to what led to it.
                tracing::error!("command failed: {text}");
                errln!("error: {text}");
                exit::code_for(&err)
            }
        }
    });
    ExitCode::from(code.clamp(0, 255) as u8)
}

/// Runs the command; a headless run that fails before or instead of its own `complete` line
/// (no repository, the queue unreachable, an agent's program missing, the engine stopped by an
/// outage) still ends its output with one, so a script reads how it ended from the last line.
async fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    let headless = match &cli.command {
        Some(Command::Run(a) | Command::Tui(a)) => a.headless || !crate::tui::terminal::available(),
        Some(Command::Forge(a)) if a.compose.is_none() && !a.no_run => {
            a.headless || !crate::tui::terminal::available()
        }
        _ => false,
    };
    let result = dispatch_command(cli).await;
    if headless
        && let Err(err) = &result
        && !exit::is_broken_pipe(err)
        && err.downcast_ref::<exit::UsageError>().is_none()
    {
        let end = match exit::code_for(err) {
            exit::ENVIRONMENT => crate::engine::RunEnd::Environment,
            exit::INTERRUPTED => crate::engine::RunEnd::Interrupted,
            _ => crate::engine::RunEnd::InvalidInput,
        };
        let line = crate::engine::progress::failed_line(end, &exit::describe(err));
        // Best-effort like every progress line: the exit code says it too.
        let _ = {
            use std::io::Write as _;
            writeln!(std::io::stdout(), "{line}")
        };
    }
    result
}

async fn dispatch_command(cli: Cli) -> anyhow::Result<i32> {
    let command = match cli.command {
        Some(c) => c,
        // No arguments: the console on a terminal (over the imported plan), help otherwise.
        None if std::io::IsTerminal::is_terminal(&std::io::stdout()) => {
            Command::Tui(args::RunArgs::default())
        }
        None => {
            args::command().print_help()?;
            return Ok(exit::OK);
        }
    };
    if let Command::Completions { shell } = command {
        print_completions(shell)?;
        return Ok(exit::OK);
    }
    if let Command::Demo(args) = command {
        return demo_cmd::run(cli.global, args).await;
    }
    let ctx = Context::new(cli.global)?;
    if needs_repo(&command) {
        ctx.require_repo()?;
    }
    // Outside a repository there is no `.whilly/` to log into, and none is made; benches work
    // in scratch repositories and leave the one they were started in (or `--repo`) alone.
    let _log_guard = (ctx.in_repo && !matches!(command, Command::Bench(_))).then(|| {
        let (dir, level) = logging::settings(&ctx);
        logging::init(&dir, &level)
    });
    tracing::info!(repo = %ctx.repo_root.display(), "whilly {}", env!("CARGO_PKG_VERSION"));
    match command {
        Command::Plan(cmd) => plan_cmd::run(&ctx, cmd).await,
        Command::Events(args) => events_cmd::run(&ctx, args).await,
        Command::Db(cmd) => db_cmd::run(&ctx, cmd).await,
        Command::Config(cmd) => config_cmd::run(&cmd, &ctx.config_load_options()),
        Command::Run(args) => tui_cmd::run_interactive(&ctx, args).await,
        Command::Tui(args) => tui_cmd::run(&ctx, args).await,
        Command::Worker(args) => run_cmd::worker(&ctx, args).await,
        Command::Handoff(cmd) => handoff_cmd::run(&ctx, cmd).await,
        Command::Task(cmd) => task_cmd::run(&ctx, cmd).await,
        Command::Worktrees(cmd) => worktrees_cmd::run(&ctx, cmd).await,
        Command::Merge(args) => merge_cmd::run(&ctx, args).await,
        Command::Bench(cmd) => bench_cmd::run(&ctx, cmd).await,
        Command::Prd(cmd) => prd_cmd::run(&ctx, cmd).await,
        Command::Forge(args) => forge_cmd::run(&ctx, args).await,
        Command::Board(cmd) => board_cmd::run(&ctx, cmd).await,
        Command::Serve { http } => serve_cmd::run(&ctx, http.as_deref()).await,
        Command::Doctor(args) => doctor_cmd::run(&ctx, args).await,
        Command::Report(args) => report_cmd::run(&ctx, args).await,
        Command::Completions { .. } | Command::Demo(_) => Ok(exit::OK),
    }
}

/// Whether the command works on a repository (its queue, worktrees, handoffs, logs). The rest
/// (configuration, benchmarks in scratch repositories, reading a plan file) works anywhere.
fn needs_repo(command: &Command) -> bool {
    use args::PlanCommand;
    match command {
        Command::Config(_) | Command::Bench(_) | Command::Completions { .. } | Command::Demo(_) => {
            false
        }
        Command::Plan(
            PlanCommand::Check { .. } | PlanCommand::New { .. } | PlanCommand::Schema,
        ) => false,
        Command::Plan(PlanCommand::Triz { target, .. }) => !std::path::Path::new(target).is_file(),
        Command::Plan(PlanCommand::Challenge { plan_file, .. }) => plan_file.is_none(),
        _ => true,
    }
}

fn print_completions(shell: args::Shell) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut cmd = args::command();
    let shell = match shell {
        args::Shell::Bash => clap_complete::Shell::Bash,
        args::Shell::Zsh => clap_complete::Shell::Zsh,
        args::Shell::Fish => clap_complete::Shell::Fish,
    };
    // clap_complete panics when its writer fails; it writes to memory, we write that out.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "whilly", &mut script);
    std::io::stdout().write_all(&script)
}
