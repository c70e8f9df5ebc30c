//! The credentials a push or a fetch offers a remote: a token over HTTPS, the SSH agent's keys.
//! Shared by the push, the compare-and-swap of a remote ref and the shared-base delivery.

use git2::{Cred, CredentialType, RemoteCallbacks};

/// What a push needs besides the branch.
#[derive(Clone, Default)]
pub struct PushAuth {
    /// A token for HTTPS remotes (sent as the password of `x-access-token`, as GitHub wants).
    pub token: Option<String>,
}

impl std::fmt::Debug for PushAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushAuth")
            .field("token", &self.token.as_ref().map(|_| "***"))
            .finish()
    }
}

pub(super) fn callbacks<'a>(auth: &'a PushAuth, url: &'a str) -> RemoteCallbacks<'a> {
    let mut cb = RemoteCallbacks::new();
    let mut tried = 0u32;
    cb.credentials(move |_url, username, allowed| {
        // libgit2 asks again after a refusal; stop instead of looping.
        tried += 1;
        if tried > 3 {
            return Err(git2::Error::from_str(
                "the remote refused the credentials (a token over HTTPS, or the SSH agent's keys)",
            ));
        }
        if allowed.contains(CredentialType::SSH_KEY) {
            return Cred::ssh_key_from_agent(username.unwrap_or("git"));
        }
        if allowed.contains(CredentialType::USER_PASS_PLAINTEXT)
            && let Some(token) = &auth.token
        {
            return Cred::userpass_plaintext("x-access-token", token);
        }
        Err(git2::Error::from_str(&format!(
            "no credentials for {url}: set a GitHub token (WHILLY_GITHUB_TOKEN) for HTTPS, or load a key into the SSH agent"
        )))
    });
    cb
}
