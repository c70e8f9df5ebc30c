//! `whilly bench …`: each benchmark measures its baseline in the same run and prints the ratio.

use super::args::BenchCommand;
use super::context::Context;
use super::exit;

pub async fn run(ctx: &Context, cmd: BenchCommand) -> anyhow::Result<i32> {
    match cmd {
        BenchCommand::Pty(args) => {
            let report = crate::pty::bench::bench_drain(args.mb as u64).await?;
            outln!("{report}");
            Ok(exit::OK)
        }
        BenchCommand::Queue(args) => {
            use super::args::BenchBackend;
            let pg = match args.backend {
                BenchBackend::Sqlite => None,
                _ => Some(
                    ctx.global
                        .database_url
                        .clone()
                        .or_else(|| std::env::var("WHILLY_DATABASE_URL").ok())
                        .filter(|u| u.starts_with("postgres"))
                        .unwrap_or_else(|| {
                            "postgres://postgres@127.0.0.1:5432/postgres".to_string()
                        }),
                ),
            };
            let opts = crate::bench::queue::QueueBenchOptions {
                tasks: args.tasks,
                workers: args.workers,
                wake_samples: args.wake_samples,
                sqlite: args.backend != BenchBackend::Postgres,
                key_files: args.key_files,
                postgres: pg,
            };
            for figures in crate::bench::queue::run(&opts).await? {
                outln!("{figures}\n");
            }
            Ok(exit::OK)
        }
        BenchCommand::Console(args) => {
            let whilly = std::env::current_exe()
                .map_err(|e| anyhow::anyhow!("cannot find the whilly binary to measure: {e}"))?;
            let mut opts = crate::bench::console::ConsoleBenchOptions::new(whilly);
            opts.panes = args.panes;
            opts.mb = args.mb;
            opts.idle_secs = args.idle_secs;
            opts.first_frame_tasks = args.tasks;
            opts.first_frame_runs = args.runs;
            opts.tmux = !args.no_tmux;
            let report = crate::bench::console::run(&opts).await?;
            if args.json {
                outln!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                outln!("{report}");
            }
            Ok(exit::OK)
        }
        BenchCommand::Engine(args) => {
            let report = crate::bench::engine::run(args.tasks, args.slots).await?;
            outln!("{report}");
            Ok(exit::OK)
        }
    }
}
