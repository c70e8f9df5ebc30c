//! `whilly demo`: a throwaway repository with a small plan and a bundled demo agent, run at once,
//! so a newcomer sees Whilly work in a minute without any agent installed.

use super::args::{DemoArgs, RunArgs};
use super::context::Context;
use crate::agent::{HandoffDir, HandoffStatus};
use anyhow::Context as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

const PLAN: &str = include_str!("../../assets/demo/plan.json");
const AGENT: &str = include_str!("../../assets/demo/agent.sh");

pub(crate) async fn run(global: super::args::GlobalArgs, args: DemoArgs) -> anyhow::Result<i32> {
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("whilly-demo-{}", std::process::id())),
    };
    let dir = create_demo_repo(&dir, args.agent.as_deref())?;
    errln!("demo repository: {}", dir.display());
    let ctx = Context::new(super::args::GlobalArgs {
        repo: Some(dir.clone()),
        ..global
    })?;
    let (log_dir, level) = super::logging::settings(&ctx);
    let _log_guard = super::logging::init(&log_dir, &level);
    let run_args = RunArgs {
        plan_arg: Some(dir.join("plan.json")),
        plan: None,
        headless: args.headless,
        parallel: Some(3),
        watch: false,
        agent: None,
        budget: None,
        timeout: None,
        resume: false,
        http: None,
    };
    let interactive = !args.headless && crate::tui::terminal::available();
    // The demo plays the human of the handoff task DEMO-006 as far as it should: it drafts
    // REVIEW.md in the task's worktree. Headless, nobody is at the keyboard, so it also answers
    // the handoff; in the console the operator reads the draft in the inbox (H) and approves it.
    let handoff = HandoffDir::in_project(&dir);
    let review = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let Ok(dir) = handoff.find("DEMO-006", None) else {
                continue;
            };
            let Ok(meta) = crate::agent::handoff::read_meta(&dir) else {
                continue;
            };
            let _ = std::fs::write(
                meta.cwd.join("REVIEW.md"),
                "# Review\n\nVerdict: the documents read well; approved.\n",
            );
            if interactive {
                return;
            }
            let _ = crate::agent::handoff::complete(
                &dir,
                HandoffStatus::Complete,
                "approved (headless demo)",
                None,
            );
            errln!(
                "demo: answered the handoff of DEMO-006 as the human would (`whilly handoff complete`)"
            );
            return;
        }
    });
    if interactive {
        let code = super::tui_cmd::run_interactive(&ctx, run_args).await;
        review.abort();
        return code;
    }
    let code = super::run_cmd::run(&ctx, run_args).await;
    review.abort();
    code
}

/// Writes the demo repository: plan, agent script, config, one commit.
pub(crate) fn create_demo_repo(dir: &Path, agent: Option<&str>) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let dir = dir.canonicalize()?;
    if dir.join(".git").exists() && dir.join("plan.json").exists() {
        anyhow::bail!(
            "{} already holds a demo; remove it or pass another --dir",
            dir.display()
        );
    }
    let repo = git2::Repository::init(&dir)?;
    let tools = dir.join(".whilly-demo");
    std::fs::create_dir_all(&tools)?;
    let script = tools.join("agent.sh");
    std::fs::write(&script, AGENT)?;
    set_executable(&script)?;
    std::fs::write(dir.join("plan.json"), PLAN)?;
    let agent_line = match agent {
        Some(name) => format!("agent = \"{name}\""),
        None => "agent = \"demo\"".to_string(),
    };
    let config = format!(
        "# Written by `whilly demo`. See whilly.example.toml for every key.\n\
         [run]\n{agent_line}\ngrace_period_secs = 3\n\n\
         [agents.demo]\nbackend = \"command\"\ntemplate = \"bash {} {{prompt_file}} {{task_id}}\"\n\n\
         [worktrees]\ndir = \"{}\"\n",
        script.display(),
        dir.join(".whilly-demo/worktrees").display()
    );
    std::fs::write(dir.join("whilly.toml"), config)?;
    std::fs::write(dir.join(".gitignore"), ".whilly/\n.whilly-demo/\n")?;
    let mut index = repo.index()?;
    for f in ["plan.json", "whilly.toml", ".gitignore"] {
        index.add_path(Path::new(f))?;
    }
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let sig = repo
        .signature()
        .or_else(|_| git2::Signature::now("Whilly demo", "demo@whilly.invalid"))?;
    repo.commit(Some("HEAD"), &sig, &sig, "Demo plan", &tree, &[])?;
    Ok(dir)
}

fn set_executable(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut perms = std::fs::metadata(path)?.permissions();
    perms.set_mode(0o755);
    std::fs::set_permissions(path, perms)
}
