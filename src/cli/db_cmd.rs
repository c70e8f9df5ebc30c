//! `whilly db migrate|status`.

use super::args::DbCommand;
use super::context::Context;
use super::exit;

pub async fn run(ctx: &Context, cmd: DbCommand) -> anyhow::Result<i32> {
    // Opening a store applies pending migrations, so `migrate` is opening and reporting.
    let store = ctx.store().await?;
    let info = store.info();
    match cmd {
        DbCommand::Migrate => {
            outln!(
                "{} queue at {}: {} migrations applied, {} pending",
                info.backend,
                info.location,
                info.applied_migrations.len(),
                info.pending_migrations.len()
            );
        }
        DbCommand::Status { json } => {
            if json {
                outln!("{}", serde_json::to_string_pretty(&info)?);
            } else {
                outln!("backend:    {}", info.backend);
                outln!("location:   {}", info.location);
                outln!(
                    "migrations: {:?} applied, {:?} pending",
                    info.applied_migrations,
                    info.pending_migrations
                );
                let plans = store.list_plans().await?;
                outln!("plans:      {}", plans.len());
            }
        }
    }
    store.close().await;
    Ok(exit::OK)
}
