//! One request through the stand-in: read it, apply a scripted fault, check Basic auth and the
//! content type, route it, add Jira's headers, and record it.

use super::model::Model;
use super::wire::{self, Answer};
use super::{BadAnswer, Fault, Recorded, Shared, bad_answers, rest};
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Instant;

/// A request as the routes see it.
pub struct Incoming {
    pub method: String,
    /// As sent, without the query.
    pub path: String,
    pub raw_query: String,
    pub query: Vec<(String, String)>,
    pub headers: HeaderMap,
    /// Whether any body bytes came.
    pub has_body: bool,
    /// `Ok(None)` when empty, `Err(())` when not JSON.
    pub body: Result<Option<Value>, ()>,
}

impl Incoming {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Searches are POSTs that change nothing.
    fn is_mutation(&self) -> bool {
        match self.method.as_str() {
            "GET" | "HEAD" | "OPTIONS" => false,
            _ => !self
                .path
                .trim_end_matches('/')
                .ends_with("/rest/api/3/search/jql"),
        }
    }
}

const RECORDED_HEADERS: [&str; 3] = ["user-agent", "accept", "content-type"];

pub async fn handle(shared: &Shared, req: axum::extract::Request) -> Response {
    let at = Instant::now();
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, 64 << 20)
        .await
        .unwrap_or_default();
    let has_body = !bytes.iter().all(u8::is_ascii_whitespace);
    let body = if has_body {
        serde_json::from_slice::<Value>(&bytes)
            .map(Some)
            .map_err(|_| ())
    } else {
        Ok(None)
    };
    let raw_query = parts.uri.query().unwrap_or_default().to_string();
    let inc = Incoming {
        method: parts.method.as_str().to_string(),
        path: parts.uri.path().to_string(),
        query: wire::parse_query(&raw_query),
        raw_query,
        headers: parts.headers,
        has_body,
        body,
    };
    let fault = take_fault(&mut shared.lock(), &inc);
    match &fault {
        Some(Fault::Slow(d)) => tokio::time::sleep(*d).await,
        Some(Fault::Disconnect) => {
            record(&mut shared.lock(), &inc, at, 0, fault.clone());
            return disconnect();
        }
        Some(Fault::Bad(bad)) if *bad != BadAnswer::CutShort => {
            let status = match bad {
                BadAnswer::Html(status) => *status,
                BadAnswer::Hang => 0,
                _ => 200,
            };
            record(&mut shared.lock(), &inc, at, status, fault.clone());
            return match bad {
                BadAnswer::Html(status) => bad_answers::html(*status),
                BadAnswer::WrongShape(v) => bad_answers::wrong_shape(v),
                BadAnswer::Huge(n) => bad_answers::huge(*n),
                _ => bad_answers::hang().await,
            };
        }
        _ => {}
    }
    let cut = fault == Some(Fault::Bad(BadAnswer::CutShort));
    let mut m = shared.lock();
    let (status, headers, text) = answer(&mut m, &inc, at, fault);
    drop(m);
    if cut {
        return bad_answers::cut_short(status, headers, text);
    }
    let mut resp = Response::new(text.map_or_else(Body::empty, Body::from));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    for (k, v) in headers {
        if let (Ok(k), Ok(v)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(&v),
        ) {
            resp.headers_mut().append(k, v);
        }
    }
    resp
}

/// A response whose body fails before its first byte: hyper then closes the connection
/// without having sent anything, which the client sees as a dropped connection.
fn disconnect() -> Response {
    let stream = futures::stream::once(async {
        Err::<Bytes, std::io::Error>(std::io::Error::other("scripted disconnect"))
    });
    Response::new(Body::from_stream(stream))
}

fn take_fault(m: &mut Model, inc: &Incoming) -> Option<Fault> {
    let slot = m
        .faults
        .iter_mut()
        .find(|(matcher, _, times)| *times > 0 && matcher.matches(&inc.method, &inc.path))?;
    slot.2 -= 1;
    let fault = slot.1.clone();
    m.faults.retain(|(_, _, times)| *times > 0);
    Some(fault)
}

fn credentials(inc: &Incoming) -> Option<(String, String)> {
    inc.header("authorization")
        .and_then(wire::basic_credentials)
}

fn record(m: &mut Model, inc: &Incoming, at: Instant, status: u16, fault: Option<Fault>) {
    let creds = credentials(inc);
    let headers: BTreeMap<String, String> = RECORDED_HEADERS
        .iter()
        .filter_map(|h| inc.header(h).map(|v| (h.to_string(), v.to_string())))
        .collect();
    m.requests.push(Recorded {
        method: inc.method.clone(),
        path: inc.path.clone(),
        query: inc.raw_query.clone(),
        headers,
        auth_sent: inc.header("authorization").is_some(),
        authorized: creds
            .as_ref()
            .is_some_and(|(u, t)| m.check_credentials(u, t)),
        user: creds.map(|(u, _)| u),
        body: inc.body.clone().ok().flatten(),
        status,
        fault,
        mutation: inc.is_mutation(),
        at,
    });
}

/// Status, headers and body text of the answer to `inc`; records it.
fn answer(
    m: &mut Model,
    inc: &Incoming,
    at: Instant,
    fault: Option<Fault>,
) -> (u16, Vec<(String, String)>, Option<String>) {
    let authorized = credentials(inc).is_some_and(|(u, t)| m.check_credentials(&u, &t));
    let json_sent = inc
        .header("content-type")
        .is_some_and(|c| c.to_ascii_lowercase().starts_with("application/json"));
    let answer = if let Some(a) = fault_answer(&fault) {
        a
    } else if !authorized {
        wire::unauthorized()
    } else if inc.has_body && matches!(inc.method.as_str(), "POST" | "PUT") && !json_sent {
        Answer::empty(415)
    } else {
        rest::route(m, inc)
    };
    let Answer {
        status,
        headers,
        body,
    } = answer;
    let mut out = headers;
    out.push((
        "x-arequestid".into(),
        format!("standin-{:06}", m.requests.len()),
    ));
    out.push(("x-aaccountid".into(), m.account_id.clone()));
    let text = body.map(|b| b.to_string());
    if text.is_some() {
        out.push((
            "content-type".into(),
            "application/json;charset=UTF-8".into(),
        ));
    }
    record(m, inc, at, status, fault);
    (status, out, text)
}

/// The answer a scripted fault gives instead of the real one (`None` for `Slow` and no fault).
fn fault_answer(fault: &Option<Fault>) -> Option<Answer> {
    Some(match fault.as_ref()? {
        Fault::Status(status, message) => wire::error(*status, &[message]),
        Fault::Unauthorized => wire::unauthorized(),
        Fault::TooManyRequests { retry_after } => wire::error(429, &["Rate limit exceeded."])
            .header("retry-after", retry_after.to_string())
            .header("x-ratelimit-limit", "350")
            .header("x-ratelimit-remaining", "0")
            .header("x-ratelimit-fillrate", "10")
            .header("x-ratelimit-interval-seconds", "1")
            .header("ratelimit-reason", "jira-burst-based"),
        Fault::Slow(_) | Fault::Disconnect | Fault::Bad(_) => return None,
    })
}
