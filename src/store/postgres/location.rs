//! Where a Postgres store lives, said without secrets, and what to check when it does not answer.

use sqlx::postgres::PgConnectOptions;

/// `host:port/database`: never the password (connect options keep it, this never shows it).
pub fn location_of(opts: &PgConnectOptions) -> String {
    let db = opts.get_database().unwrap_or_else(|| opts.get_username());
    format!("{}:{}/{}", opts.get_host(), opts.get_port(), db)
}

/// Why the first connection failed, in the words an operator acts on: a refused connection
/// names the address (nothing listens there), anything else is the driver's own message.
pub(super) fn connect_failure(host: &str, port: u16, err: &sqlx::Error) -> (String, bool) {
    if let sqlx::Error::Io(io) = err {
        match io.kind() {
            std::io::ErrorKind::ConnectionRefused => {
                return (format!("connection refused at {host}:{port}"), true);
            }
            std::io::ErrorKind::NotFound if host.starts_with('/') => {
                return (format!("no server socket in {host} (port {port})"), true);
            }
            _ => {}
        }
    }
    (err.to_string(), false)
}

/// What this machine offers to start a local server (facts about the platform, found once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LocalServer {
    /// Debian/Ubuntu clusters under /etc/postgresql.
    PgCtlCluster,
    /// A systemd host with a postgresql unit.
    Systemd,
    /// macOS with Homebrew.
    Homebrew,
    /// Nothing known: `pg_ctl` by hand.
    Unknown,
}

impl LocalServer {
    pub(super) fn detect() -> LocalServer {
        if cfg!(target_os = "macos") {
            return LocalServer::Homebrew;
        }
        if std::path::Path::new("/etc/postgresql").is_dir() {
            return LocalServer::PgCtlCluster;
        }
        if std::path::Path::new("/run/systemd/system").is_dir() {
            return LocalServer::Systemd;
        }
        LocalServer::Unknown
    }
}

/// What to check, fitted to the failure and the platform: a refused local address wants the
/// server started (how, on this machine); a refused remote one wants its address checked; any
/// other failure the URL, the database and the login.
pub(super) fn hint(host: &str, refused: bool, local: LocalServer) -> String {
    let is_local =
        host.starts_with('/') || matches!(host, "localhost" | "127.0.0.1" | "::1" | "[::1]");
    if refused && is_local {
        let start = match local {
            LocalServer::PgCtlCluster => {
                "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start"
            }
            LocalServer::Systemd => "sudo systemctl start postgresql",
            LocalServer::Homebrew => "brew services start postgresql",
            LocalServer::Unknown => "pg_ctl -D DATADIR -l logfile start",
        };
        return format!(
            "no Postgres server listens there; start the local one ({start}) or fix the port in \
             [database] url / WHILLY_DATABASE_URL"
        );
    }
    if refused {
        return format!(
            "nothing accepts connections at {host}; is the server up, listening on that address \
             (listen_addresses) and not behind a firewall? check [database] url / \
             WHILLY_DATABASE_URL"
        );
    }
    "is the server running and reachable? check [database] url / WHILLY_DATABASE_URL, the host \
     and port, and that the database exists and the user may log in"
        .to_string()
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

    #[test]
    fn a_refused_connection_names_the_address() {
        let err = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        let (detail, refused) = connect_failure("127.0.0.1", 5999, &err);
        assert_eq!(detail, "connection refused at 127.0.0.1:5999");
        assert!(refused);
        let other = sqlx::Error::Protocol("bad handshake".into());
        assert!(!connect_failure("h", 1, &other).1);
    }

    #[test]
    fn hints_fit_the_failure_and_the_platform() {
        let h = hint("127.0.0.1", true, LocalServer::PgCtlCluster);
        assert!(h.contains("pg_ctlcluster"), "{h}");
        let h = hint("localhost", true, LocalServer::Homebrew);
        assert!(h.contains("brew services start postgresql"), "{h}");
        assert!(!h.contains("pg_ctlcluster"), "{h}");
        let h = hint("db.example", true, LocalServer::PgCtlCluster);
        assert!(h.contains("db.example") && h.contains("firewall"), "{h}");
        assert!(!h.contains("pg_ctlcluster"), "{h}");
        let h = hint("127.0.0.1", false, LocalServer::Systemd);
        assert!(h.contains("the user may log in"), "{h}");
    }
}
