//! The `git-worktree` runner provider: sessions inside materialized
//! worktrees.

use std::sync::Arc;

use anyhow::{Context, bail};
use roder_api::remote_runner::{
    RemoteRunnerProvider, RemoteRunnerProviderId, RemoteRunnerSession, RunnerCapabilities,
    RunnerDestination, RunnerSessionState,
};
use roder_api::workdir::{MaterializedWorkdir, WorkdirClaim};
use roder_ext_runner_unix_local::UnixLocalRunnerProvider;
use roder_ext_runner_unix_local::provider_checks::{
    destination_config, session_state, state_metadata,
};

use crate::config::WorktreeConfig;
use crate::git::Git;
use crate::layout::Layout;
use crate::lifecycle;
use crate::session::GitWorktreeSession;

/// The provider id worktree-bound threads name.
pub const PROVIDER_ID: &str = "git-worktree";

/// Runs tools in worktrees a [`crate::GitWorktreeMaterializer`] over the
/// same root materialized. It never creates or removes worktrees: a session
/// needs an `active` one and leaves it in place.
#[derive(Debug, Clone)]
pub struct GitWorktreeRunnerProvider {
    layout: Layout,
}

impl GitWorktreeRunnerProvider {
    /// `root` must be the materializer's root.
    pub fn new(root: std::path::PathBuf) -> Self {
        Self {
            layout: Layout::new(root),
        }
    }

    fn parse_destination(destination: &RunnerDestination) -> anyhow::Result<WorktreeConfig> {
        let config = destination_config(
            destination,
            PROVIDER_ID,
            "the worktree's checkout is the workspace",
        )?;
        WorktreeConfig::from_json(config, &format!("destination `{}` config", destination.id))
    }

    /// Claims the worktree: it must be active, its working directory inside
    /// it, and a bound workspace must be that working directory (file tools
    /// send paths relative to the workspace, the session resolves them
    /// against its working directory; two roots would split the thread).
    async fn claim(&self, config: &WorktreeConfig) -> anyhow::Result<MaterializedWorkdir> {
        let claimed = lifecycle::claim(
            &self.layout,
            WorkdirClaim {
                id: config.worktree_id.clone(),
                relative_cwd: config.relative_cwd.clone(),
            },
        )
        .await?;
        if let Some(workspace) = &config.workspace {
            let resolved = tokio::fs::canonicalize(workspace).await.ok();
            if resolved.as_ref() != Some(&claimed.cwd) {
                bail!(
                    "the thread is bound at workspace `{}` but worktree `{}` works in `{}` (its checkout plus relative_cwd {:?}); file tools and commands must use one root, so bind the thread at `{}`",
                    workspace.display(),
                    config.worktree_id,
                    claimed.cwd.display(),
                    config
                        .relative_cwd
                        .as_ref()
                        .map(|cwd| cwd.display().to_string())
                        .unwrap_or_default(),
                    claimed.cwd.display()
                );
            }
        }
        Ok(claimed)
    }

    /// Opens a session if the worktree is active and the working directory
    /// is inside it (and is the bound workspace).
    async fn open(
        &self,
        config: WorktreeConfig,
        session_id: String,
        destination_id: String,
    ) -> anyhow::Result<Arc<dyn RemoteRunnerSession>> {
        let claimed = self.claim(&config).await?;
        let state = session_state(PROVIDER_ID, session_id, destination_id, config.to_json());
        let common_dir = Git::new(&claimed.info.checkout)
            .args(["rev-parse", "--path-format=absolute", "--git-common-dir"])
            .text()
            .await?;
        let session = GitWorktreeSession::open(
            state,
            config.worktree_id,
            &claimed.info.checkout,
            claimed.cwd,
            config.sandbox.unwrap_or_default(),
            std::path::PathBuf::from(common_dir),
        )
        .await?;
        Ok(Arc::new(session))
    }
}

#[async_trait::async_trait]
impl RemoteRunnerProvider for GitWorktreeRunnerProvider {
    fn id(&self) -> RemoteRunnerProviderId {
        PROVIDER_ID.to_string()
    }

    /// A unix-local session's, less port preview: sessions are unix-local
    /// sessions wrapped to work in a worktree.
    fn capabilities(&self) -> RunnerCapabilities {
        RunnerCapabilities {
            port_preview: false,
            ..UnixLocalRunnerProvider::default().capabilities()
        }
    }

    /// Checks the config; with a bound workspace (a thread being created)
    /// also that the worktree is active and works in that workspace, so a
    /// thread that could not be honoured is never created.
    async fn validate_destination(&self, destination: &RunnerDestination) -> anyhow::Result<()> {
        let config = Self::parse_destination(destination)?;
        if config.workspace.is_some() {
            self.claim(&config).await?;
        }
        Ok(())
    }

    async fn create_session(
        &self,
        destination: RunnerDestination,
    ) -> anyhow::Result<Arc<dyn RemoteRunnerSession>> {
        let config = Self::parse_destination(&destination)?;
        self.open(config, uuid::Uuid::new_v4().to_string(), destination.id)
            .await
    }

    /// Works while the worktree is active; fails once it is cleaned up or
    /// corrupted (the runtime then tries a fresh session, which fails the
    /// same way, so the thread gets the error instead of a host fallback).
    async fn resume_session(
        &self,
        state: RunnerSessionState,
    ) -> anyhow::Result<Arc<dyn RemoteRunnerSession>> {
        let config = WorktreeConfig::from_json(
            state_metadata(&state, PROVIDER_ID)?,
            &format!("session `{}` state metadata", state.session_id),
        )?;
        self.open(config, state.session_id, state.destination_id)
            .await
            .with_context(|| "cannot resume the git-worktree session")
    }
}
