//! The token a request presents. Scripts send `Authorization: Bearer TOKEN`. A browser cannot
//! add a header to a page it opens (nor to an `EventSource`), so the token is also accepted as
//! the password of HTTP Basic (any user name): the browser asks for it once, on the 401's
//! `Basic` challenge, and then sends it with every request to the server, the page's stream
//! included. The token never travels in a URL, so it stays out of histories, `Referer`
//! headers and access logs.

use axum::http::{HeaderMap, header};
use base64::Engine;

/// The challenge that makes a browser ask for the token.
pub(super) const BASIC_CHALLENGE: &str = r#"Basic realm="whilly", charset="UTF-8""#;

/// The token in the request's `Authorization` header, Bearer or Basic; `None` without one.
pub(super) fn presented_token(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, rest) = value.split_once(' ')?;
    if scheme.eq_ignore_ascii_case("bearer") {
        return Some(rest.trim().to_string());
    }
    if scheme.eq_ignore_ascii_case("basic") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(rest.trim())
            .ok()?;
        let text = String::from_utf8(decoded).ok()?;
        let (_user, password) = text.split_once(':')?;
        return Some(password.to_string());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn with(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn bearer_and_basic_both_present_the_token() {
        assert_eq!(presented_token(&with("Bearer t0k")).as_deref(), Some("t0k"));
        assert_eq!(presented_token(&with("bearer t0k")).as_deref(), Some("t0k"));
        // "whilly:t:0k" — the password may hold colons; the user name is ignored.
        let b = base64::engine::general_purpose::STANDARD.encode("whilly:t:0k");
        assert_eq!(
            presented_token(&with(&format!("Basic {b}"))).as_deref(),
            Some("t:0k")
        );
        assert_eq!(presented_token(&with("Basic !!!")), None);
        assert_eq!(presented_token(&with("Digest x")), None);
        assert_eq!(presented_token(&HeaderMap::new()), None);
    }
}
