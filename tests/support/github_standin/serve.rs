//! One request through the stand-in: read it, apply a scripted fault, check the User-Agent and
//! the token, route it, add ETag/304 and rate-limit headers, and record it.

use super::model::Model;
use super::wire::{self, Answer};
use super::{BadAnswer, Fault, Recorded, Shared, bad_answers, graphql, rest};
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// A request as the routes see it.
pub struct Incoming {
    pub method: String,
    /// As sent, without the query.
    pub path: String,
    /// `/repos/{owner}/{name}/...` even when sent as `/repositories/{id}/...`.
    pub route: String,
    pub raw_query: String,
    pub query: Vec<(String, String)>,
    pub headers: HeaderMap,
    /// `Ok(None)` when empty, `Err(())` when not JSON.
    pub body: Result<Option<Value>, ()>,
}

impl Incoming {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    fn graphql_query(&self) -> Option<&str> {
        self.body.as_ref().ok()?.as_ref()?["query"].as_str()
    }
}

const RECORDED_HEADERS: [&str; 6] = [
    "if-none-match",
    "if-modified-since",
    "user-agent",
    "accept",
    "x-github-api-version",
    "content-type",
];

pub async fn handle(shared: &Shared, req: axum::extract::Request) -> Response {
    let at = Instant::now();
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, 64 << 20)
        .await
        .unwrap_or_default();
    let body = if bytes.iter().all(u8::is_ascii_whitespace) {
        Ok(None)
    } else {
        serde_json::from_slice::<Value>(&bytes)
            .map(Some)
            .map_err(|_| ())
    };
    let path = parts.uri.path().to_string();
    let raw_query = parts.uri.query().unwrap_or_default().to_string();
    let mut inc = Incoming {
        method: parts.method.as_str().to_string(),
        route: path.clone(),
        path,
        query: wire::parse_query(&raw_query),
        raw_query,
        headers: parts.headers,
        body,
    };
    let fault = {
        let mut m = shared.lock();
        inc.route = canonical_route(&m, &inc.path);
        take_fault(&mut m, &inc)
    };
    match &fault {
        Some(Fault::Slow(d)) => tokio::time::sleep(*d).await,
        Some(Fault::Disconnect) => {
            record(&mut shared.lock(), &inc, at, 0, false, fault.clone());
            return disconnect();
        }
        Some(Fault::Bad(bad)) if *bad != BadAnswer::CutShort => {
            let status = match bad {
                BadAnswer::Html(status) => *status,
                BadAnswer::Hang => 0,
                _ => 200,
            };
            record(&mut shared.lock(), &inc, at, status, false, fault.clone());
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

/// `/repositories/{id}/rest` → `/repos/{owner}/{name}/rest`; anything else unchanged.
fn canonical_route(m: &Model, path: &str) -> String {
    let Some(rest) = path.strip_prefix("/repositories/") else {
        return path.to_string();
    };
    let (id, tail) = rest.split_once('/').map_or((rest, ""), |(a, b)| (a, b));
    match id.parse().ok().and_then(|id| m.repo_index_by_id(id)) {
        Some(ri) => {
            let full = m.repos[ri].full_name();
            if tail.is_empty() {
                format!("/repos/{full}")
            } else {
                format!("/repos/{full}/{tail}")
            }
        }
        None => path.to_string(),
    }
}

fn take_fault(m: &mut Model, inc: &Incoming) -> Option<Fault> {
    let slot = m.faults.iter_mut().find(|(matcher, _, times)| {
        *times > 0 && matcher.matches(&inc.method, &inc.path, &inc.route, inc.graphql_query())
    })?;
    slot.2 -= 1;
    let fault = slot.1.clone();
    m.faults.retain(|(_, _, times)| *times > 0);
    Some(fault)
}

fn record(
    m: &mut Model,
    inc: &Incoming,
    at: Instant,
    status: u16,
    counted: bool,
    fault: Option<Fault>,
) {
    let (auth_sent, token) = match inc.header("authorization") {
        Some(h) => (true, bearer(h).map(wire::fingerprint)),
        None => (false, None),
    };
    let authorized = inc
        .header("authorization")
        .and_then(bearer)
        .is_some_and(|t| m.check_token(t));
    let headers: BTreeMap<String, String> = RECORDED_HEADERS
        .iter()
        .filter_map(|h| inc.header(h).map(|v| (h.to_string(), v.to_string())))
        .collect();
    let mutation = match inc.method.as_str() {
        "GET" | "HEAD" | "OPTIONS" => false,
        _ if inc.route == "/graphql" => inc.graphql_query().is_some_and(graphql::is_mutation),
        _ => true,
    };
    m.requests.push(Recorded {
        method: inc.method.clone(),
        path: inc.path.clone(),
        route: inc.route.clone(),
        query: inc.raw_query.clone(),
        headers,
        auth_sent,
        authorized,
        token,
        body: inc.body.clone().ok().flatten(),
        status,
        counted,
        fault,
        mutation,
        at,
    });
}

/// The token of `Bearer T` or `token T` (schemes any case).
fn bearer(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    (scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("token"))
        .then(|| token.trim())
}

/// Status, headers and body text of the answer to `inc`; records it.
fn answer(
    m: &mut Model,
    inc: &Incoming,
    at: Instant,
    fault: Option<Fault>,
) -> (u16, Vec<(String, String)>, Option<String>) {
    let is_graphql = inc.route == "/graphql";
    m.core.roll();
    m.graphql.roll();
    let budget = if is_graphql { &m.graphql } else { &m.core };
    let mut rate_headers = budget.headers();
    let mut counted = false;
    let answer = if m.require_user_agent && inc.header("user-agent").is_none_or(str::is_empty) {
        wire::error(
            403,
            "Request forbidden by administrative rules. Please make sure your request has a User-Agent header (https://docs.github.com/rest/overview/resources-in-the-rest-api#user-agent-required).",
        )
    } else if let Some(a) = fault_answer(m, &fault, is_graphql, &mut rate_headers) {
        a
    } else if !inc
        .header("authorization")
        .and_then(bearer)
        .is_some_and(|t| m.check_token(t))
    {
        wire::bad_credentials()
    } else {
        // GitHub does not count `/rate_limit` (nor, below, a 304).
        counted = inc.route != "/rate_limit";
        if counted {
            if is_graphql {
                m.graphql.used += 1;
            } else {
                m.core.used += 1;
            }
        }
        let a = if is_graphql {
            match (&inc.method[..], &inc.body) {
                ("POST", Ok(body)) => graphql::answer(m, body.as_ref()),
                ("POST", Err(())) => wire::problems_parsing_json(),
                _ => wire::not_found(),
            }
        } else {
            rest::route(m, inc)
        };
        rate_headers = if is_graphql { &m.graphql } else { &m.core }.headers();
        a
    };
    let Answer {
        status,
        headers,
        body,
    } = answer;
    let mut status = status;
    let mut out = headers;
    out.extend(rate_headers);
    out.push((
        "x-github-request-id".into(),
        format!("STANDIN:{:04}", m.requests.len()),
    ));
    out.push((
        "x-github-media-type".into(),
        "github.v3; format=json".into(),
    ));
    out.push(("x-github-api-version-selected".into(), "2022-11-28".into()));
    let mut text = body.map(|b| b.to_string());
    if inc.method == "GET"
        && status == 200
        && !is_graphql
        && let Some(t) = &text
    {
        let tag = wire::etag(t);
        if inc
            .header("if-none-match")
            .is_some_and(|inm| wire::etag_matches(inm, &tag))
        {
            status = 304;
            text = None;
            if counted {
                m.core.used = m.core.used.saturating_sub(1);
                counted = false;
            }
            out.retain(|(k, _)| !k.starts_with("x-ratelimit-") && k != "link");
            out.extend(m.core.headers());
        }
        out.push(("etag".into(), tag));
        out.push((
            "cache-control".into(),
            "private, max-age=60, s-maxage=60".into(),
        ));
        out.push((
            "vary".into(),
            "Accept, Authorization, Cookie, X-GitHub-OTP".into(),
        ));
    }
    if text.is_some() {
        out.push((
            "content-type".into(),
            "application/json; charset=utf-8".into(),
        ));
    }
    record(m, inc, at, status, counted, fault);
    (status, out, text)
}

/// The answer a scripted fault gives instead of the real one (`None` for `Slow` and no fault).
fn fault_answer(
    m: &Model,
    fault: &Option<Fault>,
    is_graphql: bool,
    rate_headers: &mut Vec<(String, String)>,
) -> Option<Answer> {
    let budget = if is_graphql { &m.graphql } else { &m.core };
    Some(match fault.as_ref()? {
        Fault::Status(status, message) => wire::error(*status, message),
        Fault::Unauthorized => wire::bad_credentials(),
        Fault::PrimaryRateLimit { reset_in } => {
            let reset = wire::now_epoch() + secs_up(*reset_in);
            *rate_headers = budget.spent_headers(reset);
            wire::primary_rate_limited()
        }
        Fault::SecondaryRateLimit { retry_after } => {
            wire::secondary_rate_limited(403).header("retry-after", retry_after.to_string())
        }
        Fault::TooManyRequests { retry_after } => {
            wire::secondary_rate_limited(429).header("retry-after", retry_after.to_string())
        }
        Fault::GraphqlRateLimited => {
            *rate_headers = m.graphql.spent_headers(m.graphql.reset);
            Answer::ok(serde_json::json!({
                "errors": [{
                    "type": "RATE_LIMITED",
                    "code": "graphql_rate_limit",
                    "message": "API rate limit exceeded for user ID 1.",
                }],
            }))
        }
        Fault::Slow(_) | Fault::Disconnect | Fault::Bad(_) => return None,
    })
}

/// Whole seconds, rounded up, so a reset is never in the past.
fn secs_up(d: Duration) -> i64 {
    d.as_secs() as i64 + i64::from(d.subsec_nanos() > 0)
}
