//! Credentials: the GitHub token the documented chain finds and the Jira credentials, each
//! tried with one cheap authenticated GET (`/user`, `/rest/api/3/myself`) against the
//! configured base URL; and whether the OS keyring can keep secrets at all.

use crate::config::{Config, Secret};
use crate::domain::doctor::Finding;
use crate::engine::configure;
use crate::forge::github::GitHubError;
use crate::forge::jira::JiraError;
use std::time::Duration;

/// How long one token check may take (a dead host must not hang doctor).
const CALL_LIMIT: Duration = Duration::from_secs(15);

/// What trying a token showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TokenCheck {
    /// No credentials anywhere; `needed` says whether the configuration uses the service.
    Absent { needed: bool },
    /// The configuration cannot be turned into a client (a secret that does not resolve, …).
    Misconfigured(String),
    /// The service accepted them: `who` is the account, `source` where the token came from.
    Accepted { source: String, who: String },
    /// The service refused them (401).
    Refused { source: String, error: String },
    /// No answer that says either way (network, rate limit, odd status).
    Unknown { source: String, error: String },
}

pub(crate) async fn github(cfg: &Config) -> TokenCheck {
    let needed = cfg.delivery.mode == Some(crate::config::DeliveryMode::Pr)
        || cfg.github.repo.is_some()
        || cfg.github.project.owner.is_some();
    let access = match configure::github_client(cfg) {
        Ok(Some(a)) => a,
        Ok(None) => return TokenCheck::Absent { needed },
        Err(e) => return TokenCheck::Misconfigured(e.to_string()),
    };
    let source = access.client.token_source().to_string();
    match tokio::time::timeout(CALL_LIMIT, access.client.viewer()).await {
        Ok(Ok(who)) => TokenCheck::Accepted { source, who },
        Ok(Err(e @ GitHubError::Unauthorized { .. })) => TokenCheck::Refused {
            source,
            error: e.to_string(),
        },
        Ok(Err(e)) => TokenCheck::Unknown {
            source,
            error: e.to_string(),
        },
        Err(_) => TokenCheck::Unknown {
            source,
            error: format!("GitHub did not answer within {} s", CALL_LIMIT.as_secs()),
        },
    }
}

pub(crate) async fn jira(cfg: &Config) -> TokenCheck {
    let client = match configure::jira_client(cfg) {
        Ok(Some(c)) => c,
        Ok(None) => return TokenCheck::Absent { needed: false },
        Err(e) => return TokenCheck::Misconfigured(e.to_string()),
    };
    let source = format!(
        "[jira] user {}",
        cfg.jira.user.as_deref().unwrap_or_default()
    );
    match tokio::time::timeout(CALL_LIMIT, client.myself()).await {
        Ok(Ok(who)) => TokenCheck::Accepted { source, who },
        Ok(Err(e @ JiraError::Unauthorized { .. })) => TokenCheck::Refused {
            source,
            error: e.to_string(),
        },
        Ok(Err(e)) => TokenCheck::Unknown {
            source,
            error: e.to_string(),
        },
        Err(_) => TokenCheck::Unknown {
            source,
            error: format!("Jira did not answer within {} s", CALL_LIMIT.as_secs()),
        },
    }
}

pub(crate) fn judge_github(c: &TokenCheck) -> Finding {
    const FIX: &str = "set a valid token: WHILLY_GITHUB_TOKEN, or `whilly config set github.token VALUE --secret` (the keyring), or `gh auth login`; `whilly config show github` says which source is used";
    match c {
        TokenCheck::Absent { needed: false } => {
            Finding::ok("tokens", "GitHub: no token (nothing configured needs one)")
        }
        TokenCheck::Absent { needed: true } => Finding::problem(
            "tokens",
            "GitHub: no token found, but [delivery] mode = \"pr\" or [github] repo/project is set",
            "pull requests, labels, comments and the board cannot be written",
            FIX,
        ),
        TokenCheck::Misconfigured(e) => Finding::problem(
            "tokens",
            format!("GitHub: {e}"),
            "every GitHub call fails before it is sent",
            FIX,
        ),
        TokenCheck::Accepted { source, who } => Finding::ok(
            "tokens",
            format!("GitHub: the token from {source} is accepted (user {who})"),
        ),
        TokenCheck::Refused { source, error } => Finding::problem(
            "tokens",
            format!("GitHub: the token from {source} is refused: {error}"),
            "imports, pull requests, labels and board moves fail",
            FIX,
        ),
        TokenCheck::Unknown { source, error } => Finding::warn(
            "tokens",
            format!("GitHub: could not check the token from {source}: {error}"),
            "doctor cannot tell whether GitHub accepts it",
            "check [github] api_url and the network, then run doctor again",
        ),
    }
}

pub(crate) fn judge_jira(c: &TokenCheck) -> Finding {
    const FIX: &str = "check [jira] url and user, and set the API token: `whilly config set jira.token VALUE --secret` or WHILLY_JIRA_TOKEN";
    match c {
        TokenCheck::Absent { .. } => Finding::ok("tokens", "Jira: not configured"),
        TokenCheck::Misconfigured(e) => Finding::problem(
            "tokens",
            format!("Jira: {e}"),
            "Jira imports and status sync fail",
            FIX,
        ),
        TokenCheck::Accepted { source, who } => Finding::ok(
            "tokens",
            format!("Jira: the credentials of {source} are accepted ({who})"),
        ),
        TokenCheck::Refused { source, error } => Finding::problem(
            "tokens",
            format!("Jira: the credentials of {source} are refused: {error}"),
            "Jira imports and status sync fail",
            FIX,
        ),
        TokenCheck::Unknown { source, error } => Finding::warn(
            "tokens",
            format!("Jira: could not check the credentials of {source}: {error}"),
            "doctor cannot tell whether Jira accepts them",
            "check [jira] url and the network, then run doctor again",
        ),
    }
}

pub(crate) struct KeyringFacts {
    /// A probe entry could be written, read back and removed.
    pub usable: Result<(), String>,
    /// Settings whose value is a `keyring:` reference.
    pub referenced_by: Vec<&'static str>,
}

/// Writes, reads and removes a probe entry (`whilly/doctor.probe`).
pub(crate) fn keyring_facts(cfg: &Config) -> KeyringFacts {
    let mut referenced_by = Vec::new();
    for (key, secret) in [
        ("database.url", &cfg.database.url),
        ("github.token", &cfg.github.token),
        ("jira.token", &cfg.jira.token),
        ("http.token", &cfg.http.token),
    ] {
        if matches!(secret, Some(Secret::Keyring { .. })) {
            referenced_by.push(key);
        }
    }
    KeyringFacts {
        usable: probe_keyring(),
        referenced_by,
    }
}

fn probe_keyring() -> Result<(), String> {
    use crate::config::{KEYRING_SERVICE, keyring_delete, keyring_set};
    let user = "doctor.probe";
    let value = format!("probe-{}", std::process::id());
    keyring_set(KEYRING_SERVICE, user, &value).map_err(|e| e.to_string())?;
    let back = Secret::Keyring {
        service: KEYRING_SERVICE.into(),
        user: user.into(),
    }
    .resolve()
    .map_err(|e| e.to_string());
    let removed = keyring_delete(KEYRING_SERVICE, user).map_err(|e| e.to_string());
    match back {
        Ok(v) if v.expose() == value => removed,
        Ok(_) => Err("the keyring gave back a different value than was stored".into()),
        Err(e) => Err(e),
    }
}

pub(crate) fn judge_keyring(f: &KeyringFacts) -> Finding {
    match (&f.usable, f.referenced_by.is_empty()) {
        (Ok(()), _) => Finding::ok("keyring", "the OS keyring stores and returns secrets"),
        (Err(e), true) => Finding::warn(
            "keyring",
            format!("the OS keyring is not usable: {e}"),
            "`whilly config set KEY VALUE --secret` cannot keep secrets there",
            "use env: or file: references for secrets on this machine",
        ),
        (Err(e), false) => Finding::problem(
            "keyring",
            format!(
                "the OS keyring is not usable ({e}), and {} refer to it",
                f.referenced_by.join(", ")
            ),
            "those settings cannot be read: the commands that need them fail",
            "use env: or file: references for them, or store them again where the keyring works",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::doctor::Severity;

    #[test]
    fn a_refused_token_is_a_problem_naming_its_source() {
        let f = judge_github(&TokenCheck::Refused {
            source: "WHILLY_GITHUB_TOKEN".into(),
            error: "401 Bad credentials".into(),
        });
        assert_eq!(f.severity, Severity::Problem);
        assert!(f.what.contains("from WHILLY_GITHUB_TOKEN is refused"));
        assert!(f.fix.contains("WHILLY_GITHUB_TOKEN"));
        let none = judge_github(&TokenCheck::Absent { needed: false });
        assert_eq!(none.severity, Severity::Ok);
        let needed = judge_github(&TokenCheck::Absent { needed: true });
        assert_eq!(needed.severity, Severity::Problem);
        let unknown = judge_jira(&TokenCheck::Unknown {
            source: "[jira] user a@b".into(),
            error: "cannot reach".into(),
        });
        assert_eq!(unknown.severity, Severity::Warn);
    }

    #[test]
    fn a_broken_keyring_matters_only_when_something_uses_it() {
        let broken = |referenced_by| KeyringFacts {
            usable: Err("no session keyring".into()),
            referenced_by,
        };
        assert_eq!(judge_keyring(&broken(vec![])).severity, Severity::Warn);
        let f = judge_keyring(&broken(vec!["github.token"]));
        assert_eq!(f.severity, Severity::Problem);
        assert!(f.what.contains("github.token refer to it"));
    }
}
