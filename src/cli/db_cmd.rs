//! `whilly db migrate|status`.

use super::args::DbCommand;
use super::context::Context;
use super::exit;

pub(crate) async fn run(ctx: &Context, cmd: DbCommand) -> anyhow::Result<i32> {
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
                    "migrations: {}",
                    migrations_text(&info.applied_migrations, &info.pending_migrations)
                );
                let plans = store.list_plans().await?;
                outln!("plans:      {}", plans.len());
            }
        }
    }
    store.close().await;
    Ok(exit::OK)
}

/// `3 applied (latest 3), none pending` rather than the lists' debug form (`[1, 2, 3]`, `[]`):
/// what was applied is known by its newest version, what is pending by each one.
fn migrations_text(applied: &[i64], pending: &[i64]) -> String {
    let applied = match applied.last() {
        None => "none applied".to_string(),
        Some(last) => format!("{} applied (latest {last})", applied.len()),
    };
    let pending = match pending {
        [] => "none pending".to_string(),
        v => format!(
            "{} pending ({})",
            v.len(),
            v.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
        ),
    };
    format!("{applied}, {pending}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_read_as_counts_not_debug_lists() {
        assert_eq!(
            migrations_text(&[1, 2, 3], &[]),
            "3 applied (latest 3), none pending"
        );
        assert_eq!(
            migrations_text(&[1], &[2, 3]),
            "1 applied (latest 1), 2 pending (2, 3)"
        );
        assert_eq!(migrations_text(&[], &[]), "none applied, none pending");
    }
}
