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
            println!(
                "{} queue at {}: {} migrations applied, {} pending",
                info.backend,
                info.location,
                info.applied_migrations.len(),
                info.pending_migrations.len()
            );
        }
        DbCommand::Status { json } => {
            if json {
                println!("{}", serde_json::to_string_pretty(&info)?);
            } else {
                println!("backend:    {}", info.backend);
                println!("location:   {}", info.location);
                println!(
                    "migrations: {:?} applied, {:?} pending",
                    info.applied_migrations, info.pending_migrations
                );
                let plans = store.list_plans().await?;
                println!("plans:      {}", plans.len());
            }
        }
    }
    store.close().await;
    Ok(exit::OK)
}
