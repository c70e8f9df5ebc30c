//! `whilly bench …`: each benchmark measures its baseline in the same run and prints the ratio.

use super::args::BenchCommand;
use super::context::Context;
use super::exit;

pub(crate) async fn run(ctx: &Context, cmd: BenchCommand) -> anyhow::Result<i32> {
    match cmd {
        BenchCommand::Pty(args) => {
            let report = crate::bench::pty_drain::bench_drain(args.mb as u64).await?;
            outln!("{report}");
            Ok(exit::OK)
        }
        BenchCommand::Queue(args) => {
            use super::args::BenchBackend;
            let pg = (args.backend != BenchBackend::Sqlite).then(|| postgres_server(ctx));
            let opts = crate::bench::queue::QueueBenchOptions {
                tasks: args.tasks,
                workers: args.workers,
                wake_samples: args.wake_samples,
                sqlite: args.backend != BenchBackend::Postgres,
                key_files: args.key_files,
                max_parallel: args.max_parallel,
                postgres: pg,
            };
            for figures in crate::bench::queue::run(&opts).await? {
                outln!("{figures}\n");
            }
            Ok(exit::OK)
        }
        BenchCommand::Console(args) => {
            // WHILLY_BENCH_WHILLY measures another build (say, main's) with this harness;
            // WHILLY_BENCH_CASES picks cases by name.
            let whilly = match std::env::var_os("WHILLY_BENCH_WHILLY") {
                Some(p) => std::path::PathBuf::from(p),
                None => std::env::current_exe().map_err(|e| {
                    anyhow::anyhow!("cannot find the whilly binary to measure: {e}")
                })?,
            };
            if !whilly.is_file() {
                anyhow::bail!(
                    "WHILLY_BENCH_WHILLY={}: no such file; point it at a whilly binary",
                    whilly.display()
                );
            }
            let mut opts = crate::bench::console::ConsoleBenchOptions::new(whilly);
            opts.panes = args.panes;
            opts.mb = args.mb;
            opts.idle_secs = args.idle_secs;
            opts.first_frame_tasks = args.tasks;
            opts.first_frame_runs = args.runs;
            opts.tmux = !args.no_tmux;
            if let Ok(list) = std::env::var("WHILLY_BENCH_CASES") {
                opts.cases = crate::bench::console::BenchCases::parse(&list)
                    .map_err(|e| anyhow::anyhow!("WHILLY_BENCH_CASES: {e}"))?;
            }
            if let Some(n) = std::env::var("WHILLY_BENCH_BIG_TASKS")
                .ok()
                .and_then(|v| v.parse().ok())
            {
                opts.big_tasks = n;
            }
            if let Some(n) = std::env::var("WHILLY_BENCH_DB_SECS")
                .ok()
                .and_then(|v| v.parse().ok())
            {
                opts.db_secs = n;
            }
            opts.database_url = Some(postgres_server(ctx));
            let report = crate::bench::console::run(&opts).await?;
            if args.json {
                outln!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                outln!("{report}");
            }
            Ok(exit::OK)
        }
        BenchCommand::Sse(args) => {
            use super::args::BenchBackend;
            let opts = crate::bench::sse::SseBenchOptions {
                clients: args.clients,
                events: args.events,
                sqlite: args.backend != BenchBackend::Postgres,
                postgres: (args.backend != BenchBackend::Sqlite).then(|| postgres_server(ctx)),
            };
            for figures in crate::bench::sse::run(&opts).await? {
                outln!("{figures}\n");
            }
            Ok(exit::OK)
        }
        BenchCommand::Panes(args) => {
            let opts = crate::bench::panes::PanesBenchOptions {
                whilly: std::env::current_exe().map_err(|e| {
                    anyhow::anyhow!("cannot find the whilly binary to run the worker: {e}")
                })?,
                postgres: postgres_server(ctx),
                ticks: args.ticks.max(1),
                mb: args.mb,
            };
            outln!("{}", crate::bench::panes::run(&opts).await?);
            Ok(exit::OK)
        }
        BenchCommand::Engine(args) => {
            let source = match (&ctx.global.repo, args.files) {
                (Some(_), Some(_)) => {
                    anyhow::bail!(
                        "--repo and --files: give one (a repository to clone, or a size to generate)"
                    )
                }
                (Some(_), None) => crate::bench::engine::RepoSource::Clone(ctx.repo_root.clone()),
                (None, Some(n)) => crate::bench::engine::RepoSource::Generated(n),
                (None, None) => crate::bench::engine::RepoSource::Generated(20),
            };
            let report = crate::bench::engine::run(&crate::bench::engine::EngineBenchOpts {
                tasks: args.tasks,
                slots: args.slots,
                source,
                check: args.check,
            })
            .await?;
            outln!("{report}");
            Ok(exit::OK)
        }
    }
}

/// The Postgres server the benches make their scratch databases on.
fn postgres_server(ctx: &Context) -> String {
    ctx.global
        .database_url
        .clone()
        .or_else(|| std::env::var("WHILLY_DATABASE_URL").ok())
        .filter(|u| u.starts_with("postgres"))
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".to_string())
}
