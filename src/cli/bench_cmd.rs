//! `whilly bench …`: each benchmark measures its baseline in the same run and prints the ratio.

use super::args::BenchCommand;
use super::context::Context;
use super::exit;

pub async fn run(_ctx: &Context, cmd: BenchCommand) -> anyhow::Result<i32> {
    match cmd {
        BenchCommand::Pty(args) => {
            let report = crate::pty::bench::bench_drain(args.mb as u64).await?;
            println!("{report}");
            Ok(exit::OK)
        }
        BenchCommand::Queue(_) | BenchCommand::Engine(_) => {
            anyhow::bail!("this benchmark is being written; see docs/benchmarks.md")
        }
    }
}
