//! `roder exec --worktree`: the new thread works in a fresh git worktree of
//! the repository holding the workspace (the git-worktree runner), so the
//! user's checkout is never touched. The worktree starts at the
//! repository's `HEAD`, which must be clean (uncommitted work would be left
//! behind); its path is printed on stderr. The thread is created first
//! (as `--profile` says, resolved in the workspace), then the turn runs as
//! `roder exec --thread ID` would run it.

use std::process::ExitCode;

use roder_api::workdir::WorkdirRequest;
use roder_core::{CreateThreadRequest, WorkdirSelection};

use crate::cli::ExecArgs;
use crate::config::Settings;
use crate::wiring;

pub async fn run(settings: &Settings, mut args: ExecArgs) -> anyhow::Result<ExitCode> {
    // Before anything is made: an empty `-` prompt leaves no worktree.
    args.prompt = crate::prompt_input::resolve(&args.prompt).await?;
    let workspace = match &args.workspace {
        Some(path) => path.clone(),
        None => std::env::current_dir()?,
    };
    let workspace = tokio::fs::canonicalize(&workspace)
        .await
        .map_err(|error| anyhow::anyhow!("workspace {}: {error}", workspace.display()))?;
    // Before the worktree and its thread exist.
    let profile =
        crate::profiles_cmd::resolve_for_exec(settings, &args.profile, &workspace).await?;
    // The profile's MCP servers start with the turn, which reads them from
    // the thread's stored snapshot (`exec.rs`).
    crate::preflight::model_key(
        settings,
        crate::exec::provider_of(settings, profile.as_ref()),
    )?;
    let wired = wiring::runtime(settings, &workspace, |_| {})?;
    let mut request = CreateThreadRequest::in_workspace(workspace.display().to_string());
    let profile = profile.map(|profile| {
        let approvals = crate::exec::flags_over_profile(settings, &args, &mut request);
        (approvals, profile)
    });
    let created = wired
        .runtime
        .create_thread_in_workdir_with(
            request,
            WorkdirSelection::Materialize(WorkdirRequest {
                repository: workspace.clone(),
                selector: None,
                id: None,
            }),
            profile,
        )
        .await;
    wired.shutdown().await;
    let metadata = created.map_err(|error| {
        error.context(format!(
            "cannot give the thread a worktree of `{}`",
            workspace.display()
        ))
    })?;
    if let Some(binding) = &metadata.runner_binding {
        eprintln!(
            "roder: thread {} works in worktree {}",
            metadata.thread_id,
            binding.workspace.display()
        );
    }
    args.thread = Some(metadata.thread_id);
    // The profile is the thread's now; the turn reads its snapshot.
    args.profile = Default::default();
    crate::exec::run_with_prompt(settings, args).await
}
