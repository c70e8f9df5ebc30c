//! The Jira Cloud REST v3 client: basic auth (e-mail + API token), `POST /search/jql` with
//! `nextPageToken` pages and the fields named (Jira returns only ids otherwise), transitions
//! chosen by their target status (ids differ per workflow), ADF comments, and 429 answers
//! waited out by their `Retry-After` (up to `max_wait`).

use crate::config::SecretString;
use crate::forge::answer::{self, Taken};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum JiraError {
    #[error(
        "no Jira access is configured: set [jira] url and user, and the token (WHILLY_JIRA_TOKEN, [jira] token, or `whilly config set jira.token VALUE --secret`)"
    )]
    NotConfigured,
    #[error("Jira refused the credentials of {user} (401): check [jira] user and the API token")]
    Unauthorized { user: String },
    #[error("{what} not found in Jira (or {user} cannot see it)")]
    NotFound { what: String, user: String },
    #[error("cannot reach Jira at {host} ({request}): {detail}")]
    Network {
        host: String,
        /// `POST /rest/api/3/search/jql`: the request that failed.
        request: String,
        detail: String,
    },
    #[error("Jira asks to wait {secs} s, longer than [jira] max_wait; try again later")]
    RateLimited { secs: u64 },
    #[error("Jira answered {status} to {what}: {message}")]
    Api {
        status: u16,
        what: String,
        message: String,
    },
    #[error("Jira's answer to {what} did not have the expected shape: {detail}")]
    BadAnswer { what: String, detail: String },
}

impl JiraError {
    /// 4 for what the environment must fix (credentials, the network), 1 for bad input.
    pub fn exit_code(&self) -> i32 {
        match self {
            JiraError::NotConfigured
            | JiraError::Unauthorized { .. }
            | JiraError::Network { .. }
            | JiraError::RateLimited { .. } => crate::domain::exit_codes::ENVIRONMENT,
            _ => 1,
        }
    }
}

/// An issue as read by a search or by key.
#[derive(Debug, Clone, PartialEq)]
pub struct JiraIssue {
    pub key: String,
    pub summary: String,
    /// The description, as ADF.
    pub description: Value,
    pub status: String,
    /// `new`, `indeterminate` or `done`.
    pub status_category: String,
    pub priority: Option<String>,
    pub labels: Vec<String>,
    /// Every field as answered (custom fields included).
    pub fields: Value,
    pub url: String,
}

impl JiraIssue {
    pub fn is_done(&self) -> bool {
        self.status_category == "done"
    }
}

/// A transition the workflow allows from the issue's status now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub id: String,
    pub name: String,
    pub to: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JiraComment {
    pub id: String,
    /// The body as text (see [`super::adf::to_text`]).
    pub text: String,
}

#[derive(Clone)]
pub struct Jira {
    http: reqwest::Client,
    base: String,
    host: String,
    user: String,
    token: SecretString,
    max_wait: Duration,
}

impl Jira {
    pub fn new(
        url: &str,
        user: &str,
        token: SecretString,
        max_wait: Duration,
        timeout: Duration,
    ) -> Result<Jira, JiraError> {
        let base = url.trim_end_matches('/').to_string();
        let host = reqwest::Url::parse(&base)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            .ok_or_else(|| JiraError::BadAnswer {
                what: "[jira] url".into(),
                detail: format!("{url:?} is not a URL; write https://YOUR-SITE.atlassian.net"),
            })?;
        let http = crate::forge::http_client(timeout).map_err(|e| JiraError::Network {
            host: host.clone(),
            request: "setting up the client".into(),
            detail: e.to_string(),
        })?;
        Ok(Jira {
            http,
            base,
            host,
            user: user.to_string(),
            token,
            max_wait,
        })
    }

    /// `what` with the request it came from, for an answer of the wrong shape.
    fn at(&self, what: &str, method: &str, path: &str) -> String {
        format!("{what} ({method} /rest/api/3{path} at {})", self.host)
    }

    /// The browse URL of an issue.
    pub fn browse_url(&self, key: &str) -> String {
        format!("{}/browse/{key}", self.base)
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        what: &str,
    ) -> Result<Value, JiraError> {
        let url = format!("{}/rest/api/3{path}", self.base);
        let request = format!("{method} /rest/api/3{path}");
        let at = |what: &str| format!("{what} ({request} at {})", self.host);
        // A read, or a search (a POST that changes nothing), repeats safely.
        let repeatable = method == Method::GET || path == "/search/jql";
        let mut waited = Duration::ZERO;
        for attempt in 0u32.. {
            let mut req = self
                .http
                .request(method.clone(), &url)
                .basic_auth(&self.user, Some(self.token.expose()))
                .header("Accept", "application/json");
            if let Some(b) = body {
                req = req.json(b);
            }
            let mut resp = match req.send().await {
                Ok(r) => r,
                Err(e) if attempt < 3 => {
                    tracing::warn!(host = %self.host, %request, "Jira unreachable ({}); retrying", answer::error_text(&e));
                    tokio::time::sleep(Duration::from_secs(1 << attempt)).await;
                    continue;
                }
                Err(e) => {
                    return Err(JiraError::Network {
                        host: self.host.clone(),
                        request,
                        detail: answer::error_text(&e),
                    });
                }
            };
            let status = resp.status();
            if status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE
            {
                let secs = resp
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .unwrap_or(1u64 << attempt.min(6));
                let wait = Duration::from_secs(secs.max(1));
                if waited + wait > self.max_wait || attempt >= 8 {
                    return Err(JiraError::RateLimited { secs });
                }
                tracing::warn!("Jira answered {status} to {what}: waiting {secs} s");
                tokio::time::sleep(wait).await;
                waited += wait;
                continue;
            }
            let (value, not_json, text) =
                match answer::take(&mut resp, repeatable && attempt < 3).await {
                    Taken::Answer {
                        value,
                        not_json,
                        raw,
                    } => (value, not_json, raw),
                    Taken::Retry(why) => {
                        tracing::warn!(host = %self.host, %request, "Jira: {why}; retrying");
                        tokio::time::sleep(Duration::from_secs(1 << attempt)).await;
                        continue;
                    }
                    Taken::BrokeOff(detail) => {
                        return Err(JiraError::Network {
                            host: self.host.clone(),
                            request,
                            detail,
                        });
                    }
                    Taken::Bad(detail) => {
                        return Err(JiraError::BadAnswer {
                            what: at(what),
                            detail,
                        });
                    }
                };
            if status.is_server_error() && repeatable && attempt < 3 {
                tracing::warn!(host = %self.host, %request, "Jira answered {status}; retrying");
                tokio::time::sleep(Duration::from_secs(1 << attempt)).await;
                continue;
            }
            return match status.as_u16() {
                200..=299 => Ok(value),
                401 => Err(JiraError::Unauthorized {
                    user: self.user.clone(),
                }),
                404 => Err(JiraError::NotFound {
                    what: what.to_string(),
                    user: self.user.clone(),
                }),
                code => Err(JiraError::Api {
                    status: code,
                    what: at(what),
                    message: not_json
                        .or_else(|| messages(&value))
                        .unwrap_or_else(|| answer::excerpt(&String::from_utf8_lossy(&text), 300)),
                }),
            };
        }
        Err(JiraError::RateLimited { secs: 0 })
    }

    /// Every issue the JQL finds, `page_size` a page, with `extra_fields` besides the usual.
    pub async fn search(
        &self,
        jql: &str,
        page_size: u32,
        extra_fields: &[String],
    ) -> Result<Vec<JiraIssue>, JiraError> {
        let mut fields: Vec<String> = ["summary", "description", "status", "priority", "labels"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        fields.extend(extra_fields.iter().cloned());
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut body = json!({
                "jql": jql,
                "fields": fields,
                "maxResults": page_size.clamp(1, 100),
            });
            if let Some(t) = &token {
                body["nextPageToken"] = json!(t);
            }
            let v = self
                .send(Method::POST, "/search/jql", Some(&body), "the search")
                .await?;
            let what = self.at("the search", "POST", "/search/jql");
            let issues = v["issues"].as_array().ok_or_else(|| JiraError::BadAnswer {
                what: what.clone(),
                detail: "no issues array".into(),
            })?;
            for i in issues {
                out.push(self.issue_of(i, &what)?);
            }
            token = v["nextPageToken"].as_str().map(str::to_string);
            if token.is_none() || v["isLast"].as_bool() == Some(true) {
                return Ok(out);
            }
        }
    }

    /// The account the credentials belong to (`GET /myself`): the cheapest call that proves
    /// Jira accepts them. Returns its display name (or e-mail).
    pub async fn myself(&self) -> Result<String, JiraError> {
        let v = self
            .send(Method::GET, "/myself", None, "the API token's account")
            .await?;
        Ok(v["displayName"]
            .as_str()
            .or(v["emailAddress"].as_str())
            .unwrap_or(&self.user)
            .to_string())
    }

    pub async fn issue(&self, key: &str, extra_fields: &[String]) -> Result<JiraIssue, JiraError> {
        let mut fields = "summary,description,status,priority,labels".to_string();
        for f in extra_fields {
            fields.push(',');
            fields.push_str(f);
        }
        let path = format!("/issue/{key}?fields={fields}");
        let v = self
            .send(Method::GET, &path, None, &format!("issue {key}"))
            .await?;
        self.issue_of(&v, &self.at(&format!("issue {key}"), "GET", &path))
    }

    /// An issue of an answer; one without a key, fields or a status is a wrong answer (an
    /// empty summary or status would be taken for the issue's own).
    fn issue_of(&self, v: &Value, what: &str) -> Result<JiraIssue, JiraError> {
        let f = &v["fields"];
        let bad = |detail: String| JiraError::BadAnswer {
            what: what.to_string(),
            detail,
        };
        let key = v["key"]
            .as_str()
            .filter(|k| !k.is_empty())
            .ok_or_else(|| bad("an issue without a key".into()))?
            .to_string();
        if !f.is_object() || !f["status"]["name"].is_string() {
            return Err(bad(format!("issue {key} has no fields.status.name")));
        }
        Ok(JiraIssue {
            url: self.browse_url(&key),
            key,
            summary: f["summary"].as_str().unwrap_or_default().to_string(),
            description: f["description"].clone(),
            status: f["status"]["name"].as_str().unwrap_or_default().to_string(),
            status_category: f["status"]["statusCategory"]["key"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            priority: f["priority"]["name"].as_str().map(str::to_string),
            labels: f["labels"]
                .as_array()
                .map(|l| {
                    l.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            fields: f.clone(),
        })
    }

    pub async fn transitions(&self, key: &str) -> Result<Vec<Transition>, JiraError> {
        let v = self
            .send(
                Method::GET,
                &format!("/issue/{key}/transitions"),
                None,
                &format!("issue {key}"),
            )
            .await?;
        let ts = v["transitions"]
            .as_array()
            .ok_or_else(|| JiraError::BadAnswer {
                what: self.at(
                    &format!("the transitions of {key}"),
                    "GET",
                    &format!("/issue/{key}/transitions"),
                ),
                detail: "no transitions list".into(),
            })?;
        Ok(ts
            .iter()
            .filter_map(|t| {
                Some(Transition {
                    id: t["id"].as_str()?.to_string(),
                    name: t["name"].as_str().unwrap_or_default().to_string(),
                    to: t["to"]["name"].as_str()?.to_string(),
                })
            })
            .collect())
    }

    pub async fn transition(&self, key: &str, id: &str) -> Result<(), JiraError> {
        self.send(
            Method::POST,
            &format!("/issue/{key}/transitions"),
            Some(&json!({"transition": {"id": id}})),
            &format!("the transition of {key}"),
        )
        .await
        .map(|_| ())
    }

    pub async fn comments(&self, key: &str) -> Result<Vec<JiraComment>, JiraError> {
        let mut out = Vec::new();
        let mut start = 0u64;
        loop {
            let v = self
                .send(
                    Method::GET,
                    &format!("/issue/{key}/comment?startAt={start}&maxResults=100"),
                    None,
                    &format!("issue {key}"),
                )
                .await?;
            // A page without its list would read as "no comments", and whilly would add its
            // status comment again.
            let page = v["comments"]
                .as_array()
                .cloned()
                .ok_or_else(|| JiraError::BadAnswer {
                    what: self.at(
                        &format!("the comments of {key}"),
                        "GET",
                        &format!("/issue/{key}/comment"),
                    ),
                    detail: "no comments list".into(),
                })?;
            let n = page.len() as u64;
            out.extend(page.iter().map(|c| JiraComment {
                id: c["id"].as_str().unwrap_or_default().to_string(),
                text: super::adf::to_text(&c["body"]),
            }));
            start += n;
            if n == 0 || start >= v["total"].as_u64().unwrap_or(0) {
                return Ok(out);
            }
        }
    }

    pub async fn add_comment(&self, key: &str, body: &Value) -> Result<String, JiraError> {
        let v = self
            .send(
                Method::POST,
                &format!("/issue/{key}/comment"),
                Some(&json!({ "body": body })),
                &format!("a comment on {key}"),
            )
            .await?;
        v["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| JiraError::BadAnswer {
                what: self.at(
                    &format!("the new comment on {key}"),
                    "POST",
                    &format!("/issue/{key}/comment"),
                ),
                detail: "no comment id".into(),
            })
    }

    pub async fn update_comment(&self, key: &str, id: &str, body: &Value) -> Result<(), JiraError> {
        self.send(
            Method::PUT,
            &format!("/issue/{key}/comment/{id}"),
            Some(&json!({ "body": body })),
            &format!("comment {id} on {key}"),
        )
        .await
        .map(|_| ())
    }
}

/// Jira's `errorMessages` and `errors`, joined.
fn messages(v: &Value) -> Option<String> {
    let mut out: Vec<String> = v["errorMessages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if let Some(errs) = v["errors"].as_object() {
        out.extend(
            errs.iter()
                .map(|(k, e)| format!("{k}: {}", e.as_str().unwrap_or_default())),
        );
    }
    (!out.is_empty()).then(|| out.join("; "))
}
