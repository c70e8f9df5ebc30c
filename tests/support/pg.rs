//! A throwaway Postgres database per test: `fresh_database().await` creates `whilly_t_<hex>` on the
//! local server (or `WHILLY_TEST_PG_URL`), and dropping the handle drops the database.

#![allow(dead_code)]

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgConnection};
use std::str::FromStr;
use std::time::Duration;

#[path = "pg_private.rs"]
mod private;

/// The server the tests use when `WHILLY_TEST_PG_URL` is not set (trust auth, user postgres).
pub const DEFAULT_BASE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// The server URL the tests connect to for administration (creating/dropping databases).
/// With neither a URL nor a server on the default port, a private server of this test binary
/// (`pg_private`): the test command passes on a fresh machine by itself.
pub fn base_url() -> String {
    if let Ok(url) = std::env::var("WHILLY_TEST_PG_URL") {
        return url;
    }
    if std::env::var_os("WHILLY_TEST_PG_PRIVATE").is_some() || !private::default_answers() {
        return private::url();
    }
    DEFAULT_BASE_URL.to_string()
}

/// A database that exists for the lifetime of this value.
pub struct FreshDb {
    name: String,
    url: String,
    admin_url: String,
}

impl FreshDb {
    /// The URL of the fresh database (same server, user and password as the base URL).
    pub fn url(&self) -> String {
        self.url.clone()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The URL of the server's maintenance database, for admin statements such as
    /// `pg_terminate_backend` that must not run on the connections under test.
    pub fn admin_url(&self) -> String {
        self.admin_url.clone()
    }
}

fn db_url(base: &str, db: &str) -> String {
    // Replace the path component (if any) of the URL by `/db`, keeping the query string.
    let (head, query) = match base.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (base, None),
    };
    let after_scheme = head.find("://").map(|i| i + 3).unwrap_or(0);
    let root = match head[after_scheme..].find('/') {
        Some(i) => &head[..after_scheme + i],
        None => head,
    };
    match query {
        Some(q) => format!("{root}/{db}?{q}"),
        None => format!("{root}/{db}"),
    }
}

fn random_hex() -> String {
    use rand::Rng;
    let bytes: [u8; 8] = rand::rng().random();
    hex::encode(bytes)
}

fn loud_unreachable(base: &str, err: &dyn std::fmt::Display) -> ! {
    panic!(
        "\n\n==== Postgres is not reachable for the tests ====\n\
         base URL: {base}\n\
         error: {err}\n\
         Start the local server with:\n    \
         pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start\n\
         or point WHILLY_TEST_PG_URL at a server (trust auth, a user allowed to CREATE DATABASE).\n\
         ================================================\n"
    )
}

pub async fn admin_connection(base: &str) -> PgConnection {
    let opts = match PgConnectOptions::from_str(base) {
        Ok(o) => o,
        Err(e) => panic!("WHILLY_TEST_PG_URL / base URL {base:?} is not a valid Postgres URL: {e}"),
    };
    match tokio::time::timeout(Duration::from_secs(5), opts.connect()).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => loud_unreachable(base, &e),
        Err(_) => loud_unreachable(base, &"connect timed out after 5 s"),
    }
}

/// Creates a new empty database on the test server and returns its handle.
pub async fn fresh_database() -> FreshDb {
    let base = base_url();
    let admin_url = db_url(&base, "postgres");
    let mut conn = admin_connection(&admin_url).await;
    let name = format!("whilly_t_{}", random_hex());
    let sql = format!("CREATE DATABASE {name}");
    if let Err(e) = sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(&mut conn)
        .await
    {
        panic!("could not create test database {name}: {e}");
    }
    let _ = conn.close().await;
    FreshDb {
        url: db_url(&base, &name),
        name,
        admin_url,
    }
}

/// Terminates every other backend connected to `db_name` (connection chaos in tests).
pub async fn terminate_backends(admin_url: &str, db_name: &str) -> u64 {
    let pool = match PgPoolOptions::new()
        .max_connections(1)
        .connect(admin_url)
        .await
    {
        Ok(p) => p,
        Err(e) => loud_unreachable(admin_url, &e),
    };
    let n: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = $1 AND pid <> pg_backend_pid()) t",
    )
    .bind(db_name)
    .fetch_one(&pool)
    .await
    .unwrap_or(0);
    pool.close().await;
    n as u64
}

impl Drop for FreshDb {
    fn drop(&mut self) {
        let admin_url = self.admin_url.clone();
        let name = self.name.clone();
        // Drop may run inside a runtime (cannot block on it), so use a thread with its own.
        let handle = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                let Ok(opts) = PgConnectOptions::from_str(&admin_url) else {
                    return;
                };
                let Ok(Ok(mut conn)) =
                    tokio::time::timeout(Duration::from_secs(5), opts.connect()).await
                else {
                    return;
                };
                let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                let _ = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .execute(&mut conn)
                    .await;
                let _ = conn.close().await;
            });
        });
        let _ = handle.join();
    }
}

#[cfg(test)]
mod tests {
    use super::db_url;

    #[test]
    fn db_url_replaces_path() {
        assert_eq!(
            db_url("postgres://u@h:1/postgres", "x"),
            "postgres://u@h:1/x"
        );
        assert_eq!(db_url("postgres://u@h:1", "x"), "postgres://u@h:1/x");
        assert_eq!(
            db_url("postgres://u:p@h/db?sslmode=disable", "x"),
            "postgres://u:p@h/x?sslmode=disable"
        );
    }
}
