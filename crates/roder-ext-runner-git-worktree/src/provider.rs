//! The `git-worktree` runner provider: sessions inside materialized
//! worktrees.

use std::sync::Arc;

use anyhow::{Context, bail};
use roder_api::remote_runner::{
    RemoteRunnerProvider, RemoteRunnerProviderId, RemoteRunnerSession, RunnerCapabilities,
    RunnerDestination, RunnerMountCapabilities, RunnerSessionState,
};
use roder_api::workdir::WorkdirClaim;

use crate::config::WorktreeConfig;
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

    fn check_provider(provider_id: &str, what: &str) -> anyhow::Result<()> {
        if provider_id != PROVIDER_ID {
            bail!("{what} is for runner provider `{provider_id}`, not `{PROVIDER_ID}`");
        }
        Ok(())
    }

    fn parse_destination(destination: &RunnerDestination) -> anyhow::Result<WorktreeConfig> {
        Self::check_provider(
            &destination.provider_id,
            &format!("destination `{}`", destination.id),
        )?;
        let manifest = &destination.default_manifest;
        if !manifest.entries.is_empty() || !manifest.mounts.is_empty() {
            bail!(
                "destination `{}`: git-worktree does not support manifest entries or mounts; \
                 the worktree's checkout is the workspace",
                destination.id
            );
        }
        WorktreeConfig::from_json(
            &destination.config,
            &format!("destination `{}` config", destination.id),
        )
    }

    /// Opens a session if the worktree is active and the working directory
    /// is inside it.
    async fn open(
        &self,
        config: WorktreeConfig,
        session_id: String,
        destination_id: String,
    ) -> anyhow::Result<Arc<dyn RemoteRunnerSession>> {
        let claimed = lifecycle::claim(
            &self.layout,
            WorkdirClaim {
                id: config.worktree_id.clone(),
                relative_cwd: config.relative_cwd.clone(),
            },
        )
        .await?;
        let state = RunnerSessionState {
            provider_id: PROVIDER_ID.to_string(),
            session_id,
            destination_id,
            snapshot: None,
            metadata: config.to_json(),
        };
        let checkout = claimed.info.checkout;
        let cwd = claimed.cwd;
        let session = tokio::task::spawn_blocking(move || {
            GitWorktreeSession::open_blocking(state, config.worktree_id, &checkout, cwd)
        })
        .await
        .context("session open task failed")??;
        Ok(Arc::new(session))
    }
}

#[async_trait::async_trait]
impl RemoteRunnerProvider for GitWorktreeRunnerProvider {
    fn id(&self) -> RemoteRunnerProviderId {
        PROVIDER_ID.to_string()
    }

    fn capabilities(&self) -> RunnerCapabilities {
        RunnerCapabilities {
            command_exec: true,
            file_read: true,
            file_write: true,
            port_preview: false,
            snapshots: false,
            cancellation: true,
            artifact_export: false,
            mounts: RunnerMountCapabilities::default(),
            pausable: false,
            detachable: false,
        }
    }

    async fn validate_destination(&self, destination: &RunnerDestination) -> anyhow::Result<()> {
        Self::parse_destination(destination).map(|_| ())
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
        Self::check_provider(
            &state.provider_id,
            &format!("session `{}`", state.session_id),
        )?;
        let config = WorktreeConfig::from_json(
            &state.metadata,
            &format!("session `{}` state metadata", state.session_id),
        )?;
        self.open(config, state.session_id, state.destination_id)
            .await
            .with_context(|| "cannot resume the git-worktree session")
    }
}
