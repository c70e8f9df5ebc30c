//! Jira as a source (`jira:"JQL"` / `jira:ABC-123`): the issues as the tasks of one plan (the
//! same source, the same plan), merged idempotently on every re-run: tasks keep their status,
//! changed issues update their pending tasks, and issues done (or gone) upstream turn their
//! pending tasks SKIPPED (`closed_upstream`).

use super::{Fetched, IntakeEnv, IntakeError, IntakeOptions, Note, Source, stored_tasks};
use crate::domain::PlanSpec;
use crate::engine::configure;
use crate::forge::intake::CLOSED_UPSTREAM;
use crate::forge::jira::intake::{JiraSource, source_of, to_task};
use crate::forge::jira::{JiraError, JiraIssue};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

/// A Jira search or one issue.
pub(crate) struct Jira(pub JiraSource);

impl Jira {
    pub(crate) fn parse(text: &str) -> Result<Jira, IntakeError> {
        text.parse()
            .map(Jira)
            .map_err(|e: crate::forge::jira::intake::JiraIntakeError| {
                IntakeError::Input(e.to_string())
            })
    }
}

#[async_trait::async_trait]
impl Source for Jira {
    fn describe(&self) -> String {
        self.0.to_string()
    }

    async fn fetch(
        &self,
        env: &IntakeEnv<'_>,
        _opts: &IntakeOptions,
    ) -> Result<Fetched, IntakeError> {
        let source = &self.0;
        let cfg = env.config()?;
        let Some(jira) = configure::jira_client(cfg)? else {
            return Err(JiraError::NotConfigured.into());
        };
        let extra: Vec<String> = cfg.jira.acceptance_field.iter().cloned().collect();
        let found: Vec<JiraIssue> = jira
            .search(&source.jql(), cfg.jira.page_size, &extra)
            .await?;
        if let JiraSource::Key(k) = source
            && found.is_empty()
        {
            return Err(JiraError::NotFound {
                what: format!("issue {k}"),
                user: cfg.jira.user.clone().unwrap_or_default(),
            }
            .into());
        }
        let plan_id = source.plan_id();
        let stored = stored_tasks(self, env.store, &plan_id).await?;
        let mut tasks = Vec::new();
        let mut skip: BTreeMap<String, String> = BTreeMap::new();
        let mut refused = Vec::new();
        let mut seen = BTreeSet::new();
        for issue in &found {
            seen.insert(issue.key.clone());
            match to_task(issue, cfg.jira.acceptance_field.as_deref()) {
                Ok(t) => {
                    if issue.is_done() {
                        skip.insert(t.id.clone(), CLOSED_UPSTREAM.to_string());
                    }
                    tasks.push(t);
                }
                Err(e) => refused.push(e.to_string()),
            }
        }
        // Tasks of earlier imports the search no longer finds: done upstream (or deleted) →
        // their pending tasks are skipped; otherwise they stay as they are.
        for mut t in stored {
            let Some((key, _)) = source_of(&t) else {
                continue;
            };
            if seen.contains(&key) {
                continue;
            }
            let upstream = match jira.issue(&key, &extra).await {
                Ok(i) if !i.is_done() => None,
                Ok(i) => Some(i.status),
                Err(JiraError::NotFound { .. }) => Some("deleted".to_string()),
                Err(e) => return Err(e.into()),
            };
            if let Some(status) = upstream {
                // The source records where the issue went, so the task counts as changed and
                // the import applies the skip (unchanged tasks are left alone).
                if let Some(serde_json::Value::Object(src)) = t.extra.get_mut("source") {
                    src.insert("status".into(), json!(status));
                }
                skip.insert(t.id.clone(), CLOSED_UPSTREAM.to_string());
            }
            tasks.push(t);
        }
        for r in &refused {
            (env.notes)(Note::Refused(r.clone()));
        }
        let mut spec = PlanSpec {
            id: plan_id,
            project: cfg.jira.url.clone().unwrap_or_default(),
            tasks,
            ..PlanSpec::default()
        };
        spec.extra.insert(
            "source".into(),
            json!({"type": "jira", "query": source.jql()}),
        );
        Ok(Fetched {
            spec,
            skip,
            refused,
            origin: Some(format!(
                "from Jira ({} issue{} for {})",
                found.len(),
                if found.len() == 1 { "" } else { "s" },
                source.jql()
            )),
        })
    }
}
