//! `whilly doctor [--fix]`: the checks of `engine::doctor`, grouped for people or as JSON.

use super::args::{DoctorArgs, DoctorFormat};
use super::context::Context;
use crate::domain::doctor::{self, Finding, Severity};
use crate::engine::doctor::{self as checks, DoctorEnv, files};
use crate::store::redact_url;

pub(crate) async fn run(ctx: &Context, args: DoctorArgs) -> anyhow::Result<i32> {
    let cfg = ctx.config()?;
    let state_dir = ctx.state_dir();
    // Before the queue is opened: opening a SQLite queue narrows `.whilly/` itself.
    let perms = files::gather(&state_dir);
    let database_location = match ctx.database_target() {
        Ok(crate::store::open::DatabaseTarget::Sqlite(p)) => p.display().to_string(),
        Ok(crate::store::open::DatabaseTarget::Postgres(url)) => redact_url(&url),
        Err(e) => format!("(unreadable database url: {e})"),
    };
    // The queue answers or it does not; either way the other checks still run.
    let store = tokio::time::timeout(std::time::Duration::from_secs(15), ctx.store())
        .await
        .map_err(|_| "it did not answer within 15 s".to_string())
        .and_then(|r| r.map_err(|e| super::exit::describe(&e)));
    let env = DoctorEnv {
        repo_root: &ctx.repo_root,
        state_dir: &state_dir,
        config: &cfg,
        store,
        database_location,
    };
    let json = args.format == DoctorFormat::Json;
    let mut findings = checks::examine(&env, &perms).await;
    let mut applied: Vec<serde_json::Value> = Vec::new();
    if args.fix {
        let fixes = doctor::fixes(&findings);
        if !json {
            print_findings(&findings)?;
            if fixes.is_empty() {
                outln!("\nNothing --fix can do.");
            } else {
                outln!("\nFixing:");
            }
        }
        for fix in &fixes {
            let (ok, said) = match checks::apply(&env, fix).await {
                Ok(said) => (true, said),
                Err(e) => (false, format!("could not fix: {e}")),
            };
            if !json {
                outln!("  {} {said}", if ok { "fixed:" } else { "FAILED:" });
            }
            applied.push(serde_json::json!({ "fix": fix, "ok": ok, "said": said }));
        }
        // What is left is what counts.
        findings = checks::examine(&env, &files::gather(&state_dir)).await;
        if !json && !fixes.is_empty() {
            outln!("\nAfter the fixes:");
        }
    }
    let code = doctor::exit_code(&findings);
    if json {
        let v = serde_json::json!({
            "findings": findings,
            "fixes_applied": applied,
            "problems": findings.iter().filter(|f| f.severity == Severity::Problem).count(),
            "warnings": findings.iter().filter(|f| f.severity == Severity::Warn).count(),
            "exit_code": code,
        });
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else if !args.fix || !applied.is_empty() {
        print_findings(&findings)?;
    }
    if let Ok(store) = &env.store {
        store.close().await;
    }
    Ok(code)
}

fn print_findings(findings: &[Finding]) -> std::io::Result<()> {
    let mut group = "";
    for f in findings {
        if f.check != group {
            group = f.check;
            outln!("{group}");
        }
        outln!("  [{}] {}", f.severity.label(), f.what);
        if !f.why.is_empty() {
            outln!("      why: {}", f.why);
        }
        if !f.fix.is_empty() {
            outln!("      fix: {}", f.fix);
        }
    }
    let problems = findings
        .iter()
        .filter(|f| f.severity == Severity::Problem)
        .count();
    let warnings = findings
        .iter()
        .filter(|f| f.severity == Severity::Warn)
        .count();
    let plural = |n: usize, one: &str| {
        if n == 1 {
            format!("1 {one}")
        } else {
            format!("{n} {one}s")
        }
    };
    outln!(
        "\n{}, {}{}",
        plural(problems, "problem"),
        plural(warnings, "warning"),
        if problems > 0 && findings.iter().any(|f| f.fixable.is_some()) {
            "; `whilly doctor --fix` applies the safe fixes"
        } else {
            ""
        }
    );
    Ok(())
}
