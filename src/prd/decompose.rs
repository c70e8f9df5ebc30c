//! `whilly plan decompose` and the console's split key, without UI: the agent's split of each
//! picked task (`preflight::decompose_task`) applied in turn (`plan::decompose::apply`), the
//! change shown as a diff of the plan's canonical JSON, and [`write_to_queue`], which writes the
//! splits into an imported plan through `Store::split_task`, one transaction per split.

use super::error::PrdError;
use super::preflight::{self, Call};
use crate::domain::{PlanSpec, TaskSplit, Usd};
use crate::plan::canonical_json;
use crate::plan::decompose::{self, Split, SplitRules};
use crate::store::{SplitReport, Store, StoreError};

/// One task split by the agent.
#[derive(Debug, Clone, PartialEq)]
pub struct DoneSplit {
    pub task: String,
    /// Why the task was picked.
    pub reason: String,
    pub split: Split,
    /// Agent calls it took (a repair round makes two).
    pub calls: u32,
    /// What the split changes, as the queue writes it.
    pub change: TaskSplit,
}

/// The plan before and after every split, with what each took.
#[derive(Debug, Clone, PartialEq)]
pub struct Decomposition {
    pub before: PlanSpec,
    pub after: PlanSpec,
    pub splits: Vec<DoneSplit>,
    pub cost: Usd,
}

impl Decomposition {
    /// The change as a unified diff of the plan's canonical JSON, headed by `name`.
    pub fn diff(&self, name: &str) -> String {
        unified_diff(
            &canonical_json(&self.before),
            &canonical_json(&self.after),
            name,
        )
    }
}

/// Asks the agent to split each of `picked` (task id, why it was picked), in order, each split
/// applied before the next is asked, so later splits see earlier ones. `asking` is told before
/// each call (the command line prints it).
pub(crate) async fn decompose_tasks(
    call: Call<'_>,
    spec: &PlanSpec,
    picked: &[(String, String)],
    rules: SplitRules,
    mut asking: impl FnMut(&str, &str),
) -> Result<Decomposition, PrdError> {
    let mut after = spec.clone();
    let mut cost = Usd::ZERO;
    let mut splits = Vec::new();
    for (id, why) in picked {
        asking(id, why);
        let answer = preflight::decompose_task(call, &after, id, why, rules).await?;
        cost += answer.cost;
        let next = decompose::apply(&after, id, &answer.value, rules)?;
        splits.push(DoneSplit {
            task: id.clone(),
            reason: why.clone(),
            change: decompose::task_split(&after, &next, id),
            split: answer.value,
            calls: answer.calls,
        });
        after = next;
    }
    Ok(Decomposition {
        before: spec.clone(),
        after,
        splits,
        cost,
    })
}

/// Writes the splits into the imported plan `plan_id`, in the order they were made (one
/// transaction each). Stops at the first the queue refuses: the earlier ones stay written and
/// are returned with the error.
pub(crate) async fn write_to_queue(
    store: &dyn Store,
    plan_id: &str,
    d: &Decomposition,
) -> Result<Vec<SplitReport>, (Vec<SplitReport>, StoreError)> {
    let mut done = Vec::new();
    for s in &d.splits {
        match store.split_task(plan_id, &s.change).await {
            Ok(r) => done.push(r),
            Err(e) => return Err((done, e)),
        }
    }
    Ok(done)
}

/// One line per written split: `M → Ma, Mb (C, D now wait for Mb)`.
pub(crate) fn describe(r: &SplitReport) -> String {
    let mut line = format!("{} → {}", r.parent, r.subtasks.join(", "));
    if !r.dependents.is_empty() {
        let deps: Vec<String> = r
            .dependents
            .iter()
            .map(|(id, d)| format!("{id} → [{}]", d.join(", ")))
            .collect();
        line.push_str(&format!("; rewired {}", deps.join(", ")));
    }
    line
}

/// A unified diff of two texts (three lines of context), headed by `name`.
pub(crate) fn unified_diff(before: &str, after: &str, name: &str) -> String {
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{name}"), &format!("b/{name}"))
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_shows_only_the_change() {
        let d = unified_diff("a\nb\nc\n", "a\nB\nc\n", "p.json");
        assert!(
            d.contains("--- a/p.json") && d.contains("+++ b/p.json"),
            "{d}"
        );
        assert!(d.contains("-b\n+B\n"), "{d}");
    }

    #[test]
    fn a_written_split_is_described_in_one_line() {
        let r = SplitReport {
            plan_id: "p".into(),
            parent: "M".into(),
            subtasks: vec!["Ma".into(), "Mb".into()],
            dependents: [("C".to_string(), vec!["Mb".to_string()])].into(),
        };
        assert_eq!(describe(&r), "M → Ma, Mb; rewired C → [Mb]");
    }
}
