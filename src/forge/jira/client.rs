//! The Jira Cloud REST v3 client: basic auth (e-mail + API token), `POST /search/jql` with
//! `nextPageToken` pages and the fields named (Jira returns only ids otherwise), transitions
//! chosen by their target status (ids differ per workflow), ADF comments, and 429 answers
//! waited out by their `Retry-After` (up to `max_wait`).

use crate::config::SecretString;
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
    #[error("cannot reach Jira at {host}: {detail}")]
    Network { host: String, detail: String },
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
    /// 2 for what the environment must fix (credentials, the network), 1 for bad input.
    pub fn exit_code(&self) -> i32 {
        match self {
            JiraError::NotConfigured
            | JiraError::Unauthorized { .. }
            | JiraError::Network { .. }
            | JiraError::RateLimited { .. } => 2,
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
    ) -> Result<Jira, JiraError> {
        let base = url.trim_end_matches('/').to_string();
        let host = reqwest::Url::parse(&base)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            .ok_or_else(|| JiraError::BadAnswer {
                what: "[jira] url".into(),
                detail: format!("{url:?} is not a URL; write https://YOUR-SITE.atlassian.net"),
            })?;
        let http = crate::forge::http_client().map_err(|e| JiraError::Network {
            host: host.clone(),
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
            let resp = match req.send().await {
                Ok(r) => r,
                Err(e) if attempt < 3 => {
                    tracing::warn!(host = %self.host, "Jira unreachable ({e}); retrying");
                    tokio::time::sleep(Duration::from_secs(1 << attempt)).await;
                    continue;
                }
                Err(e) => {
                    return Err(JiraError::Network {
                        host: self.host.clone(),
                        detail: e.without_url().to_string(),
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
            let text = resp.text().await.map_err(|e| JiraError::Network {
                host: self.host.clone(),
                detail: e.without_url().to_string(),
            })?;
            let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
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
                    what: what.to_string(),
                    message: messages(&value).unwrap_or_else(|| text.chars().take(300).collect()),
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
            let issues = v["issues"].as_array().ok_or_else(|| JiraError::BadAnswer {
                what: "the search".into(),
                detail: "no issues array".into(),
            })?;
            out.extend(issues.iter().map(|i| self.issue_of(i)));
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
        let v = self
            .send(
                Method::GET,
                &format!("/issue/{key}?fields={fields}"),
                None,
                &format!("issue {key}"),
            )
            .await?;
        Ok(self.issue_of(&v))
    }

    fn issue_of(&self, v: &Value) -> JiraIssue {
        let f = &v["fields"];
        let key = v["key"].as_str().unwrap_or_default().to_string();
        JiraIssue {
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
        }
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
        Ok(v["transitions"]
            .as_array()
            .map(|ts| {
                ts.iter()
                    .map(|t| Transition {
                        id: t["id"].as_str().unwrap_or_default().to_string(),
                        name: t["name"].as_str().unwrap_or_default().to_string(),
                        to: t["to"]["name"].as_str().unwrap_or_default().to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default())
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
            let page = v["comments"].as_array().cloned().unwrap_or_default();
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
        Ok(v["id"].as_str().unwrap_or_default().to_string())
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
