//! Secret values and references to them. A config file can name where a secret lives
//! (`env:NAME`, `keyring:service[/user]`, `file:/path`) instead of holding it; a literal is allowed
//! but never printed. Nothing here formats a secret's value: Debug, Display and Serialize all redact.

use super::error::ConfigError;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::path::{Path, PathBuf};

/// The keyring user a `keyring:SERVICE` reference without `/user` reads.
pub const DEFAULT_KEYRING_USER: &str = "default";
/// The keyring service `whilly config set --secret` stores under.
pub const KEYRING_SERVICE: &str = "whilly";

/// A resolved secret. Only [`SecretString::expose`] gives the value.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretString(String);

impl SecretString {
    pub fn new(value: impl Into<String>) -> Self {
        SecretString(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretString(***)")
    }
}

impl fmt::Display for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// A secret-capable setting: where to find the secret, or the secret itself.
#[derive(Clone, PartialEq, Eq)]
pub enum Secret {
    Env(String),
    Keyring { service: String, user: String },
    File(PathBuf),
    Literal(SecretString),
}

/// Alias under the name the design notes use.
pub type SecretRef = Secret;

impl Secret {
    /// Reads a setting's text. A malformed reference (`env:` with no name) is an error rather than
    /// a literal, because a typo there would otherwise send the reference text as the password.
    pub fn parse(text: &str) -> Result<Secret, String> {
        if let Some(name) = text.strip_prefix("env:") {
            let valid =
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(format!(
                    "`{text}` is not a valid env: reference; write env:VARIABLE_NAME"
                ));
            }
            return Ok(Secret::Env(name.to_string()));
        }
        if let Some(rest) = text.strip_prefix("keyring:") {
            let (service, user) = match rest.split_once('/') {
                Some((s, u)) => (s, u),
                None => (rest, DEFAULT_KEYRING_USER),
            };
            if service.is_empty() || user.is_empty() {
                return Err(format!(
                    "`{text}` is not a valid keyring: reference; write keyring:SERVICE or keyring:SERVICE/USER"
                ));
            }
            return Ok(Secret::Keyring {
                service: service.to_string(),
                user: user.to_string(),
            });
        }
        if let Some(path) = text.strip_prefix("file:") {
            if path.is_empty() {
                return Err(format!(
                    "`{text}` is not a valid file: reference; write file:/path/to/secret"
                ));
            }
            return Ok(Secret::File(PathBuf::from(path)));
        }
        Ok(Secret::Literal(SecretString::new(text)))
    }

    /// True when the value is written in the config itself rather than referenced.
    pub fn is_literal(&self) -> bool {
        matches!(self, Secret::Literal(_))
    }

    /// Resolves against the process environment and the OS keyring.
    pub fn resolve(&self) -> Result<SecretString, ConfigError> {
        self.resolve_with(&|name| std::env::var(name).ok())
    }

    /// Resolves with `env` standing in for the process environment (used for `env:` and for `~`
    /// in `file:` paths).
    pub fn resolve_with(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<SecretString, ConfigError> {
        match self {
            Secret::Literal(value) => Ok(value.clone()),
            Secret::Env(name) => match env(name) {
                Some(v) if !v.is_empty() => Ok(SecretString::new(v)),
                _ => Err(ConfigError::Secret(format!(
                    "environment variable {name} (referenced as env:{name}) is not set or is empty"
                ))),
            },
            Secret::File(path) => {
                let path = expand_home(path, env);
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    ConfigError::Secret(format!(
                        "cannot read secret file {} (file: reference): {e}",
                        path.display()
                    ))
                })?;
                let value = text.trim_end_matches(['\n', '\r']);
                if value.is_empty() {
                    return Err(ConfigError::Secret(format!(
                        "secret file {} is empty",
                        path.display()
                    )));
                }
                Ok(SecretString::new(value))
            }
            Secret::Keyring { service, user } => keyring_get(service, user),
        }
    }
}

fn expand_home(path: &Path, env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    match (path.strip_prefix("~"), env("HOME")) {
        (Ok(rest), Some(home)) => Path::new(&home).join(rest),
        _ => path.to_path_buf(),
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Secret::Env(name) => write!(f, "env:{name}"),
            Secret::Keyring { service, user } => write!(f, "keyring:{service}/{user}"),
            Secret::File(path) => write!(f, "file:{}", path.display()),
            Secret::Literal(value) => f.write_str(&redact_literal(value.expose())),
        }
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({self})")
    }
}

/// A DSN keeps its shape with the password masked (so `show` still tells which server);
/// any other literal is masked entirely.
fn redact_literal(value: &str) -> String {
    if value.contains("://") {
        redact(value)
    } else {
        "***".to_string()
    }
}

/// Masks the password of a URL/DSN: `postgres://user:***@host/db`.
pub fn redact(url: &str) -> String {
    crate::store::redact_url(url)
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Secret, D::Error> {
        let text = String::deserialize(d)?;
        Secret::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Runs `op` on the keyring entry for `service`/`user`.
#[cfg(target_os = "linux")]
fn with_entry<T>(
    service: &str,
    user: &str,
    op: impl Fn(&keyring::Entry) -> keyring::Result<T>,
) -> Result<T, ConfigError> {
    use keyring::keyutils::KeyutilsCredential;
    ensure_session_keyring();
    let cred = KeyutilsCredential::new_with_target(None, service, user)
        .map_err(|e| keyring_error(e, service, user))?;
    let with_persistent = cred.persistent.is_some();
    match op(&keyring::Entry::new_with_credential(Box::new(cred.clone()))) {
        // keyutils reports "access denied" as NoEntry. Some hosts and containers have a persistent
        // keyring this user may not link into, which fails every call although the session keyring
        // works; fall back to the session keyring alone there.
        Err(keyring::Error::NoEntry) if with_persistent => {
            let session_only = KeyutilsCredential {
                persistent: None,
                ..cred
            };
            op(&keyring::Entry::new_with_credential(Box::new(session_only)))
                .map_err(|e| keyring_error(e, service, user))
        }
        other => other.map_err(|e| keyring_error(e, service, user)),
    }
}

/// keyring-rs stores into the session keyring without creating one. A process started without a
/// session keyring (a service, a container, some SSH setups) then falls back to the user-session
/// keyring, where keys can be added but not read back ("access denied", reported as NoEntry).
/// Asking for the session keyring with create=1 gives this thread one; it is linked to the
/// persistent keyring by keyring-rs, which is what later processes read through.
#[cfg(target_os = "linux")]
fn ensure_session_keyring() {
    const KEYCTL_GET_KEYRING_ID: libc::c_long = 0;
    const KEY_SPEC_SESSION_KEYRING: libc::c_long = -3;
    // SAFETY: keyctl(GET_KEYRING_ID, id, create) takes integers only and touches no memory of ours.
    // Failure is fine: the keyring calls that follow report it.
    unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_GET_KEYRING_ID,
            KEY_SPEC_SESSION_KEYRING,
            1 as libc::c_long,
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn with_entry<T>(
    service: &str,
    user: &str,
    op: impl Fn(&keyring::Entry) -> keyring::Result<T>,
) -> Result<T, ConfigError> {
    let entry = keyring::Entry::new(service, user).map_err(|e| keyring_error(e, service, user))?;
    op(&entry).map_err(|e| keyring_error(e, service, user))
}

fn keyring_get(service: &str, user: &str) -> Result<SecretString, ConfigError> {
    with_entry(service, user, |e| e.get_password()).map(SecretString::new)
}

/// Stores `value` in the OS keyring (kernel keyutils on Linux).
pub fn keyring_set(service: &str, user: &str, value: &str) -> Result<(), ConfigError> {
    with_entry(service, user, |e| e.set_password(value))
}

/// Removes an entry; a missing entry is not an error.
pub fn keyring_delete(service: &str, user: &str) -> Result<(), ConfigError> {
    match with_entry(service, user, |e| e.delete_credential()) {
        Err(ConfigError::Secret(msg)) if msg.starts_with("no keyring entry") => Ok(()),
        other => other,
    }
}

/// Turns a keyring failure into an error that says what to do next.
pub(super) fn keyring_error(err: keyring::Error, service: &str, user: &str) -> ConfigError {
    match err {
        keyring::Error::PlatformFailure(why) | keyring::Error::NoStorageAccess(why) => {
            ConfigError::KeyringUnavailable {
                why: why.to_string(),
            }
        }
        keyring::Error::NoEntry => ConfigError::Secret(format!(
            "no keyring entry for service `{service}` user `{user}` (the kernel keyring forgets entries \
             on reboot); store it again with `whilly config set KEY VALUE --secret`, or use env: or file:"
        )),
        other => ConfigError::Secret(format!("keyring entry `{service}/{user}`: {other}")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_references_and_literals() {
        assert_eq!(
            Secret::parse("env:GH_TOKEN"),
            Ok(Secret::Env("GH_TOKEN".into()))
        );
        assert_eq!(
            Secret::parse("keyring:whilly/github.token"),
            Ok(Secret::Keyring {
                service: "whilly".into(),
                user: "github.token".into()
            })
        );
        assert_eq!(
            Secret::parse("keyring:gh"),
            Ok(Secret::Keyring {
                service: "gh".into(),
                user: DEFAULT_KEYRING_USER.into()
            })
        );
        assert_eq!(
            Secret::parse("file:/run/s"),
            Ok(Secret::File("/run/s".into()))
        );
        assert!(Secret::parse("hunter2").is_ok_and(|s| s.is_literal()));
        assert!(Secret::parse("env:").is_err());
        assert!(Secret::parse("env:A-B").is_err());
        assert!(Secret::parse("keyring:/u").is_err());
        assert!(Secret::parse("file:").is_err());
    }

    #[test]
    fn never_prints_a_literal() {
        let token = Secret::parse("ghp_supersecret").unwrap();
        assert_eq!(token.to_string(), "***");
        assert!(!format!("{token:?}").contains("supersecret"));
        let dsn = Secret::parse("postgres://me:pw123@db/whilly").unwrap();
        assert_eq!(dsn.to_string(), "postgres://me:***@db/whilly");
        let resolved = dsn.resolve_with(&|_| None).unwrap();
        assert_eq!(format!("{resolved} {resolved:?}"), "*** SecretString(***)");
        assert_eq!(resolved.expose(), "postgres://me:pw123@db/whilly");
    }

    #[test]
    fn env_reference_names_the_missing_variable() {
        let s = Secret::parse("env:NOPE_TOKEN").unwrap();
        let err = s.resolve_with(&|_| None).unwrap_err().to_string();
        assert!(err.contains("NOPE_TOKEN"), "{err}");
        let ok = s
            .resolve_with(&|n| (n == "NOPE_TOKEN").then(|| "v".to_string()))
            .unwrap();
        assert_eq!(ok.expose(), "v");
    }

    #[test]
    fn platform_failures_say_keyring_is_unavailable() {
        let err = keyring_error(
            keyring::Error::PlatformFailure("no keyctl".into()),
            "whilly",
            "x",
        );
        assert_eq!(
            err.to_string(),
            "keyring unavailable: no keyctl; use env: or file: instead"
        );
        let missing = keyring_error(keyring::Error::NoEntry, "whilly", "x").to_string();
        assert!(
            missing.contains("whilly") && missing.contains("--secret"),
            "{missing}"
        );
    }
}
