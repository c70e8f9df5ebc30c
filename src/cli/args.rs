//! The command line: every subcommand and flag, with examples in `--help`.

use super::complete;
pub use super::global_args::GlobalArgs;
use clap::{Args, Parser, Subcommand, ValueEnum};
use clap_complete::engine::ArgValueCompleter;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "whilly",
    version,
    about = "A terminal-first control plane for AI coding agents",
    long_about = "Whilly validates a plan, queues its tasks with their dependencies, priorities and \
budget, and runs each task with an AI coding agent in its own pseudo-terminal and git worktree. \
The queue is embedded (SQLite under .whilly/) unless WHILLY_DATABASE_URL points at Postgres.",
    after_help = "Examples:\n  whilly demo                 # a tour in a throwaway repository\n  \
whilly plan check tasks.json\n  whilly plan import tasks.json --budget 20\n  \
whilly my-plan               # the console on an imported plan (or: whilly tasks.json)\n  \
whilly plan show my-plan\n  whilly events --plan my-plan --follow\n\n\
Exit codes: 0 ok, 1 invalid input or failed work, 2 budget exhausted, 3 run timeout, 4 environment error (database unreachable, agent missing, credentials refused), 130 interrupted.",
    override_usage = "whilly [OPTIONS] [PLAN]\n       whilly [OPTIONS] <COMMAND>"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    /// Without a command: the console on this plan, a plan file (imported first) or an
    /// imported plan's id.
    #[arg(value_name = "PLAN", add = ArgValueCompleter::new(complete::plan_or_file))]
    pub plan_arg: Option<PathBuf>,
    /// Without a command: the console on this imported plan.
    #[arg(long, value_name = "ID", add = ArgValueCompleter::new(complete::plan_ids))]
    pub plan: Option<String>,
    #[command(subcommand)]
    pub command: Option<Command>,
}

impl Cli {
    /// `whilly PLAN` / `whilly --plan ID` are `whilly tui …`: one command line for the console,
    /// whichever way it was asked for. A plan before a command is refused (it would be ignored).
    pub fn normalize(mut self) -> Result<Cli, clap::Error> {
        let named = self.plan_arg.is_some() || self.plan.is_some();
        match &self.command {
            None if named => {
                self.command = Some(Command::Tui(RunArgs {
                    plan_arg: self.plan_arg.take(),
                    plan: self.plan.take(),
                    ..RunArgs::default()
                }));
            }
            Some(_) if named => {
                return Err(<Cli as clap::CommandFactory>::command().error(
                    clap::error::ErrorKind::ArgumentConflict,
                    "a plan goes after the command (`whilly run PLAN`, `whilly tui --plan ID`), \
                     or alone (`whilly PLAN`)",
                ));
            }
            _ => {}
        }
        Ok(self)
    }
}

/// The command line as parsed: the derived definitions with the global flags kept off the
/// commands they mean nothing to ([`UNUSED_GLOBALS`]).
pub fn command() -> clap::Command {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    for (path, ids) in UNUSED_GLOBALS {
        cmd = without_globals(cmd, path, ids);
    }
    cmd
}

/// Commands (by path) and the global flags (by id) that mean nothing there: `--database-url`
/// to a command that opens no queue, `--repo` to one that makes its own repository.
const UNUSED_GLOBALS: &[(&[&str], &[&str])] = &[
    (&["completions"], &["repo", "database_url", "overrides"]),
    (&["config"], &["database_url"]),
    (&["demo"], &["repo"]),
    // `bench engine --repo PATH` measures on a clone of PATH; the other benches make their own.
    (&["bench", "queue"], &["repo"]),
    (&["bench", "pty"], &["repo"]),
    (&["bench", "console"], &["repo"]),
    (&["bench", "sse"], &["repo"]),
    (&["bench", "panes"], &["repo"]),
    (&["plan", "check"], &["database_url"]),
];

/// A global flag is copied into every subcommand that has no argument of its id; a hidden
/// stand-in of that id keeps it out of the help and completions of `path` and below.
fn without_globals(cmd: clap::Command, path: &[&str], ids: &[&'static str]) -> clap::Command {
    let Some((first, rest)) = path.split_first() else {
        return ids.iter().fold(cmd, |c, id| c.arg(stand_in(id)));
    };
    cmd.mut_subcommand(*first, |sub| without_globals(sub, rest, ids))
}

fn stand_in(id: &'static str) -> clap::Arg {
    // Same id, long name and value type as the global flag, so a value given here anyway
    // still parses as the global one does.
    let arg = clap::Arg::new(id).hide(true);
    match id {
        "repo" => arg.long("repo").value_parser(clap::value_parser!(PathBuf)),
        "overrides" => arg
            .long("set")
            .action(clap::ArgAction::Append)
            .value_parser(clap::value_parser!(String)),
        _ => arg
            .long("database-url")
            .value_parser(clap::value_parser!(String)),
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check, analyse, import and manage plans.
    #[command(subcommand)]
    Plan(PlanCommand),
    /// Print the audit trail.
    #[command(
        after_help = "Examples:\n  whilly events\n  whilly events --plan demo --follow\n  whilly events --task TASK-001 --json"
    )]
    Events(EventsArgs),
    /// Database maintenance.
    #[command(subcommand)]
    Db(DbCommand),
    /// Show and change configuration.
    #[command(subcommand)]
    Config(crate::cli::config_cmd::ConfigCommand),
    /// Print shell completions (commands and flags; for plan and task ids too, use the dynamic
    /// ones below).
    #[command(
        after_help = "Examples:\n  whilly completions bash > ~/.local/share/bash-completion/completions/whilly\n  \
whilly completions zsh > ~/.zfunc/_whilly\n  whilly completions fish > ~/.config/fish/completions/whilly.fish\n\n\
Dynamic completions also complete the plan and task ids of the repository you are in:\n  \
echo 'source <(COMPLETE=bash whilly)' >> ~/.bashrc\n  echo 'source <(COMPLETE=zsh whilly)' >> ~/.zshrc\n  \
echo 'COMPLETE=fish whilly | source' >> ~/.config/fish/config.fish"
    )]
    Completions {
        /// The shell to write the completion script for.
        #[arg(value_enum)]
        shell: Shell,
    },
    /// Run a plan to the end with agents in PTYs and worktrees (headless: JSON lines on stdout).
    #[command(
        after_help = "Examples:\n  whilly run tasks.json --budget 10\n  whilly run --plan demo --parallel 4 --agent claude\n  \
whilly run tasks.json --timeout 2h --headless\n  whilly run --plan demo --resume      # after a crash\n\n\
Exit codes: 0 all DONE (SKIPPED allowed), 1 some FAILED, 2 budget exhausted, 3 timeout, 4 environment error, 130 interrupted."
    )]
    Run(RunArgs),
    /// The operator console: the run with every agent's terminal live in a pane.
    #[command(
        after_help = "Examples:\n  whilly tui tasks.json\n  whilly tui --plan demo --parallel 4\n\n\
Keys: ? help, q quit, Tab cycle panes, z zoom, i type into the focused agent (Ctrl-] returns), \
d detail, $ budget, l events, / filter."
    )]
    Tui(RunArgs),
    /// A throwaway repository with a small plan and a demo agent, run at once: Whilly in a minute.
    #[command(
        after_help = "Examples:\n  whilly demo\n  whilly demo --headless\n  whilly demo --agent claude   # the real Claude Code CLI"
    )]
    Demo(DemoArgs),
    /// A long-lived worker on a shared (Postgres) queue: claims ready tasks of any plan, or one.
    #[command(
        after_help = "Examples:\n  WHILLY_DATABASE_URL=postgres://queue-host/whilly whilly worker --slots 4\n  whilly worker --plan demo --tags gpu,linux"
    )]
    Worker(WorkerArgs),
    /// Tasks waiting for a human: list them, read their prompt, answer them.
    #[command(subcommand)]
    Handoff(HandoffCommand),
    /// One task: its story, or steer it from the shell (retry, skip).
    #[command(
        subcommand,
        after_help = "Examples:\n  whilly task show TASK-001\n  whilly task retry TASK-001 --reason \"the flaky test is fixed\"\n  \
whilly task skip TASK-004 --plan demo\n\nA task id in several plans needs --plan."
    )]
    Task(TaskCommand),
    /// Land the work of tasks that waited as "ready to merge" (their base had uncommitted
    /// changes to their files, or replaying them conflicted), once the base is clean.
    #[command(
        after_help = "Examples:\n  whilly merge TASK-001\n  whilly merge TASK-001 --plan demo\n  whilly merge --all --plan demo\n\n\
Exit codes: 0 every named task landed (DONE), 1 some did not land yet (the reason is printed) or bad input."
    )]
    Merge(MergeArgs),
    /// The task worktrees of this repository: list them with their disk usage, prune them.
    #[command(subcommand)]
    Worktrees(WorktreesCommand),
    /// Measure Whilly against raw baselines measured in the same run.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// The PRD wizard without the console: idea → interview → docs/PRD-<slug>.md → plan.
    #[command(subcommand)]
    Prd(PrdCommand),
    /// One GitHub issue to a reviewable draft pull request: read, gate, plan, run, compose.
    #[command(
        after_help = "Examples:\n  whilly forge octo-org/api#42\n  whilly forge https://github.com/octo-org/api/issues/42 --headless\n  \
whilly forge octo-org/api/42 --as-task      # the issue is the task; no planning agent\n  \
whilly forge --compose GH-42                # push and open the PR of a task whose PR failed\n\n\
The issue maps to plan gh-OWNER-REPO-N: a second forge resumes or reports it. An issue too vague \
to work on gets one comment saying what is missing, and nothing runs (exit 1).\n\
Exit codes: as `whilly run`; 1 bad input (issue not found, too vague), 4 environment (no or a refused token)."
    )]
    Forge(ForgeArgs),
    /// Serve the queue over HTTP (read-only): health, Prometheus metrics, the event stream.
    #[command(
        after_help = "Routes: /health/live, /health/ready (503 when the database does not answer within 1 s), /health (JSON), \
/metrics (Prometheus), /events/stream (Server-Sent Events; Last-Event-ID or ?after=N replays, ?plan=ID filters), \
/ (the status page: plans, tasks, workers, live), /status.json (what the page shows).\n\n\
Over SSH: on the build box `whilly serve`, on your laptop `ssh -N -L 8080:127.0.0.1:8787 you@buildbox`, then browse http://localhost:8080/.\n\n\
Loopback by default; another address needs [http] token, which every route but /health/live then requires.\n\n\
Examples:\n  whilly serve\n  whilly serve --http 127.0.0.1:9000\n  WHILLY_HTTP_TOKEN=s3cret whilly serve --http 0.0.0.0:8787"
    )]
    Serve {
        /// Where to listen (default: [http] addr, 127.0.0.1:8787).
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
    },
    /// The GitHub Projects (v2) board of [github.project]: its columns, each task's card, sync.
    #[command(subcommand)]
    Board(BoardCommand),
    /// Check this setup: the queue, agents, tokens, plans, worktrees, leases, workers, .whilly/.
    #[command(
        after_help = "Each finding says what is wrong, why it matters and how to fix it. --fix applies the safe fixes \
(permissions, orphan worktrees and landed branches, expired leases, silent workers, finished ghost plans) and says what it did.\n\n\
Examples:\n  whilly doctor\n  whilly doctor --fix\n  whilly doctor --format json\n\n\
Exit codes: 0 nothing wrong (warnings allowed), 1 a problem is left (after --fix: one it could not fix)."
    )]
    Doctor(DoctorArgs),
    /// What a run did: tasks with status, attempts, cost, duration, checks and pull requests; totals.
    #[command(
        after_help = "Every `whilly run` also writes one to .whilly/reports/<plan>-<UTC time>.md at its end.\n\n\
Examples:\n  whilly report\n  whilly report demo --format json\n  whilly report demo --out report.md"
    )]
    Report(ReportArgs),
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum DoctorFormat {
    /// Findings grouped by check, for people.
    #[default]
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// Markdown: a table of tasks and a totals line.
    #[default]
    Md,
    Json,
}

#[derive(Debug, Args, Clone, Default)]
pub struct DoctorArgs {
    /// Apply the fixes that cannot lose work, say what each did, then check again.
    #[arg(long)]
    pub fix: bool,
    /// `json` for scripts (one object: findings, fixes applied, exit code).
    #[arg(long, value_enum, default_value_t = DoctorFormat::Text)]
    pub format: DoctorFormat,
}

#[derive(Debug, Args, Clone, Default)]
pub struct ReportArgs {
    /// The plan (default: the only plan, or the one most recently changed).
    #[arg(value_name = "PLAN", add = ArgValueCompleter::new(complete::plan_ids))]
    pub plan: Option<String>,
    /// `md` (default) or `json`.
    #[arg(long, value_enum, default_value_t = ReportFormat::Md)]
    pub format: ReportFormat,
    /// Write it to FILE instead of printing it.
    #[arg(long, value_name = "FILE")]
    pub out: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand, Clone)]
pub enum BoardCommand {
    /// Add the columns the state mapping uses that the board lacks (existing ones keep their cards).
    #[command(after_help = "Examples:\n  whilly board ensure")]
    Ensure,
    /// Each task's card: its column now, the column of its state, and any drift.
    #[command(
        after_help = "Examples:\n  whilly board status\n  whilly board status --plan gh-octo-api --json\n\nExit 1 when a card has drifted."
    )]
    Status {
        /// Only this plan (default: every plan with tasks from issues).
        #[arg(long, value_name = "ID", add = ArgValueCompleter::new(complete::plan_ids))]
        plan: Option<String>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Put every card in its task's column (adding missing cards); a run does this as it goes.
    #[command(
        after_help = "Examples:\n  whilly board sync\n  whilly board sync --plan gh-octo-api"
    )]
    Sync {
        /// Only this plan (default: every plan with tasks from issues).
        #[arg(long, value_name = "ID", add = ArgValueCompleter::new(complete::plan_ids))]
        plan: Option<String>,
    },
}

#[derive(Debug, Args, Clone)]
pub struct ForgeArgs {
    /// The issue: OWNER/REPO#N, OWNER/REPO/N or its URL.
    #[arg(value_name = "ISSUE", required_unless_present = "compose")]
    pub issue: Option<String>,
    /// Push the branch and open (or update) the pull request of TASK, which waits as
    /// not_published, then mark it DONE.
    #[arg(long, value_name = "TASK", conflicts_with = "issue", add = ArgValueCompleter::new(complete::task_ids))]
    pub compose: Option<String>,
    /// With --compose: the plan of TASK (needed when several plans have the id).
    #[arg(long, value_name = "ID", requires = "compose", add = ArgValueCompleter::new(complete::plan_ids))]
    pub plan: Option<String>,
    /// The issue is the plan's one task, as written (no planning agent).
    #[arg(long)]
    pub as_task: bool,
    /// Make the plan, do not run it.
    #[arg(long)]
    pub no_run: bool,
    /// JSON lines on stdout instead of the console (also without a terminal).
    #[arg(long)]
    pub headless: bool,
    /// Agents running at once (default: run.parallel).
    #[arg(long, short = 'j', value_name = "N")]
    pub parallel: Option<usize>,
    /// The agent that does the tasks (default: run.agent).
    #[arg(long = "run-agent", value_name = "NAME")]
    pub run_agent: Option<String>,
    /// The plan's budget in USD.
    #[arg(long, value_name = "USD")]
    pub budget: Option<f64>,
    #[command(flatten)]
    pub oneshot: OneShotArgs,
}

#[derive(Debug, Args, Clone)]
pub struct MergeArgs {
    /// The tasks to land.
    #[arg(value_name = "TASK_ID", required_unless_present = "all", add = ArgValueCompleter::new(complete::task_ids))]
    pub tasks: Vec<String>,
    /// The plan the tasks belong to (needed when several plans have the id).
    #[arg(long, value_name = "ID", add = ArgValueCompleter::new(complete::plan_ids))]
    pub plan: Option<String>,
    /// Every task that waits to be merged (in `--plan`, or in every plan).
    #[arg(long, conflicts_with = "tasks")]
    pub all: bool,
}

/// Options shared by every command that calls an agent once (read-only).
#[derive(Debug, Args, Clone)]
pub struct OneShotArgs {
    /// The configured agent to ask (default: run.agent). It runs read-only whatever its
    /// permission_mode says.
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Limit for each agent call, e.g. 5m.
    #[arg(long, value_name = "DURATION", default_value = "10m")]
    pub agent_timeout: String,
}

/// Where a generated plan goes.
#[derive(Debug, Args, Clone)]
pub struct PlanOutArgs {
    /// Write the plan here (default: beside the PRD, docs/PRD-<slug>.plan.json).
    #[arg(long = "plan-out", alias = "out", value_name = "FILE")]
    pub plan_out: Option<PathBuf>,
    /// Import the plan into the queue as a plan of its own (its id gets a suffix if taken).
    #[arg(long, conflicts_with = "merge_into")]
    pub import: bool,
    /// Merge the plan's tasks into this imported plan (ids that clash are renamed).
    #[arg(long, value_name = "PLAN_ID", add = ArgValueCompleter::new(complete::plan_ids))]
    pub merge_into: Option<String>,
    /// The plan's id (default: prd-<slug>).
    #[arg(long, value_name = "ID")]
    pub plan_id: Option<String>,
    /// JSON agent replies that fail the checks get this many repair rounds.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub repair_rounds: u32,
}

#[derive(Debug, Subcommand)]
pub enum PrdCommand {
    /// From an idea to a PRD and a plan: the agent interviews you (answers from a file, from the
    /// terminal, or none), writes docs/PRD-<slug>.md, then turns it into a checked plan.
    #[command(
        after_help = "Examples:\n  whilly prd new --idea \"sync calendars between teams\"          # answer on the terminal\n  \
whilly prd new --idea \"…\" --answers-file answers.txt --import\n  \
whilly prd new --idea \"…\" --no-interview --plan-out plan.json --agent claude\n  \
whilly prd new --idea \"…\" --no-interview --merge-into my-plan\n\n\
Exit codes: 0 ok, 1 no usable plan (the raw reply is kept under .whilly/prd/) or tasks failing the decision gate (not imported or merged; the plan file is kept), 4 agent missing, 130 interrupted."
    )]
    New {
        /// The idea, in a sentence or a page.
        #[arg(long, value_name = "TEXT")]
        idea: String,
        /// Answers to the agent's questions, one per line, in order (an empty line lets the
        /// agent decide); the interview ends when they run out.
        #[arg(long, value_name = "FILE", conflicts_with = "no_interview")]
        answers_file: Option<PathBuf>,
        /// Write the PRD from the idea alone.
        #[arg(long)]
        no_interview: bool,
        /// At most this many questions.
        #[arg(long, value_name = "N", default_value_t = crate::prd::DEFAULT_MAX_QUESTIONS)]
        max_questions: usize,
        /// Stop after writing the PRD.
        #[arg(long, conflicts_with_all = ["import", "merge_into", "plan_out"])]
        no_plan: bool,
        #[command(flatten)]
        agent: OneShotArgs,
        #[command(flatten)]
        out: PlanOutArgs,
    },
    /// Turn an existing PRD file into a checked plan (read-only agent call, one repair round).
    #[command(
        after_help = "Examples:\n  whilly prd plan docs/PRD-calendar-sync.md\n  \
whilly prd plan docs/PRD-calendar-sync.md --out plan.json --import\n  \
whilly prd plan docs/PRD-calendar-sync.md --merge-into my-plan"
    )]
    Plan {
        /// The PRD file (Markdown) to turn into a plan.
        prd_file: PathBuf,
        #[command(flatten)]
        agent: OneShotArgs,
        #[command(flatten)]
        out: PlanOutArgs,
    },
}

#[derive(Debug, Args, Clone, Default)]
pub struct RunArgs {
    /// The plan: a plan file (imported, or re-imported, first) if one exists by that name, else
    /// an imported plan's id.
    #[arg(value_name = "PLAN", add = ArgValueCompleter::new(complete::plan_or_file))]
    pub plan_arg: Option<PathBuf>,
    /// An imported plan's id (with a plan file: the id to import it as).
    #[arg(long, value_name = "ID", add = ArgValueCompleter::new(complete::plan_ids))]
    pub plan: Option<String>,
    /// JSON lines on stdout instead of the console (also without a terminal).
    #[arg(long)]
    pub headless: bool,
    /// Agents running at once (default: run.parallel, 3); 0 claims no task, as --watch.
    #[arg(long, short = 'j', value_name = "N")]
    pub parallel: Option<usize>,
    /// Claim no task: only watch the plan while other workers run it (the way to watch a
    /// shared queue; same as -j 0).
    #[arg(long, conflicts_with = "parallel")]
    pub watch: bool,
    /// The agent for tasks that name none (default: run.agent, claude).
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// The plan's budget in USD.
    #[arg(long, value_name = "USD")]
    pub budget: Option<f64>,
    /// Wall-clock limit for the whole run, e.g. 90m (exit 3 when reached).
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// After a crash: tasks held by dead processes of this host go back to PENDING at once.
    #[arg(long)]
    pub resume: bool,
    /// Also serve health, metrics and the event stream on ADDR (see `whilly serve`).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
}

impl RunArgs {
    /// The slots asked for: `--watch` is zero, and so is `-j 0`.
    pub fn slots(&self) -> Option<usize> {
        if self.watch { Some(0) } else { self.parallel }
    }
}

#[derive(Debug, Args, Clone)]
pub struct DemoArgs {
    /// Where to create the demo repository (default: a new directory under the temp dir).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Run the demo with this agent instead of the bundled demo agent (e.g. claude).
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// JSON lines instead of the console.
    #[arg(long)]
    pub headless: bool,
}

#[derive(Debug, Args, Clone)]
pub struct WorkerArgs {
    /// Only this plan's tasks.
    #[arg(long, value_name = "ID", add = ArgValueCompleter::new(complete::plan_ids))]
    pub plan: Option<String>,
    /// Agents running at once (default: run.parallel, 3; at least 1 — to watch, use
    /// `whilly tui --watch`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub slots: Option<u16>,
    /// This worker's tags; tasks that require tags go only to workers having all of them.
    #[arg(long, value_delimiter = ',', value_name = "TAG,…")]
    pub tags: Vec<String>,
    /// The agent for tasks that name none (default: run.agent, claude).
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Exit when nothing is left that this worker could do (exit 0; 2 when what is left waits
    /// only for budget), instead of waiting for new work.
    #[arg(long)]
    pub until_idle: bool,
    /// Also serve health, metrics and the event stream on ADDR (see `whilly serve`).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
    /// The task lines on stdout as JSON events (one per line) instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// The task as the queue holds it (status, attempts, cost, why, what it waits on) and its
    /// events, one line each.
    Show {
        /// The task's id (see `whilly plan show PLAN`).
        #[arg(value_name = "TASK_ID", add = ArgValueCompleter::new(complete::task_ids))]
        task_id: String,
        /// The plan the task is in (needed when several plans have that id).
        #[arg(long, value_name = "PLAN_ID", add = ArgValueCompleter::new(complete::plan_ids))]
        plan: Option<String>,
        /// The record and every event as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Back to PENDING for another try (its attempts counted afresh); not while it runs.
    Retry {
        /// The task's id (see `whilly plan show PLAN`).
        #[arg(value_name = "TASK_ID", add = ArgValueCompleter::new(complete::task_ids))]
        task_id: String,
        /// The plan the task is in (needed when several plans have that id).
        #[arg(long, value_name = "PLAN_ID", add = ArgValueCompleter::new(complete::plan_ids))]
        plan: Option<String>,
        /// Why, for the audit trail.
        #[arg(long, default_value = "operator retry (cli)")]
        reason: String,
    },
    /// SKIPPED: it will not run; tasks that depend on it keep waiting (a dependency is met only
    /// when DONE).
    Skip {
        /// The task's id (see `whilly plan show PLAN`).
        #[arg(value_name = "TASK_ID", add = ArgValueCompleter::new(complete::task_ids))]
        task_id: String,
        /// The plan the task is in (needed when several plans have that id).
        #[arg(long, value_name = "PLAN_ID", add = ArgValueCompleter::new(complete::plan_ids))]
        plan: Option<String>,
        /// Why, for the audit trail.
        #[arg(long, default_value = "operator skip (cli)")]
        reason: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum HandoffCommand {
    /// Every task waiting for a human.
    #[command(after_help = "Example:\n  whilly handoff list")]
    List {
        /// Print the waiting tasks as JSON.
        #[arg(long)]
        json: bool,
        /// Only this plan's tasks.
        #[arg(long, value_name = "ID", add = ArgValueCompleter::new(complete::plan_ids))]
        plan: Option<String>,
    },
    /// A waiting task's prompt and where to answer.
    #[command(
        after_help = "Examples:\n  whilly handoff show TASK-007\n  whilly handoff show TASK-007 --plan billing"
    )]
    Show {
        /// The waiting task's id (see `whilly handoff list`).
        #[arg(add = ArgValueCompleter::new(complete::task_ids))]
        task_id: String,
        /// The task's plan, when tasks of several plans with this id are waiting.
        #[arg(long, value_name = "ID", add = ArgValueCompleter::new(complete::plan_ids))]
        plan: Option<String>,
        /// Print the prompt as an agent would get it (the whole envelope), not the task.
        #[arg(long)]
        prompt: bool,
    },
    /// Answer a waiting task (writes its result.json atomically).
    #[command(
        after_help = "Examples:\n  whilly handoff complete TASK-007 --status complete --message \"done, see commit\"\n  \
whilly handoff complete TASK-007 --status blocked --message \"needs prod credentials\"\n  \
whilly handoff complete TASK-007 --status failed --cost-usd 0.40"
    )]
    Complete {
        /// The waiting task's id (see `whilly handoff list`).
        #[arg(add = ArgValueCompleter::new(complete::task_ids))]
        task_id: String,
        /// The task's plan, when tasks of several plans with this id are waiting.
        #[arg(long, value_name = "ID", add = ArgValueCompleter::new(complete::plan_ids))]
        plan: Option<String>,
        /// complete, failed, blocked, human_loop or partial.
        #[arg(long)]
        status: String,
        /// What you did or found, for the task's record (and the agent's next round).
        #[arg(long)]
        message: Option<String>,
        /// What the work cost, in USD, counted against the plan's budget.
        #[arg(long, value_name = "USD")]
        cost_usd: Option<f64>,
    },
}

#[derive(Debug, Subcommand)]
pub enum WorktreesCommand {
    /// Every whilly worktree of this repository, with its size on disk.
    #[command(after_help = "Example:\n  whilly worktrees list")]
    List {
        /// Print the worktrees as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove worktrees whose task is finished (or all of them with --all).
    #[command(
        after_help = "Examples:\n  whilly worktrees prune\n  whilly worktrees prune --all --delete-branches"
    )]
    Prune {
        /// Every whilly worktree, also of unfinished tasks (their work is lost).
        #[arg(long)]
        all: bool,
        /// Also delete the task branches of removed worktrees.
        #[arg(long)]
        delete_branches: bool,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Subcommand)]
pub enum PlanCommand {
    /// Validate a plan file and report every problem at once.
    #[command(
        after_help = "Examples:\n  whilly plan check tasks.json\n  whilly plan check tasks.json --strict --json\n\n\
Exit status 1 when there are errors (with --strict, decision-gate warnings are errors)."
    )]
    Check {
        /// The plan file (v3 or v4 JSON).
        file: PathBuf,
        /// Treat decision-gate warnings as errors.
        #[arg(long)]
        strict: bool,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Write a starter plan (two small tasks that run as written) and the plan schema beside it.
    #[command(
        after_help = "Examples:\n  whilly plan new                 # tasks.json in the current directory\n  \
whilly plan new sprint.json --project billing\n\n\
Also writes whilly-plan.schema.json next to the plan, so an editor validates it through its \
\"$schema\". The fields: docs/plan-format.md."
    )]
    New {
        /// The plan file to write.
        #[arg(default_value = "tasks.json")]
        file: PathBuf,
        /// The project name (default: the repository's directory name).
        #[arg(long)]
        project: Option<String>,
        /// Replace the file if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Print the JSON Schema of plan files (for editors: point a plan's "$schema" at it).
    #[command(
        after_help = "Examples:\n  whilly plan schema > whilly-plan.schema.json\n  \
then in tasks.json: \"$schema\": \"./whilly-plan.schema.json\""
    )]
    Schema,
    /// The deterministic TRIZ report of a plan (a file, or an imported plan's id).
    #[command(
        after_help = "Examples:\n  whilly plan triz tasks.json\n  whilly plan triz my-plan --json\n  whilly plan triz tasks.json --strict   # exit 1 on revise/reject\n  \
whilly plan triz tasks.json --agent    # and the agent's contradiction analysis (run.agent)\n  \
whilly plan triz tasks.json --agent=codex"
    )]
    Triz {
        /// A plan file, or the id of an imported plan.
        #[arg(add = ArgValueCompleter::new(complete::plan_or_file))]
        target: String,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Exit 1 when the verdict is revise or reject.
        #[arg(long)]
        strict: bool,
        /// Add the agent's contradiction analysis (read-only; default agent: run.agent). Its
        /// verdict is shown, marked as the agent's; --strict goes by the deterministic one.
        #[arg(long, value_name = "NAME", num_args = 0..=1, default_missing_value = "", require_equals = true)]
        agent: Option<String>,
        /// Limit for each agent call, e.g. 5m.
        #[arg(long, value_name = "DURATION", default_value = "10m")]
        agent_timeout: String,
    },
    /// Split tasks too big for one agent session into 2–5 subtasks (read-only agent call).
    #[command(
        after_help = "Examples:\n  whilly plan decompose tasks.json                 # tasks the size heuristic flags\n  \
whilly plan decompose tasks.json --task TASK-004 --write\n  \
whilly plan decompose my-plan --task TASK-004 --write   # split it in the queue\n  \
whilly plan decompose my-plan --task TASK-004 --out split.json\n\n\
Subtasks are <id>a, <id>b, …; the first inherits the task's dependencies, tasks that waited for it \
wait for the last subtask (or all of them, as the agent's split says). The change is shown as a \
diff; --write (or a yes on the terminal) writes it: to the plan file, or for an imported plan into \
the queue, where only tasks that have not started can be split (one transaction per task, a \
task.split event). Exit 1 when the agent's split is unusable after one repair round (its reply is \
kept under .whilly/prd/)."
    )]
    Decompose(DecomposeArgs),
    /// Validate a plan file and write it to the queue in one transaction.
    #[command(
        after_help = "Examples:\n  whilly plan import tasks.json\n  whilly plan import tasks.json --budget 25 --id sprint-12\n  \
whilly plan import tasks.json --strict   # gate failures become SKIPPED (decision_gate_failed)\n\n\
Re-importing an unchanged plan changes nothing; a changed plan updates only tasks that have not started."
    )]
    Import {
        /// The plan file to import (v3 or v4 JSON), gh:OWNER/REPO[:LABEL] for the open
        /// GitHub issues with the label (default whilly:ready), or ghproject:OWNER/NUMBER[:COLUMN]
        /// for the open issues in a Projects board's column (default: Todo).
        file: PathBuf,
        /// With a ghproject: source, first add the columns the board lacks (`whilly board ensure`).
        #[arg(long)]
        ensure_board_statuses: bool,
        /// Tasks failing the decision gate are imported as SKIPPED.
        #[arg(long)]
        strict: bool,
        /// The plan's budget in USD (overrides the file).
        #[arg(long, value_name = "USD")]
        budget: Option<f64>,
        /// The plan id (overrides the file's plan_id / project).
        #[arg(long = "id", value_name = "PLAN_ID")]
        plan_id: Option<String>,
        /// Print the import report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List imported plans with their state (active, paused, done, archived), progress and
    /// budget.
    #[command(
        after_help = "Examples:\n  whilly plan list\n  whilly plan list --all --json\n\n\
A plan is done when every task has ended (DONE, FAILED or SKIPPED)."
    )]
    List {
        /// Print the plans as JSON.
        #[arg(long)]
        json: bool,
        /// Archived plans too (marked archived).
        #[arg(long)]
        all: bool,
    },
    /// Hide a plan from lists (its tasks and events are kept; `--undo` lists it again).
    #[command(
        after_help = "Examples:\n  whilly plan archive sprint-11\n  whilly plan archive sprint-11 --undo"
    )]
    Archive {
        /// The imported plan's id (see `whilly plan list`).
        #[arg(add = ArgValueCompleter::new(complete::plan_ids))]
        plan_id: String,
        /// List the plan again (same as `whilly plan unarchive ID`).
        #[arg(long)]
        undo: bool,
    },
    /// List an archived plan again.
    #[command(after_help = "Example:\n  whilly plan unarchive sprint-11")]
    Unarchive {
        /// The archived plan's id (see `whilly plan list --all`).
        #[arg(add = ArgValueCompleter::new(complete::plan_ids))]
        plan_id: String,
    },
    /// Delete a plan and its tasks (asks first; the audit trail keeps its events and records
    /// the deletion). Refused while its tasks run.
    #[command(
        after_help = "Examples:\n  whilly plan delete sprint-11\n  whilly plan delete sprint-11 --yes   # without asking (scripts)"
    )]
    Delete {
        /// The imported plan's id (see `whilly plan list`).
        #[arg(add = ArgValueCompleter::new(complete::plan_ids))]
        plan_id: String,
        /// Do not ask (needed without a terminal).
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// A plan's tasks, dependency tree and budget.
    #[command(after_help = "Examples:\n  whilly plan show demo\n  whilly plan show demo --json")]
    Show {
        /// The imported plan's id (see `whilly plan list`).
        #[arg(add = ArgValueCompleter::new(complete::plan_ids))]
        plan_id: String,
        /// Print the plan and its tasks as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print a plan as canonical JSON (export → import → export is byte-identical).
    #[command(
        after_help = "Examples:\n  whilly plan export demo > demo.json\n  whilly plan export demo -o demo.json"
    )]
    Export {
        /// The imported plan's id (see `whilly plan list`).
        #[arg(add = ArgValueCompleter::new(complete::plan_ids))]
        plan_id: String,
        /// Write to this file (atomically) instead of stdout.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Put every task back to PENDING (--keep-tasks) or delete the plan's tasks (--hard).
    #[command(
        after_help = "Examples:\n  whilly plan reset demo --keep-tasks\n  whilly plan reset demo --hard"
    )]
    Reset {
        /// The imported plan's id (see `whilly plan list`).
        #[arg(add = ArgValueCompleter::new(complete::plan_ids))]
        plan_id: String,
        /// Every task back to PENDING: attempts, costs and reasons cleared, tasks kept.
        #[arg(long, conflicts_with = "hard")]
        keep_tasks: bool,
        /// Delete the plan's tasks (its events stay in the audit trail).
        #[arg(long)]
        hard: bool,
    },
    /// Stop handing out this plan's tasks (running ones finish).
    #[command(after_help = "Example:\n  whilly plan pause demo")]
    Pause {
        /// The imported plan's id (see `whilly plan list`).
        #[arg(add = ArgValueCompleter::new(complete::plan_ids))]
        plan_id: String,
    },
    /// Hand out this plan's tasks again.
    #[command(after_help = "Example:\n  whilly plan resume demo")]
    Resume {
        /// The imported plan's id (see `whilly plan list`).
        #[arg(add = ArgValueCompleter::new(complete::plan_ids))]
        plan_id: String,
    },
    /// The agent plays devil's advocate on a plan (read-only): risks, missing tasks, vague
    /// criteria, dependencies.
    #[command(
        after_help = "Examples:\n  whilly plan challenge tasks.json\n  whilly plan challenge --plan demo --agent claude"
    )]
    Challenge {
        /// A plan file.
        #[arg(required_unless_present = "plan", conflicts_with = "plan")]
        plan_file: Option<PathBuf>,
        /// An imported plan's id.
        #[arg(long, value_name = "ID", add = ArgValueCompleter::new(complete::plan_ids))]
        plan: Option<String>,
        #[command(flatten)]
        agent: OneShotArgs,
    },
}

/// `whilly plan decompose`.
#[derive(Debug, Args)]
pub struct DecomposeArgs {
    /// A plan file, or the id of an imported plan.
    #[arg(add = ArgValueCompleter::new(complete::plan_or_file))]
    pub target: String,
    /// Split this task (repeatable; default: every task the size heuristic flags).
    #[arg(long = "task", value_name = "ID")]
    pub tasks: Vec<String>,
    /// Write the split without asking: back to the plan file, or into the queue for an
    /// imported plan.
    #[arg(long)]
    pub write: bool,
    /// Write the split plan to this file instead (the queue is left as it is).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Subtasks may name key files the task did not list.
    #[arg(long)]
    pub allow_new_files: bool,
    /// Print the splits and the new plan as JSON (nothing is asked).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub agent: OneShotArgs,
}

#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Only this plan's events.
    #[arg(long, value_name = "PLAN_ID", add = ArgValueCompleter::new(complete::plan_ids))]
    pub plan: Option<String>,
    /// Only this task's events (of every plan with that id, unless --plan says which).
    #[arg(long, value_name = "TASK_ID", add = ArgValueCompleter::new(complete::task_ids))]
    pub task: Option<String>,
    /// Keep printing new events as they are written (Ctrl-C to stop).
    #[arg(short, long)]
    pub follow: bool,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// Only the last N events (before following).
    #[arg(short = 'n', long, value_name = "N")]
    pub last: Option<i64>,
}

#[derive(Debug, Subcommand)]
pub enum DbCommand {
    /// Apply pending migrations (they are also applied automatically on first use).
    #[command(
        after_help = "Examples:\n  whilly db migrate\n  WHILLY_DATABASE_URL=postgres://localhost/whilly whilly db migrate"
    )]
    Migrate,
    /// Which database, where, and which migrations are applied.
    #[command(after_help = "Example:\n  whilly db status")]
    Status {
        /// Print the status as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Queue throughput (claim → complete) and wake latency against the raw-SQL ceiling.
    #[command(
        after_help = "Examples:\n  whilly bench queue\n  whilly bench queue --tasks 20000 --workers 4 --backend postgres\n\n\
Postgres comes from --database-url / WHILLY_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres \
(a scratch database is created and dropped)."
    )]
    Queue(BenchQueueArgs),
    /// Per-task engine overhead with an instant agent, against `git worktree add` + a spawn by hand.
    #[command(
        after_help = "Examples:\n  whilly bench engine\n  whilly bench engine --tasks 200 --slots 4\n  \
whilly bench engine --tasks 20 --slots 1 --repo ~/src/cargo     # a clone of a real repository\n  \
whilly bench engine --tasks 5 --slots 1 --files 100000          # a generated 100,000-file one"
    )]
    Engine(BenchEngineArgs),
    /// Draining a coloured stream through a PTY and the emulator, against tmux.
    #[command(after_help = "Examples:\n  whilly bench pty\n  whilly bench pty --mb 30")]
    Pty(BenchPtyArgs),
    /// The real console (`whilly tui`) in a terminal of its own: draining N panes against tmux,
    /// idle CPU and memory with N panes, start-up to the first frame on a large plan.
    #[command(
        after_help = "Examples:\n  whilly bench console\n  whilly bench console --panes 4 --mb 10 --idle-secs 5\n\n\
Runs in a scratch git repository under the temp dir (removed after); tmux is the baseline \
(skipped with a note when it is not installed). About 1.5 minutes with the defaults on 2 cores. \
WHILLY_BENCH_KEEP=1 keeps the scratch project when a step fails."
    )]
    Console(BenchConsoleArgs),
    /// The event stream's fan-out: N clients following `/events/stream` against the events
    /// table's insert rate alone.
    #[command(
        after_help = "Examples:\n  whilly bench sse\n  whilly bench sse --clients 100 --events 5000 --backend postgres\n\n\
The server runs in this process on a scratch queue (SQLite in the temp dir; Postgres from \
--database-url / WHILLY_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres, on a \
scratch database created and dropped)."
    )]
    Sse(BenchSseArgs),
    /// Remote panes: an agent's line to another process's screen (p50/p99), and a flood's time
    /// with a viewer reading or stalled against nobody watching.
    #[command(
        after_help = "Examples:\n  whilly bench panes\n  whilly bench panes --ticks 400 --mb 50\n\n\
A real `whilly worker` (this binary) runs the agents in a scratch repository; this process \
views. Postgres from --database-url / WHILLY_DATABASE_URL, default \
postgres://postgres@127.0.0.1:5432/postgres (a scratch database is created and dropped)."
    )]
    Panes(BenchPanesArgs),
}

#[derive(Debug, Args, Clone)]
pub struct BenchPanesArgs {
    /// Ticks (one every 50 ms) timed for the latency.
    #[arg(long, default_value_t = 200)]
    pub ticks: usize,
    /// Megabytes each flood prints.
    #[arg(long, default_value_t = 30)]
    pub mb: u64,
}

#[derive(Debug, Args, Clone)]
pub struct BenchSseArgs {
    /// Clients following the stream at once.
    #[arg(long, default_value_t = 100)]
    pub clients: usize,
    /// Events appended (once alone for the baseline, once with the clients).
    #[arg(long, default_value_t = 5000)]
    pub events: usize,
    /// Which queues to measure.
    #[arg(long, value_enum, default_value_t = BenchBackend::Both)]
    pub backend: BenchBackend,
}

#[derive(Debug, Args, Clone)]
pub struct BenchConsoleArgs {
    /// Agents (panes) at once.
    #[arg(long, default_value_t = 8)]
    pub panes: usize,
    /// Megabytes of coloured output each drain agent prints.
    #[arg(long, default_value_t = 30)]
    pub mb: u64,
    /// Seconds of the idle CPU window.
    #[arg(long, default_value_t = 10)]
    pub idle_secs: u64,
    /// Tasks in the plan the console starts on for the first-frame time.
    #[arg(long, default_value_t = 10_000)]
    pub tasks: usize,
    /// Console starts per plan for the first-frame time (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Skip the tmux baselines.
    #[arg(long)]
    pub no_tmux: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args, Clone)]
pub struct BenchEngineArgs {
    /// Tasks the instant agent runs.
    #[arg(long, default_value_t = 100)]
    pub tasks: usize,
    /// Agents running at once.
    #[arg(long, default_value_t = 3)]
    pub slots: usize,
    /// Measure on a generated repository of this many files (e.g. 100000). With the global
    /// `--repo PATH` instead, the bench measures on a local clone of that repository (in the
    /// temp dir: the repository itself is not touched).
    #[arg(long, value_name = "N")]
    pub files: Option<usize>,
    /// The check every task runs, in its worktree (default: `true`). A build, e.g.
    /// `cargo check`, shows what the pool's kept build caches save from the second task on.
    #[arg(long, value_name = "CMD")]
    pub check: Option<String>,
}

#[derive(Debug, Args, Clone)]
pub struct BenchPtyArgs {
    /// Megabytes of coloured output to drain.
    #[arg(long, default_value_t = 30)]
    pub mb: usize,
}

#[derive(Debug, Args, Clone)]
pub struct BenchQueueArgs {
    /// Tasks in the scratch queue.
    #[arg(long, default_value_t = 5000)]
    pub tasks: usize,
    /// Workers claiming at once.
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// Which queues to measure.
    #[arg(long, value_enum, default_value_t = BenchBackend::Both)]
    pub backend: BenchBackend,
    /// Wake-latency samples.
    #[arg(long, default_value_t = 200)]
    pub wake_samples: usize,
    /// Give each task one of N key files, so every claim takes the key_files check.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub key_files: usize,
    /// Run every task on one agent with `max_parallel = N`, so every claim counts that agent's
    /// live leases (on Postgres under its advisory lock); N at or above --workers measures
    /// what the check costs, below it what the limit does to throughput.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_parallel: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BenchBackend {
    Sqlite,
    Postgres,
    Both,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every argument of every command, flag or positional, says what it is for in `--help`.
    #[test]
    fn every_argument_has_a_description() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") || arg.is_hide_set() {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut cmd = command();
        cmd.build();
        let mut missing = Vec::new();
        walk(&cmd, "whilly", &mut missing);
        assert!(
            missing.is_empty(),
            "arguments without help:\n{}",
            missing.join("\n")
        );
    }
}
