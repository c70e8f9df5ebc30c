//! Answers a broken or hostile server gives, shared by the GitHub and Jira stand-ins' fault
//! scripts: a proxy's HTML error page, a 200 whose JSON has the wrong shape, a body of
//! hundreds of megabytes, an answer whose connection breaks half way, and no answer at all.

use axum::body::{Body, Bytes};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadAnswer {
    /// This status with an HTML page, as a load balancer in front of the API sends.
    Html(u16),
    /// 200 with this JSON, whatever was asked.
    WrongShape(Value),
    /// 200 with a JSON-looking body of this many bytes, streamed without a length.
    Huge(u64),
    /// The real answer, its connection broken after half its body.
    CutShort,
    /// Headers never come; the connection stays open until the client gives up.
    Hang,
}

/// An HTML error page with `status`.
pub fn html(status: u16) -> Response {
    let reason = StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Error");
    let page = format!(
        "<!DOCTYPE html>\n<html>\n<head><title>{status} {reason}</title></head>\n<body>\n<center><h1>{status} {reason}</h1></center>\n<hr><center>nginx</center>\n</body>\n</html>\n"
    );
    let mut resp = Response::new(Body::from(page));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    resp.headers_mut().insert(
        "content-type",
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    resp
}

/// 200 with `value`.
pub fn wrong_shape(value: &Value) -> Response {
    let mut resp = Response::new(Body::from(value.to_string()));
    resp.headers_mut().insert(
        "content-type",
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    resp
}

/// 200 with `bytes` bytes of an endless JSON list, made as they are sent.
pub fn huge(bytes: u64) -> Response {
    const CHUNK: usize = 64 << 10;
    let piece: Bytes = Bytes::from(
        "{\"id\":1,\"title\":\"x\"},"
            .repeat(CHUNK / 21 + 1)
            .into_bytes()
            .into_iter()
            .take(CHUNK)
            .collect::<Vec<u8>>(),
    );
    let head = Bytes::from_static(b"[");
    let chunks = bytes / CHUNK as u64;
    let stream = futures::stream::iter(
        std::iter::once(head)
            .chain((0..chunks).map(move |_| piece.clone()))
            .map(Ok::<Bytes, std::io::Error>),
    );
    let mut resp = Response::new(Body::from_stream(stream));
    resp.headers_mut().insert(
        "content-type",
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    resp
}

/// The answer `status`, `headers`, `text`, its body broken off after half (the connection
/// then closes without the rest, as a reset mid-body does).
pub fn cut_short(status: u16, headers: Vec<(String, String)>, text: Option<String>) -> Response {
    let text = text.unwrap_or_else(|| "{}".into()).into_bytes();
    let half = Bytes::from(text[..text.len() / 2].to_vec());
    let stream = futures::stream::iter([
        Ok(half),
        Err(std::io::Error::other("scripted reset mid-body")),
    ]);
    let mut resp = Response::new(Body::from_stream(stream));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    for (k, v) in headers {
        if k.eq_ignore_ascii_case("content-length") {
            continue;
        }
        if let (Ok(k), Ok(v)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(&v),
        ) {
            resp.headers_mut().append(k, v);
        }
    }
    resp
}

/// Never answers: waits until the client closes the connection (the server drops this
/// future then).
pub async fn hang() -> Response {
    std::future::pending::<()>().await;
    Response::new(Body::empty())
}

/// The host part of a stand-in's URL (`http://127.0.0.1:PORT` → `127.0.0.1`), as errors name it.
pub fn host_of(url: &str) -> String {
    url.trim_start_matches("http://")
        .split(':')
        .next()
        .unwrap_or_default()
        .to_string()
}

/// What one try of a command against a bad answer ended with.
pub struct Tried {
    pub code: Option<i32>,
    pub stderr: String,
}

/// For each `(bad, says)`: `arm` makes the stand-in answer `bad`, `run` runs whilly, `disarm`
/// takes the fault away; the command must fail clearly (exit 1, or 4 for the environment) within a minute, its error
/// naming `says`, the host and the request, and `nothing_made` must then hold.
pub fn each_fails_clearly(
    cases: &[(BadAnswer, &str)],
    host: &str,
    request: &str,
    mut arm: impl FnMut(&BadAnswer),
    mut disarm: impl FnMut(),
    mut run: impl FnMut() -> Tried,
    mut nothing_made: impl FnMut() -> Result<(), String>,
) {
    for (bad, says) in cases {
        arm(bad);
        let started = std::time::Instant::now();
        let out = run();
        let took = started.elapsed();
        disarm();
        assert!(
            matches!(out.code, Some(1 | 4)),
            "{bad:?}: a clear failure\n{}",
            out.stderr
        );
        for needle in [*says, host, request] {
            assert!(
                out.stderr.contains(needle),
                "{bad:?}: the error says {needle:?}:\n{}",
                out.stderr
            );
        }
        assert!(
            took < std::time::Duration::from_secs(60),
            "{bad:?} took {took:?}"
        );
        println!("{bad:?} ({took:.1?}): {}", out.stderr.trim());
        if let Err(made) = nothing_made() {
            panic!("{bad:?}: {made}");
        }
    }
}
