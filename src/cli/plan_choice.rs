//! Which plan a run means: `whilly PLAN`, `whilly run PLAN`, `whilly tui --plan ID` or nothing.
//! A PLAN is a file if one exists by that name, else an imported plan's id. Pure: the caller
//! says what exists, this says what to do or what to tell the operator.

use std::path::Path;

/// What the run works on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Choice {
    /// Import (or re-import) this file, as `--plan`'s id when given.
    File,
    /// The imported plan with this id.
    Imported(String),
}

/// `arg` is the positional PLAN, `flag` the `--plan ID`; `known` the ids of the imported plans
/// that are not archived (`archived` those that are: named explicitly they still run).
pub(crate) fn choose(
    arg: Option<&Path>,
    arg_is_file: bool,
    flag: Option<&str>,
    known: &[String],
    archived: &[String],
) -> Result<Choice, String> {
    let exists = |id: &str| known.iter().chain(archived).any(|k| k == id);
    match (arg, flag) {
        (Some(_), _) if arg_is_file => Ok(Choice::File),
        (Some(arg), flag) => {
            let name = arg.to_string_lossy();
            if !exists(&name) {
                return Err(unknown(&name, true, known));
            }
            match flag {
                Some(f) if f != name => Err(format!(
                    "PLAN {name:?} and --plan {f:?} name two different plans; give one of them"
                )),
                _ => Ok(Choice::Imported(name.into_owned())),
            }
        }
        (None, Some(id)) if exists(id) => Ok(Choice::Imported(id.to_string())),
        (None, Some(id)) => Err(unknown(id, false, known)),
        (None, None) => match known {
            [only] => Ok(Choice::Imported(only.clone())),
            [] => Err(
                "no plan is imported here yet. Try `whilly demo` for a tour in a \
                       throwaway repository, or import yours with `whilly plan import FILE` \
                       (then run `whilly`)"
                    .to_string(),
            ),
            _ => Err(format!(
                "several plans are imported ({}); say which: `whilly PLAN_ID` (or --plan ID)",
                known.join(", ")
            )),
        },
    }
}

fn unknown(name: &str, could_be_file: bool, known: &[String]) -> String {
    let what = if could_be_file {
        "neither a plan file nor an imported plan's id"
    } else {
        "not an imported plan's id"
    };
    if known.is_empty() {
        format!(
            "{name:?} is {what}, and no plan is imported here yet: import one with \
             `whilly plan import FILE`, or try `whilly demo`"
        )
    } else {
        format!(
            "{name:?} is {what}; imported plans: {} (see `whilly plan list`)",
            known.join(", ")
        )
    }
}

/// The candidate `name` was most likely meant as (a typo: at most two edits away, and closer
/// than any other), for "did you mean".
pub(crate) fn closest<'a>(name: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let name = name.to_ascii_lowercase();
    if name.chars().count() < 3 {
        return None;
    }
    candidates
        .iter()
        .map(|c| (edit_distance(&name, c), *c))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance, with a swap of two neighbours counting as one edit.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_of_a_command_is_named() {
        let cmds = ["events", "run", "plan", "task", "doctor", "report"];
        assert_eq!(closest("evnets", &cmds), Some("events"));
        assert_eq!(closest("EVENT", &cmds), Some("events"));
        assert_eq!(closest("doctr", &cmds), Some("doctor"));
        assert_eq!(closest("tasks.json", &cmds), None);
        assert_eq!(closest("my-plan", &cmds), None);
        assert_eq!(closest("rn", &cmds), None);
    }

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_file_wins_over_an_id_of_the_same_name() {
        let c = choose(Some(Path::new("demo")), true, None, &ids(&["demo"]), &[]);
        assert_eq!(c, Ok(Choice::File));
    }

    #[test]
    fn a_name_that_is_no_file_is_an_id() {
        let known = ids(&["a", "b"]);
        assert_eq!(
            choose(Some(Path::new("b")), false, None, &known, &[]),
            Ok(Choice::Imported("b".into()))
        );
        assert_eq!(
            choose(None, false, Some("a"), &known, &[]),
            Ok(Choice::Imported("a".into()))
        );
        assert_eq!(
            choose(Some(Path::new("a")), false, Some("a"), &known, &[]),
            Ok(Choice::Imported("a".into()))
        );
        let e = choose(Some(Path::new("a")), false, Some("b"), &known, &[]).unwrap_err();
        assert!(e.contains("two different plans"), "{e}");
    }

    #[test]
    fn an_unknown_name_lists_the_plans_there_are() {
        let known = ids(&["alpha", "beta"]);
        let e = choose(Some(Path::new("gamma")), false, None, &known, &[]).unwrap_err();
        assert!(e.contains("neither a plan file nor"), "{e}");
        assert!(e.contains("alpha, beta"), "{e}");
        let e = choose(None, false, Some("gamma"), &known, &[]).unwrap_err();
        assert!(
            e.contains("not an imported plan's id; imported plans: alpha, beta"),
            "{e}"
        );
        let e = choose(None, false, Some("gamma"), &[], &[]).unwrap_err();
        assert!(
            e.contains("whilly demo") && e.contains("whilly plan import"),
            "{e}"
        );
    }

    #[test]
    fn nothing_named_takes_the_only_plan_or_says_what_to_do() {
        assert_eq!(
            choose(None, false, None, &ids(&["x"]), &ids(&["old"])),
            Ok(Choice::Imported("x".into()))
        );
        let e = choose(None, false, None, &[], &[]).unwrap_err();
        assert!(
            e.contains("whilly demo") && e.contains("whilly plan import FILE"),
            "{e}"
        );
        let e = choose(None, false, None, &ids(&["x", "y"]), &[]).unwrap_err();
        assert!(e.contains("`whilly PLAN_ID`") && e.contains("x, y"), "{e}");
        // An archived plan still runs when named.
        assert_eq!(
            choose(None, false, Some("old"), &[], &ids(&["old"])),
            Ok(Choice::Imported("old".into()))
        );
    }
}
