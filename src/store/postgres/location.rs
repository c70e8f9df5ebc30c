//! Where a Postgres store lives, said without secrets.

use sqlx::postgres::PgConnectOptions;

pub const HINT: &str = "is the server running and reachable? check [database] url / WHILLY_DATABASE_URL, \
     the host and port, and that the database exists and the user may log in \
     (local server: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start)";

/// `host:port/database`: never the password (connect options keep it, this never shows it).
pub fn location_of(opts: &PgConnectOptions) -> String {
    let db = opts.get_database().unwrap_or_else(|| opts.get_username());
    format!("{}:{}/{}", opts.get_host(), opts.get_port(), db)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn location_has_no_password() {
        let o =
            PgConnectOptions::from_str("postgres://alice:s3cret@db.example:6543/queue").unwrap();
        let loc = location_of(&o);
        assert_eq!(loc, "db.example:6543/queue");
        assert!(!loc.contains("s3cret"));
    }

    #[test]
    fn database_defaults_to_user() {
        let o = PgConnectOptions::from_str("postgres://bob@h").unwrap();
        assert_eq!(location_of(&o), "h:5432/bob");
    }
}
