//! `whilly plan new`: a starter plan and, beside it, the schema its `$schema` points at.

use super::context::Context;
use super::exit;
use crate::fsutil::atomic_write;
use crate::plan::starter::{PLAN_SCHEMA, SCHEMA_FILE_NAME, starter_plan};
use anyhow::{Context as _, bail};
use std::path::Path;

pub(crate) fn new_plan(
    ctx: &Context,
    file: &Path,
    project: Option<&str>,
    force: bool,
) -> anyhow::Result<i32> {
    if file.exists() && !force {
        bail!(
            "{} already exists; pick another name, or pass --force to replace it",
            file.display()
        );
    }
    let project = match project {
        Some(p) if !p.trim().is_empty() => p.trim().to_string(),
        Some(_) => bail!("--project is empty; give the project a name"),
        None => ctx
            .repo_root
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("my-project")
            .to_string(),
    };
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    if !dir.is_dir() {
        bail!(
            "{} is not a directory; create it first or write the plan elsewhere",
            dir.display()
        );
    }
    atomic_write(file, starter_plan(&project).as_bytes())
        .with_context(|| format!("writing {}", file.display()))?;
    let schema = dir.join(SCHEMA_FILE_NAME);
    // The schema is whilly's own file: rewritten when it is stale, so the editor checks against
    // the fields this binary reads.
    let current = std::fs::read_to_string(&schema).ok();
    if current.as_deref() != Some(PLAN_SCHEMA) {
        atomic_write(&schema, PLAN_SCHEMA.as_bytes())
            .with_context(|| format!("writing {}", schema.display()))?;
    }
    // Files for the repository (committed, shared), not private state: readable as any file.
    for f in [file, schema.as_path()] {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o644))
            .with_context(|| format!("making {} readable", f.display()))?;
    }
    outln!(
        "wrote {} (a plan of two tasks) and {} (its schema, for editors)",
        file.display(),
        schema.display()
    );
    outln!("next:");
    outln!("  edit the tasks (fields: docs/plan-format.md, or `whilly plan schema`)");
    outln!("  whilly plan check {}", file.display());
    outln!("  whilly run {}", file.display());
    Ok(exit::OK)
}
