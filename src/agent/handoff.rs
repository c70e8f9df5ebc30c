//! The handoff: a human (or another tool) does the task through files, no process involved
//! (the engine's handoff runner writes and waits on them).
//!
//! For task T, Whilly writes `<root>/<safe-id>/prompt.md` and `meta.json`; whoever does the work
//! writes `result.json` (by hand, or with `whilly handoff complete T --status …`). The directory
//! name comes from [`safe_id`], never from the raw id. When another plan's task with the same id
//! is already waiting there, the handoff goes to `<root>/<safe-id>@<safe-plan-id>` instead, and
//! the operator's commands find it by task id (and `--plan` when two plans wait on one id). Every write is atomic; a malformed
//! `result.json` is reported precisely and the task keeps waiting, so nothing is lost.

use crate::domain::{Action, Usd, safe_id};
use crate::fsutil::atomic_write;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Errors reading or writing the handoff directory.
#[derive(Debug, thiserror::Error)]
pub enum HandoffError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("no handoff is waiting for task {task_id:?} (looked for {path})")]
    NotWaiting { task_id: String, path: PathBuf },
    #[error("no handoff is waiting for task {task_id:?} of plan {plan_id:?} (looked in {root})")]
    NotWaitingInPlan {
        task_id: String,
        plan_id: String,
        root: PathBuf,
    },
    #[error(
        "task {task_id:?} is waiting for a human in {} plans ({}); say which with --plan",
        plans.len(),
        plans.join(", ")
    )]
    Ambiguous { task_id: String, plans: Vec<String> },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> HandoffError + '_ {
    move |source| HandoffError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// `meta.json`: what the human needs to know to do the task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandoffMeta {
    pub task_id: String,
    /// `plan` in the original's files.
    #[serde(alias = "plan")]
    pub plan_id: String,
    pub cwd: PathBuf,
    pub started_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<u64>,
    #[serde(default = "one")]
    pub attempt: u32,
    /// Why this handoff follows an answer of the same attempt: the answer was approved but a
    /// check then failed (which, how, the output's tail). Said to the human first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounced: Option<String>,
}

fn one() -> u32 {
    1
}

/// The answer a human gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HandoffStatus {
    Complete,
    Failed,
    Blocked,
    HumanLoop,
    Partial,
}

impl HandoffStatus {
    pub const ALL: [HandoffStatus; 5] = [
        HandoffStatus::Complete,
        HandoffStatus::Failed,
        HandoffStatus::Blocked,
        HandoffStatus::HumanLoop,
        HandoffStatus::Partial,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HandoffStatus::Complete => "complete",
            HandoffStatus::Failed => "failed",
            HandoffStatus::Blocked => "blocked",
            HandoffStatus::HumanLoop => "human_loop",
            HandoffStatus::Partial => "partial",
        }
    }

    /// What the engine does with the task: complete → DONE (still subject to verification),
    /// failed → FAILED, blocked → BLOCKED, human_loop → HUMAN_LOOP, partial → back to PENDING
    /// for another attempt (the message is kept on the event).
    pub fn action(self) -> Action {
        match self {
            HandoffStatus::Complete => Action::Complete,
            HandoffStatus::Failed => Action::Fail,
            HandoffStatus::Blocked => Action::Block,
            HandoffStatus::HumanLoop => Action::AwaitHuman,
            HandoffStatus::Partial => Action::Release,
        }
    }
}

impl fmt::Display for HandoffStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for HandoffStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let norm = s.trim().to_ascii_lowercase().replace('-', "_");
        HandoffStatus::ALL
            .into_iter()
            .find(|st| st.as_str() == norm)
            .ok_or_else(|| {
                format!("expected one of complete, failed, blocked, human_loop, partial; got {s:?}")
            })
    }
}

/// `result.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct HandoffResult {
    pub status: HandoffStatus,
    pub message: String,
    pub cost: Usd,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// The state of one handoff.
#[derive(Debug, Clone, PartialEq)]
pub enum HandoffPoll {
    /// No `result.json` yet.
    Waiting,
    /// `result.json` exists but is not valid: what is wrong, for the operator. The task keeps
    /// waiting; fixing the file is enough.
    Malformed(String),
    Result(HandoffResult),
}

/// One entry of [`HandoffDir::list`].
#[derive(Debug, Clone)]
pub struct HandoffEntry {
    pub dir: PathBuf,
    /// `meta.json`, or why it could not be read.
    pub meta: Result<HandoffMeta, String>,
    pub state: HandoffPoll,
}

/// The handoff directory (`.whilly/handoff`).
#[derive(Debug, Clone)]
pub struct HandoffDir {
    root: PathBuf,
}

pub const PROMPT_FILE: &str = "prompt.md";
pub const META_FILE: &str = "meta.json";
pub const RESULT_FILE: &str = "result.json";

impl HandoffDir {
    pub fn new(root: impl Into<PathBuf>) -> HandoffDir {
        HandoffDir { root: root.into() }
    }

    /// `<project>/.whilly/handoff`.
    pub fn in_project(project_root: &Path) -> HandoffDir {
        HandoffDir::new(project_root.join(".whilly").join("handoff"))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The usual directory of `task_id`: `<root>/<safe_id(task_id)>`.
    pub fn task_dir(&self, task_id: &str) -> PathBuf {
        self.root.join(safe_id(task_id))
    }

    /// The directory of a handoff whose usual one is held by another plan's task of the same id:
    /// `<root>/<safe_id(task_id)>@<safe_id(plan_id)>` (`@` never occurs in a safe id, so this
    /// cannot be another task's usual directory).
    pub fn plan_task_dir(&self, plan_id: &str, task_id: &str) -> PathBuf {
        self.root
            .join(format!("{}@{}", safe_id(task_id), safe_id(plan_id)))
    }

    /// Where the handoff of `task_id` in `plan_id` is, or goes: the usual directory unless it
    /// holds another plan's (or an unreadable) `meta.json`; then the plan-qualified one.
    pub fn dir_for(&self, plan_id: &str, task_id: &str) -> PathBuf {
        let usual = self.task_dir(task_id);
        let qualified = self.plan_task_dir(plan_id, task_id);
        let ours =
            |dir: &Path| read_meta_file(&dir.join(META_FILE)).is_ok_and(|m| m.plan_id == plan_id);
        if ours(&usual) {
            usual
        } else if qualified.join(META_FILE).exists() || usual.join(META_FILE).exists() {
            qualified
        } else {
            usual
        }
    }

    /// Hands a task over: writes `prompt.md` and `meta.json` in [`HandoffDir::dir_for`] its plan
    /// and id. A `result.json` left from an earlier attempt is kept as `result.attempt-<n>.json`
    /// so it is neither lost nor mistaken for the answer to this attempt.
    pub fn start(&self, meta: &HandoffMeta, prompt: &str) -> Result<PathBuf, HandoffError> {
        let mut dir = self.dir_for(&meta.plan_id, &meta.task_id);
        let usual = self.task_dir(&meta.task_id);
        if dir == usual && !usual.join(META_FILE).exists() {
            // Claimed by creating it: of two plans handing over the same id at the same moment,
            // one gets the usual directory and the other the plan-qualified one.
            std::fs::create_dir_all(&self.root).map_err(io_err(&self.root))?;
            match std::fs::create_dir(&usual) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    dir = self.plan_task_dir(&meta.plan_id, &meta.task_id);
                }
                Err(e) => return Err(io_err(&usual)(e)),
            }
        }
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        let result = dir.join(RESULT_FILE);
        if result.exists() {
            let previous = read_meta(&dir).map(|m| m.attempt).unwrap_or(0);
            let mut n = previous.max(1);
            let mut target = dir.join(format!("result.attempt-{n}.json"));
            while target.exists() {
                n = n.saturating_add(1);
                target = dir.join(format!("result.attempt-{n}.json"));
            }
            std::fs::rename(&result, &target).map_err(io_err(&result))?;
        }
        let prompt_path = dir.join(PROMPT_FILE);
        atomic_write(&prompt_path, prompt.as_bytes()).map_err(io_err(&prompt_path))?;
        let meta_path = dir.join(META_FILE);
        let json = serde_json::to_vec_pretty(meta).map_err(|e| HandoffError::Invalid {
            path: meta_path.clone(),
            message: e.to_string(),
        })?;
        atomic_write(&meta_path, &json).map_err(io_err(&meta_path))?;
        Ok(dir)
    }

    /// The directory of a waiting handoff of `task_id`, for the operator's commands: the one of
    /// `plan_id` when given; without it, the only one there is, or an error naming the plans to
    /// choose from.
    pub fn find(&self, task_id: &str, plan_id: Option<&str>) -> Result<PathBuf, HandoffError> {
        let mut matches: Vec<(String, PathBuf)> = self
            .list()?
            .into_iter()
            .filter_map(|e| match e.meta {
                Ok(m) if m.task_id == task_id && plan_id.is_none_or(|p| p == m.plan_id) => {
                    Some((m.plan_id, e.dir))
                }
                _ => None,
            })
            .collect();
        match (matches.len(), plan_id) {
            (1, _) => Ok(matches.remove(0).1),
            (0, Some(plan_id)) => Err(HandoffError::NotWaitingInPlan {
                task_id: task_id.to_string(),
                plan_id: plan_id.to_string(),
                root: self.root.clone(),
            }),
            (0, None) => {
                // An unreadable meta.json still marks a handoff: `show` reports what is wrong.
                let usual = self.task_dir(task_id);
                if usual.join(META_FILE).exists() {
                    Ok(usual)
                } else {
                    Err(HandoffError::NotWaiting {
                        task_id: task_id.to_string(),
                        path: usual.join(META_FILE),
                    })
                }
            }
            _ => Err(HandoffError::Ambiguous {
                task_id: task_id.to_string(),
                plans: matches.into_iter().map(|(p, _)| p).collect(),
            }),
        }
    }

    /// Whether the handoff of `task_id` in `plan_id` has an answer yet.
    pub fn poll(&self, plan_id: &str, task_id: &str) -> HandoffPoll {
        poll_dir(&self.dir_for(plan_id, task_id))
    }

    /// Every handoff under the root, sorted by start time then directory name. A missing root
    /// is an empty list.
    pub fn list(&self) -> Result<Vec<HandoffEntry>, HandoffError> {
        let read = match std::fs::read_dir(&self.root) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(HandoffError::Io {
                    path: self.root.clone(),
                    source: e,
                });
            }
        };
        let mut out = Vec::new();
        for entry in read {
            let entry = entry.map_err(io_err(&self.root))?;
            let dir = entry.path();
            if !dir.is_dir() || !dir.join(META_FILE).exists() {
                continue;
            }
            out.push(HandoffEntry {
                meta: read_meta(&dir).map_err(|e| e.to_string()),
                state: poll_dir(&dir),
                dir,
            });
        }
        out.sort_by(|a, b| {
            let key = |e: &HandoffEntry| e.meta.as_ref().ok().map(|m| m.started_at);
            key(a).cmp(&key(b)).then_with(|| a.dir.cmp(&b.dir))
        });
        Ok(out)
    }

    /// The handoffs of `plan_id` still waiting for their human (no result yet), oldest first.
    /// An unreadable root or `meta.json` hides nothing else.
    pub fn waiting(&self, plan_id: &str) -> Vec<HandoffMeta> {
        self.list()
            .unwrap_or_default()
            .into_iter()
            .filter(|e| !matches!(e.state, HandoffPoll::Result(_)))
            .filter_map(|e| e.meta.ok())
            .filter(|m| m.plan_id == plan_id)
            .collect()
    }

    /// Removes the handoff directory of `task_id` in `plan_id`: only one whose `meta.json` names
    /// that plan, never another plan's (not even one whose `meta.json` is still being written).
    pub fn remove(&self, plan_id: &str, task_id: &str) -> Result<(), HandoffError> {
        let dir = self.dir_for(plan_id, task_id);
        if read_meta(&dir).is_ok_and(|m| m.plan_id == plan_id) {
            remove_dir(&dir)?;
        }
        Ok(())
    }
}

/// `meta.json` of the handoff in `dir`.
pub fn read_meta(dir: &Path) -> Result<HandoffMeta, HandoffError> {
    read_meta_file(&dir.join(META_FILE))
}

/// The prompt handed over in `dir` (for `whilly handoff show`).
pub fn read_prompt(dir: &Path) -> Result<String, HandoffError> {
    let path = dir.join(PROMPT_FILE);
    std::fs::read_to_string(&path).map_err(io_err(&path))
}

/// Whether the handoff in `dir` has an answer yet.
pub fn poll_dir(dir: &Path) -> HandoffPoll {
    poll_file(&dir.join(RESULT_FILE))
}

/// Answers the waiting handoff in `dir` (what `whilly handoff complete ID --status …` does):
/// writes `result.json` atomically.
pub fn complete(
    dir: &Path,
    status: HandoffStatus,
    message: &str,
    cost: Option<Usd>,
) -> Result<PathBuf, HandoffError> {
    if !dir.join(META_FILE).exists() {
        return Err(HandoffError::NotWaiting {
            task_id: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            path: dir.join(META_FILE),
        });
    }
    let path = dir.join(RESULT_FILE);
    let body = serde_json::json!({
        "status": status.as_str(),
        "message": message,
        "usage": { "cost_usd": cost.unwrap_or(Usd::ZERO).as_f64(), "input_tokens": 0, "output_tokens": 0 },
    });
    let bytes = serde_json::to_vec_pretty(&body).map_err(|e| HandoffError::Invalid {
        path: path.clone(),
        message: e.to_string(),
    })?;
    atomic_write(&path, &bytes).map_err(io_err(&path))?;
    Ok(path)
}

/// Removes a handoff directory once its result has been applied; a missing one is fine.
pub fn remove_dir(dir: &Path) -> Result<(), HandoffError> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(HandoffError::Io {
            path: dir.to_path_buf(),
            source: e,
        }),
        _ => Ok(()),
    }
}

fn read_meta_file(path: &Path) -> Result<HandoffMeta, HandoffError> {
    use crate::fsutil::UntrustedRead;
    let bytes = crate::fsutil::read_untrusted(path, RESULT_MAX_BYTES).map_err(|e| match e {
        UntrustedRead::Missing => io_err(path)(std::io::ErrorKind::NotFound.into()),
        UntrustedRead::Io(source) => io_err(path)(source),
        other => HandoffError::Invalid {
            path: path.to_path_buf(),
            message: other.to_string(),
        },
    })?;
    let text = String::from_utf8_lossy(&bytes);
    serde_json::from_str(&text).map_err(|e| HandoffError::Invalid {
        path: path.to_path_buf(),
        message: format!("line {} column {}: {e}", e.line(), e.column()),
    })
}

/// A `result.json` is a status, a message and a few numbers: anything this large is not one.
pub const RESULT_MAX_BYTES: u64 = 1024 * 1024;

fn poll_file(path: &Path) -> HandoffPoll {
    use crate::fsutil::{UntrustedRead, read_untrusted};
    // Whoever answers may put anything there: a FIFO, a link to a device, a huge file.
    match read_untrusted(path, RESULT_MAX_BYTES) {
        Ok(bytes) => match std::str::from_utf8(&bytes) {
            Ok(text) => match parse_result_json(text) {
                Ok(r) => HandoffPoll::Result(r),
                Err(msg) => HandoffPoll::Malformed(format!("{}: {msg}", path.display())),
            },
            Err(e) => HandoffPoll::Malformed(format!(
                "{}: not UTF-8 text (byte {})",
                path.display(),
                e.valid_up_to()
            )),
        },
        Err(UntrustedRead::Missing) => HandoffPoll::Waiting,
        Err(e) => HandoffPoll::Malformed(format!("{}: {e}", path.display())),
    }
}

/// Parses and validates the text of a `result.json`. The error names the field and what was
/// expected, or the line and column of a JSON syntax error.
pub fn parse_result_json(text: &str) -> Result<HandoffResult, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| {
        format!(
            "invalid JSON at line {} column {}: {e}",
            e.line(),
            e.column()
        )
    })?;
    let Value::Object(obj) = value else {
        return Err(format!(
            "expected a JSON object like {{\"status\": \"complete\", \"message\": \"…\"}}, got {}",
            kind(&value)
        ));
    };
    let status =
        match obj.get("status") {
            None => return Err(
                "missing field `status` (one of complete, failed, blocked, human_loop, partial)"
                    .to_string(),
            ),
            Some(Value::String(s)) => s
                .parse::<HandoffStatus>()
                .map_err(|e| format!("field `status`: {e}"))?,
            Some(other) => {
                return Err(format!(
                    "field `status`: expected a string, got {}",
                    kind(other)
                ));
            }
        };
    let message = match obj.get("message") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(format!(
                "field `message`: expected a string, got {}",
                kind(other)
            ));
        }
    };
    let (cost, input_tokens, output_tokens) = match obj.get("usage") {
        None | Some(Value::Null) => (Usd::ZERO, 0, 0),
        Some(Value::Object(u)) => (
            Usd::from_f64(non_negative_number(u, "cost_usd")?),
            non_negative_int(u, "input_tokens")?,
            non_negative_int(u, "output_tokens")?,
        ),
        Some(other) => {
            return Err(format!(
                "field `usage`: expected an object like {{\"cost_usd\": 0.0}}, got {}",
                kind(other)
            ));
        }
    };
    Ok(HandoffResult {
        status,
        message,
        cost,
        input_tokens,
        output_tokens,
    })
}

fn non_negative_number(u: &Map<String, Value>, key: &str) -> Result<f64, String> {
    match u.get(key) {
        None | Some(Value::Null) => Ok(0.0),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(f) if f.is_finite() && f >= 0.0 => Ok(f),
            _ => Err(format!(
                "field `usage.{key}`: expected a number >= 0, got {n}"
            )),
        },
        Some(other) => Err(format!(
            "field `usage.{key}`: expected a number >= 0, got {}",
            kind(other)
        )),
    }
}

fn non_negative_int(u: &Map<String, Value>, key: &str) -> Result<u64, String> {
    match u.get(key) {
        None | Some(Value::Null) => Ok(0),
        Some(Value::Number(n)) => n
            .as_u64()
            .ok_or_else(|| format!("field `usage.{key}`: expected a whole number >= 0, got {n}")),
        Some(other) => Err(format!(
            "field `usage.{key}`: expected a whole number >= 0, got {}",
            kind(other)
        )),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn meta(task_id: &str, attempt: u32) -> HandoffMeta {
        HandoffMeta {
            task_id: task_id.into(),
            plan_id: "plan".into(),
            cwd: "/wt".into(),
            started_at: Utc::now(),
            timeout_s: Some(3600),
            attempt,
            bounced: None,
        }
    }

    #[test]
    fn start_poll_complete_cycle() {
        let tmp = tempfile::tempdir().unwrap();
        let h = HandoffDir::in_project(tmp.path());
        let dir = h.start(&meta("TASK-1", 1), "# do it").unwrap();
        assert_eq!(dir, tmp.path().join(".whilly/handoff/TASK-1"));
        assert_eq!(
            std::fs::read_to_string(dir.join(PROMPT_FILE)).unwrap(),
            "# do it"
        );
        assert_eq!(
            read_meta(&dir).unwrap(),
            meta("TASK-1", 1).clone_with_time(read_meta(&dir).unwrap().started_at)
        );
        assert_eq!(h.poll("plan", "TASK-1"), HandoffPoll::Waiting);
        assert_eq!(read_prompt(&dir).unwrap(), "# do it");
        assert_eq!(h.find("TASK-1", None).unwrap(), dir);
        assert!(matches!(
            h.find("OTHER", None),
            Err(HandoffError::NotWaiting { .. })
        ));
        complete(
            &dir,
            HandoffStatus::Blocked,
            "needs creds",
            Some(Usd::from_f64(0.5)),
        )
        .unwrap();
        match h.poll("plan", "TASK-1") {
            HandoffPoll::Result(r) => {
                assert_eq!(
                    (r.status, r.message.as_str(), r.cost),
                    (HandoffStatus::Blocked, "needs creds", Usd::from_f64(0.5))
                );
                assert_eq!(r.status.action(), Action::Block);
            }
            other => panic!("{other:?}"),
        }
        let list = h.list().unwrap();
        assert_eq!(list.len(), 1);
        assert!(matches!(list[0].state, HandoffPoll::Result(_)));
        // A new attempt keeps the old answer aside and waits again.
        h.start(&meta("TASK-1", 2), "# again").unwrap();
        assert_eq!(h.poll("plan", "TASK-1"), HandoffPoll::Waiting);
        assert!(dir.join("result.attempt-1.json").exists());
        h.remove("plan", "TASK-1").unwrap();
        assert!(h.list().unwrap().is_empty());
    }

    impl HandoffMeta {
        fn clone_with_time(mut self, t: DateTime<Utc>) -> HandoffMeta {
            self.started_at = t;
            self
        }
    }

    #[test]
    fn ids_never_become_raw_paths() {
        let tmp = tempfile::tempdir().unwrap();
        let h = HandoffDir::new(tmp.path().join("handoff"));
        let dir = h.start(&meta("../../etc/x", 1), "p").unwrap();
        assert!(dir.starts_with(tmp.path().join("handoff")));
        assert_eq!(dir.parent().unwrap(), tmp.path().join("handoff"));
        let err = complete(&h.task_dir("NOPE"), HandoffStatus::Complete, "", None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no handoff is waiting for task \"NOPE\""),
            "{err}"
        );
        // A plan id never escapes either.
        let mut m = meta("x", 1);
        m.plan_id = "../../p".into();
        std::fs::create_dir_all(h.task_dir("x")).unwrap();
        std::fs::write(h.task_dir("x").join(META_FILE), "{}").unwrap();
        let dir = h.start(&m, "p").unwrap();
        assert_eq!(dir.parent().unwrap(), tmp.path().join("handoff"));
    }

    #[test]
    fn malformed_results_are_reported_precisely() {
        let cases = [
            (
                "{\"status\": \"complete\",\n \"message\": }",
                "line 2 column",
            ),
            ("[1]", "expected a JSON object"),
            ("{\"message\": \"x\"}", "missing field `status`"),
            (
                "{\"status\": \"done\"}",
                "field `status`: expected one of complete",
            ),
            (
                "{\"status\": 1}",
                "field `status`: expected a string, got a number",
            ),
            (
                "{\"status\": \"failed\", \"message\": 3}",
                "field `message`",
            ),
            (
                "{\"status\": \"failed\", \"usage\": {\"cost_usd\": -1}}",
                "field `usage.cost_usd`: expected a number >= 0",
            ),
            (
                "{\"status\": \"failed\", \"usage\": {\"input_tokens\": 1.5}}",
                "field `usage.input_tokens`",
            ),
            (
                "{\"status\": \"failed\", \"usage\": 5}",
                "field `usage`: expected an object",
            ),
        ];
        for (text, want) in cases {
            let err = parse_result_json(text).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
        let ok = parse_result_json("{\"status\": \"Human-Loop\", \"usage\": {\"cost_usd\": 1.25, \"input_tokens\": 10, \"output_tokens\": 2}, \"extra\": true}").unwrap();
        assert_eq!(
            (ok.status, ok.cost, ok.input_tokens, ok.output_tokens),
            (HandoffStatus::HumanLoop, Usd::from_f64(1.25), 10, 2)
        );
        let tmp = tempfile::tempdir().unwrap();
        let h = HandoffDir::new(tmp.path());
        h.start(&meta("T", 1), "p").unwrap();
        std::fs::write(h.task_dir("T").join(RESULT_FILE), "{\"status\":").unwrap();
        match h.poll("plan", "T") {
            HandoffPoll::Malformed(m) => {
                assert!(m.contains("result.json") && m.contains("line 1"), "{m}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reads_the_original_meta_shape() {
        let tmp = tempfile::tempdir().unwrap();
        let h = HandoffDir::new(tmp.path());
        std::fs::create_dir_all(h.task_dir("T-1")).unwrap();
        let meta = r#"{"task_id":"T-1","plan":"p","cwd":"/x","started_at":"2026-01-01T00:00:00Z","timeout_s":10}"#;
        std::fs::write(h.task_dir("T-1").join(META_FILE), meta).unwrap();
        let m = read_meta(&h.task_dir("T-1")).unwrap();
        assert_eq!(
            (m.plan_id.as_str(), m.attempt, m.timeout_s),
            ("p", 1, Some(10))
        );
        std::fs::write(h.task_dir("T-1").join(META_FILE), "{\"task_id\": 1}").unwrap();
        let err = read_meta(&h.task_dir("T-1")).unwrap_err().to_string();
        assert!(
            err.contains("meta.json") && err.contains("line 1 column"),
            "{err}"
        );
        assert!(h.list().unwrap()[0].meta.is_err());
    }

    fn plan_meta(plan: &str, task: &str) -> HandoffMeta {
        let mut m = meta(task, 1);
        m.plan_id = plan.into();
        m
    }

    #[test]
    fn same_task_id_in_two_plans_gets_two_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let h = HandoffDir::new(tmp.path());
        let a = h
            .start(&plan_meta("alpha", "T-1"), "alpha's prompt")
            .unwrap();
        let b = h.start(&plan_meta("beta", "T-1"), "beta's prompt").unwrap();
        // The first keeps the documented layout; the second is plan-qualified.
        assert_eq!(a, tmp.path().join("T-1"));
        assert_eq!(b, tmp.path().join("T-1@beta"));
        assert_eq!(read_prompt(&a).unwrap(), "alpha's prompt");
        assert_eq!(read_prompt(&b).unwrap(), "beta's prompt");
        // Each plan finds its own, again and again (a new attempt reuses its directory).
        assert_eq!(h.dir_for("alpha", "T-1"), a);
        assert_eq!(h.dir_for("beta", "T-1"), b);
        assert_eq!(h.start(&plan_meta("beta", "T-1"), "again").unwrap(), b);
        // Answers go to the right plan.
        complete(&b, HandoffStatus::Failed, "beta only", None).unwrap();
        assert_eq!(h.poll("alpha", "T-1"), HandoffPoll::Waiting);
        assert!(
            matches!(h.poll("beta", "T-1"), HandoffPoll::Result(r) if r.message == "beta only")
        );
        // Removing one never touches the other.
        h.remove("alpha", "T-1").unwrap();
        assert!(!a.exists() && b.exists());
        // Once the usual directory is free, beta still finds its qualified one.
        assert_eq!(h.dir_for("beta", "T-1"), b);
        // And a third plan now takes the free usual directory.
        assert_eq!(h.start(&plan_meta("gamma", "T-1"), "g").unwrap(), a);
        // A usual directory just created by another plan (no meta.json yet) is neither removed
        // nor shared.
        std::fs::create_dir(tmp.path().join("T-9")).unwrap();
        h.remove("delta", "T-9").unwrap();
        assert!(tmp.path().join("T-9").is_dir());
        let d = h.start(&plan_meta("delta", "T-9"), "d").unwrap();
        assert_eq!(d, tmp.path().join("T-9@delta"));
        assert_eq!(h.dir_for("delta", "T-9"), d);
    }

    #[test]
    fn operator_lookup_by_task_id_and_plan() {
        let tmp = tempfile::tempdir().unwrap();
        let h = HandoffDir::new(tmp.path());
        let a = h.start(&plan_meta("alpha", "T-1"), "a").unwrap();
        let only = h.start(&plan_meta("alpha", "T-2"), "x").unwrap();
        assert_eq!(h.find("T-2", None).unwrap(), only);
        assert_eq!(h.find("T-1", None).unwrap(), a);
        let b = h.start(&plan_meta("beta", "T-1"), "b").unwrap();
        let err = h.find("T-1", None).unwrap_err();
        assert!(matches!(err, HandoffError::Ambiguous { .. }), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains("2 plans (alpha, beta)") && msg.contains("--plan"),
            "{msg}"
        );
        assert_eq!(h.find("T-1", Some("alpha")).unwrap(), a);
        assert_eq!(h.find("T-1", Some("beta")).unwrap(), b);
        let err = h.find("T-1", Some("gamma")).unwrap_err().to_string();
        assert!(err.contains("\"T-1\" of plan \"gamma\""), "{err}");
        let err = h.find("T-2", Some("beta")).unwrap_err().to_string();
        assert!(err.contains("plan \"beta\""), "{err}");
    }

    #[test]
    fn status_mapping() {
        assert_eq!(HandoffStatus::Complete.action(), Action::Complete);
        assert_eq!(HandoffStatus::Failed.action(), Action::Fail);
        assert_eq!(HandoffStatus::HumanLoop.action(), Action::AwaitHuman);
        assert_eq!(HandoffStatus::Partial.action(), Action::Release);
        for s in HandoffStatus::ALL {
            assert_eq!(s.as_str().parse::<HandoffStatus>(), Ok(s));
        }
    }
}
