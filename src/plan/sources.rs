//! Where each imported plan came from: `.whilly/plans/<safe plan id>.json`, written by every
//! import of a file, so `whilly doctor` can tell a plan whose file is gone (a ghost: nobody can
//! edit or re-import it) from one that is still there. Kept beside the queue, not in it: a path
//! means something only on the machine that imported it.

use crate::domain::safe_id;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One plan's source file, as of its last import from this checkout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PlanSource {
    pub plan_id: String,
    /// The file, absolute.
    pub file: PathBuf,
    pub imported_at: DateTime<Utc>,
}

/// The directory the records live in.
pub(crate) fn sources_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("plans")
}

/// Records that `plan_id` was imported from `file` (made absolute), replacing an older record.
pub(crate) fn record(state_dir: &Path, plan_id: &str, file: &Path) -> std::io::Result<()> {
    let dir = sources_dir(state_dir);
    crate::fsutil::private_dir(&dir)?;
    let file = std::path::absolute(file)?;
    let rec = PlanSource {
        plan_id: plan_id.to_string(),
        file: file.canonicalize().unwrap_or(file),
        imported_at: Utc::now(),
    };
    let text = serde_json::to_vec_pretty(&rec).map_err(std::io::Error::other)?;
    // The temporary file atomic_write renames into place is created 0600.
    crate::fsutil::atomic_write(&dir.join(format!("{}.json", safe_id(plan_id))), &text)
}

/// Every record that can be read (an unreadable one is skipped: it only serves a diagnosis).
pub(crate) fn read_all(state_dir: &Path) -> Vec<PlanSource> {
    let Ok(rd) = std::fs::read_dir(sources_dir(state_dir)) else {
        return Vec::new();
    };
    let mut out: Vec<PlanSource> = rd
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .filter_map(|e| std::fs::read(e.path()).ok())
        .filter_map(|b| serde_json::from_slice(&b).ok())
        .collect();
    out.sort_by(|a, b| a.plan_id.cmp(&b.plan_id));
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_by_plan_id() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join(".whilly");
        let plan = dir.path().join("plan.json");
        std::fs::write(&plan, "{}").unwrap();
        record(&state, "a/b", &plan).unwrap();
        record(&state, "c", &plan).unwrap();
        record(&state, "c", &plan).unwrap();
        let all = read_all(&state);
        assert_eq!(
            all.iter().map(|s| s.plan_id.as_str()).collect::<Vec<_>>(),
            ["a/b", "c"]
        );
        assert_eq!(all[0].file, plan.canonicalize().unwrap());
    }
}
