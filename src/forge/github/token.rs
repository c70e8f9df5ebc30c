//! Which GitHub token to use, in a fixed order: `WHILLY_GITHUB_TOKEN` / `WHILLY_GH_TOKEN` → the
//! configured `[github] token` → the keyring (`whilly/github.token`) → `gh auth token` → an
//! ambient `GITHUB_TOKEN` / `GH_TOKEN`. An ambient token never shadows a configured one (the
//! original tool's bug: a CI's `GITHUB_TOKEN` silently won over the token the operator chose).
//! The chain is pure over a [`Probe`], so the order is tested without the real environment.

use crate::config::SecretString;
use serde::Serialize;
use std::fmt;
use std::time::Duration;

/// Where the token in use came from, for `config show` and for error messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
pub enum TokenSource {
    /// A `WHILLY_*` variable, named.
    WhillyEnv(String),
    /// `[github] token` of the configuration; the detail says which reference.
    Config(String),
    Keyring,
    GhCli,
    /// `GITHUB_TOKEN` or `GH_TOKEN`, named.
    Ambient(String),
}

impl fmt::Display for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenSource::WhillyEnv(v) | TokenSource::Ambient(v) => f.write_str(v),
            TokenSource::Config(what) => write!(f, "[github] token ({what})"),
            TokenSource::Keyring => f.write_str("the keyring (whilly/github.token)"),
            TokenSource::GhCli => f.write_str("`gh auth token`"),
        }
    }
}

/// The places a token may be.
pub(crate) trait Probe {
    fn env(&self, name: &str) -> Option<String>;
    fn keyring(&self) -> Option<String>;
    fn gh_cli(&self) -> Option<String>;
}

/// The configured `[github] token`, already resolved, with what it referred to.
pub(crate) struct Configured {
    pub token: SecretString,
    pub what: String,
}

/// The token to use and where it came from, or `None` when there is none anywhere.
pub(crate) fn resolve(
    probe: &dyn Probe,
    configured: Option<Configured>,
) -> Option<(SecretString, TokenSource)> {
    let present = |v: Option<String>| v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
    for var in ["WHILLY_GITHUB_TOKEN", "WHILLY_GH_TOKEN"] {
        if let Some(t) = present(probe.env(var)) {
            return Some((SecretString::new(t), TokenSource::WhillyEnv(var.into())));
        }
    }
    if let Some(c) = configured.filter(|c| !c.token.expose().trim().is_empty()) {
        return Some((c.token, TokenSource::Config(c.what)));
    }
    if let Some(t) = present(probe.keyring()) {
        return Some((SecretString::new(t), TokenSource::Keyring));
    }
    if let Some(t) = present(probe.gh_cli()) {
        return Some((SecretString::new(t), TokenSource::GhCli));
    }
    for var in ["GITHUB_TOKEN", "GH_TOKEN"] {
        if let Some(t) = present(probe.env(var)) {
            return Some((SecretString::new(t), TokenSource::Ambient(var.into())));
        }
    }
    None
}

/// This process's environment, the OS keyring, and the `gh` CLI when it is installed.
pub(crate) struct RealProbe;

impl Probe for RealProbe {
    fn env(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }

    fn keyring(&self) -> Option<String> {
        let entry = keyring::Entry::new(crate::config::KEYRING_SERVICE, "github.token").ok()?;
        entry.get_password().ok()
    }

    fn gh_cli(&self) -> Option<String> {
        let gh = crate::agent::binary::resolve_binary("gh", "").ok()?;
        let mut child = std::process::Command::new(gh)
            .args(["auth", "token"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .ok()?;
        // `gh` may try the network or a keychain prompt: give it a few seconds, no more.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => break,
                Ok(Some(_)) | Err(_) => return None,
                Ok(None) if std::time::Instant::now() > deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return None;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
        let mut out = String::new();
        std::io::Read::read_to_string(child.stdout.as_mut()?, &mut out).ok()?;
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[derive(Default)]
    struct Fake {
        env: HashMap<&'static str, &'static str>,
        keyring: Option<&'static str>,
        gh: Option<&'static str>,
    }

    impl Probe for Fake {
        fn env(&self, name: &str) -> Option<String> {
            self.env.get(name).map(|s| s.to_string())
        }
        fn keyring(&self) -> Option<String> {
            self.keyring.map(str::to_string)
        }
        fn gh_cli(&self) -> Option<String> {
            self.gh.map(str::to_string)
        }
    }

    fn configured(t: &str) -> Option<Configured> {
        Some(Configured {
            token: SecretString::new(t),
            what: "keyring:whilly/github.token".into(),
        })
    }

    fn source(p: &Fake, c: Option<Configured>) -> Option<(String, TokenSource)> {
        resolve(p, c).map(|(t, s)| (t.expose().to_string(), s))
    }

    #[test]
    fn the_chain_runs_in_order() {
        let mut p = Fake {
            env: HashMap::from([("WHILLY_GH_TOKEN", "w2"), ("GITHUB_TOKEN", "ambient")]),
            keyring: Some("k"),
            gh: Some("g\n"),
        };
        assert_eq!(
            source(&p, configured("c")),
            Some((
                "w2".into(),
                TokenSource::WhillyEnv("WHILLY_GH_TOKEN".into())
            ))
        );
        p.env.insert("WHILLY_GITHUB_TOKEN", "w1");
        assert_eq!(source(&p, None).unwrap().0, "w1");
        p.env.retain(|k, _| !k.starts_with("WHILLY"));
        assert!(
            matches!(source(&p, configured("c")), Some((t, TokenSource::Config(_))) if t == "c")
        );
        assert_eq!(source(&p, None), Some(("k".into(), TokenSource::Keyring)));
        p.keyring = None;
        assert_eq!(source(&p, None), Some(("g".into(), TokenSource::GhCli)));
        p.gh = None;
        assert_eq!(
            source(&p, None),
            Some((
                "ambient".into(),
                TokenSource::Ambient("GITHUB_TOKEN".into())
            ))
        );
        p.env.clear();
        assert_eq!(source(&p, None), None);
    }

    #[test]
    fn an_ambient_token_never_shadows_a_configured_one() {
        let p = Fake {
            env: HashMap::from([("GITHUB_TOKEN", "ci"), ("GH_TOKEN", "ci2")]),
            ..Fake::default()
        };
        assert_eq!(source(&p, configured("mine")).unwrap().0, "mine");
        // Blank values count as absent.
        let blank = Fake {
            env: HashMap::from([("WHILLY_GITHUB_TOKEN", "  ")]),
            ..Fake::default()
        };
        assert_eq!(source(&blank, configured("mine")).unwrap().0, "mine");
    }
}
