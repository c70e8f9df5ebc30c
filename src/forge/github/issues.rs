//! Issue-level operations on top of the client, in the shapes intake and `whilly forge` use.

use super::{GitHub, GitHubError, Issue};
use crate::forge::intake::UpstreamIssue;
use crate::forge::refs::RepoRef;

fn upstream(i: Issue, comments: Vec<String>) -> UpstreamIssue {
    UpstreamIssue {
        number: i.number,
        title: i.title,
        body: i.body,
        labels: i.labels,
        url: i.html_url,
        state: i.state,
        comments,
    }
}

impl GitHub {
    /// The open issues carrying `label`, every page.
    pub async fn open_issues_with_label(
        &self,
        repo: &RepoRef,
        label: &str,
    ) -> Result<Vec<UpstreamIssue>, GitHubError> {
        Ok(self
            .issues(repo, "open", Some(label))
            .await?
            .into_iter()
            .map(|i| upstream(i, Vec::new()))
            .collect())
    }

    /// One issue, with its comments' bodies when asked.
    pub async fn upstream_issue(
        &self,
        repo: &RepoRef,
        n: u64,
        with_comments: bool,
    ) -> Result<UpstreamIssue, GitHubError> {
        let issue = self.issue(repo, n).await?;
        let comments = if with_comments {
            self.comments(repo, n)
                .await?
                .into_iter()
                // Whilly's own status comments are not the issue's content.
                .filter(|c| !c.body.starts_with("<!-- whilly:"))
                .map(|c| c.body)
                .collect()
        } else {
            Vec::new()
        };
        Ok(upstream(issue, comments))
    }

    /// Writes the comment whose first line is `marker`: edits it when it exists (and differs),
    /// creates it otherwise. Returns its URL.
    pub async fn upsert_marked_comment(
        &self,
        repo: &RepoRef,
        n: u64,
        marker: &str,
        body: &str,
    ) -> Result<String, GitHubError> {
        let existing = self
            .comments(repo, n)
            .await?
            .into_iter()
            .find(|c| c.body.lines().next().map(str::trim) == Some(marker));
        match existing {
            Some(c) if c.body == body => Ok(c.html_url),
            Some(c) => Ok(self.update_comment(repo, c.id, body).await?.html_url),
            None => Ok(self.create_comment(repo, n, body).await?.html_url),
        }
    }
}
