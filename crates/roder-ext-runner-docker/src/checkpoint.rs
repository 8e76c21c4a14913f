//! [`DockerCheckpointer`]: per-turn checkpoints of docker threads whose
//! destination asks for them (`"checkpoints": "per_turn"`), with rollback
//! and fork.
//!
//! * **Checkpoint**: the session's [`snapshot`] (a container commit; for a
//!   workspace on a volume, a commit that carries a copy of it, see
//!   `snapshot.rs`). Before the thread has a container (its first turn, or
//!   after its container was removed) the checkpoint is the destination's
//!   image itself: that is what the next container starts from.
//! * **Rollback**: the thread keeps its container and the workspace's
//!   contents are replaced by the checkpoint image's (`workspace_restore`).
//! * **Fork**: the fork is bound to the same destination config with the
//!   checkpoint image as its `image`: its first tool call creates a new
//!   container from it. The source's container is not touched.
//!
//! Checkpoint images are `roder-snapshot:<container12>-<suffix>`; `roder gc`
//! removes those past the retention and a deleted thread's
//! (`remove_checkpoints`), never the destination's own image, and keeps
//! one a container still uses.
//!
//! [`snapshot`]: roder_api::remote_runner::RemoteRunnerSession::snapshot

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use roder_api::checkpoint::{
    CheckpointRequest, CheckpointWorkspace, ForkedWorkspace, RemovedCheckpoint,
    WorkspaceCheckpoint, WorkspaceCheckpointer,
};
use roder_api::remote_runner::{RemoteRunnerProvider, RunnerSessionState, ThreadRunnerBinding};
use serde_json::{Value, json};

use crate::client::is_not_found;
use crate::config::{Checkpoints, DockerConfig};
use crate::{DockerRunnerProvider, PROVIDER_ID, workspace_restore};

/// The id recorded in every checkpoint this checkpointer takes.
pub const CHECKPOINTER_ID: &str = "docker-commit";

/// `metadata.kind` of a checkpoint that is a commit of the container.
const KIND_COMMIT: &str = "commit";
/// `metadata.kind` of a checkpoint taken before any container: the image.
const KIND_IMAGE: &str = "image";

/// Checkpoints of `docker` threads, taken through `provider`'s sessions.
#[derive(Debug, Clone)]
pub struct DockerCheckpointer {
    provider: Arc<DockerRunnerProvider>,
}

impl DockerCheckpointer {
    pub fn new(provider: Arc<DockerRunnerProvider>) -> Self {
        Self { provider }
    }
}

/// A docker thread's binding, its parsed config, and its persisted session
/// state when that names this destination's container.
struct Bound<'a> {
    binding: &'a ThreadRunnerBinding,
    config: DockerConfig,
    state: Option<&'a RunnerSessionState>,
}

fn bound(workspace: &CheckpointWorkspace) -> anyhow::Result<Bound<'_>> {
    let CheckpointWorkspace::Runner { binding, state } = workspace else {
        bail!("the \"{CHECKPOINTER_ID}\" checkpointer only handles docker threads");
    };
    if binding.destination.provider_id != PROVIDER_ID {
        bail!("the \"{CHECKPOINTER_ID}\" checkpointer only handles docker threads");
    }
    let config = DockerConfig::from_json(&binding.destination.config, "thread binding config")?;
    // The runtime resumes only a state of the same provider and
    // destination; any other means the next session is a fresh container.
    let state = state.as_deref().filter(|state| {
        state.provider_id == PROVIDER_ID && state.destination_id == binding.destination.id
    });
    Ok(Bound {
        binding,
        config,
        state,
    })
}

/// A workspace the container's filesystem (or its workspace volume) holds;
/// one under a bind mount is the host's, which a commit does not save.
fn check_saveable(config: &DockerConfig) -> anyhow::Result<()> {
    let workdir = Path::new(&config.workdir);
    if let Some(mount) = config.mounts.iter().find(|mount| {
        let target = Path::new(&mount.target);
        workdir.starts_with(target) || target.starts_with(workdir)
    }) {
        bail!(
            "per-turn checkpoints are not supported for a workspace {} that a bind mount \
             ({} -> {}) covers: a container commit does not save host directories",
            config.workdir,
            mount.source,
            mount.target
        );
    }
    Ok(())
}

fn checkpoint_image(checkpoint: &WorkspaceCheckpoint) -> anyhow::Result<&str> {
    if checkpoint.checkpointer != CHECKPOINTER_ID {
        bail!(
            "checkpoint {} was taken by the \"{}\" checkpointer, not \"{CHECKPOINTER_ID}\"",
            checkpoint.id,
            checkpoint.checkpointer
        );
    }
    if checkpoint.id.is_empty() {
        bail!("checkpoint names no image");
    }
    Ok(&checkpoint.id)
}

impl DockerCheckpointer {
    /// Whether the container a state names is still there.
    async fn container_exists(&self, state: &RunnerSessionState) -> anyhow::Result<bool> {
        let docker = self.provider.docker().await?;
        match docker.inspect_container(&state.session_id, None).await {
            Ok(_) => Ok(true),
            Err(error) if is_not_found(&error) => Ok(false),
            Err(error) => Err(anyhow::anyhow!(
                "cannot inspect container {}: {}",
                state.session_id,
                crate::client::message_of(&error)
            )),
        }
    }
}

#[async_trait::async_trait]
impl WorkspaceCheckpointer for DockerCheckpointer {
    fn id(&self) -> String {
        CHECKPOINTER_ID.to_string()
    }

    fn handles(&self, workspace: &CheckpointWorkspace) -> bool {
        workspace.provider_id() == Some(PROVIDER_ID)
    }

    /// `Ok(None)` unless the destination says `"checkpoints": "per_turn"`.
    async fn checkpoint(
        &self,
        request: CheckpointRequest<'_>,
    ) -> anyhow::Result<Option<WorkspaceCheckpoint>> {
        let bound = bound(request.workspace)?;
        if bound.config.checkpoints != Checkpoints::PerTurn {
            return Ok(None);
        }
        check_saveable(&bound.config)?;
        let live = match bound.state {
            Some(state) if self.container_exists(state).await? => Some(state),
            _ => None,
        };
        let Some(state) = live else {
            return Ok(Some(WorkspaceCheckpoint {
                checkpointer: CHECKPOINTER_ID.to_string(),
                id: bound.config.image.clone(),
                reference: None,
                metadata: json!({ "kind": KIND_IMAGE }),
            }));
        };
        // A session handle of our own over the thread's container: the
        // snapshot is the session's, and this handle is never closed (that
        // would remove the container).
        let session = self.provider.rejoin_session(state.clone()).await?;
        let snapshot = session
            .snapshot()
            .await?
            .context("the docker session took no snapshot")?;
        Ok(Some(WorkspaceCheckpoint {
            checkpointer: CHECKPOINTER_ID.to_string(),
            id: snapshot.snapshot_id,
            reference: None,
            metadata: json!({
                "kind": KIND_COMMIT,
                "image_id": snapshot.metadata.get("image_id"),
                "container_id": state.session_id,
            }),
        }))
    }

    async fn restore(
        &self,
        workspace: &CheckpointWorkspace,
        checkpoint: &WorkspaceCheckpoint,
    ) -> anyhow::Result<()> {
        let image = checkpoint_image(checkpoint)?;
        let bound = bound(workspace)?;
        let mut found = None;
        if let Some(state) = bound.state {
            let docker = self.provider.docker().await?;
            match docker.inspect_container(&state.session_id, None).await {
                Ok(inspect) => found = Some((docker, inspect)),
                Err(error) if is_not_found(&error) => {}
                Err(error) => bail!(
                    "cannot inspect container {}: {}",
                    state.session_id,
                    crate::client::message_of(&error)
                ),
            }
        }
        let Some((docker, inspect)) = found else {
            // No container: the next one starts from the destination's image.
            if image == bound.config.image {
                return Ok(());
            }
            bail!(
                "thread's docker container is gone, so checkpoint {image} cannot be restored \
                 into it (fork the thread at that turn instead)"
            );
        };
        workspace_restore::restore(&docker, &inspect, &bound.config.workdir, image)
            .await
            .with_context(|| format!("cannot restore checkpoint {image}"))
    }

    async fn remove_checkpoints(
        &self,
        _workspace: &CheckpointWorkspace,
        checkpoints: &[WorkspaceCheckpoint],
        dry_run: bool,
    ) -> anyhow::Result<Vec<RemovedCheckpoint>> {
        self.remove_images(checkpoints, dry_run).await
    }

    async fn fork(
        &self,
        workspace: &CheckpointWorkspace,
        checkpoint: &WorkspaceCheckpoint,
    ) -> anyhow::Result<ForkedWorkspace> {
        let image = checkpoint_image(checkpoint)?;
        let bound = bound(workspace)?;
        let docker = self.provider.docker().await?;
        crate::container::require_image(&docker, image)
            .await
            .with_context(|| format!("cannot fork from checkpoint {image}"))?;
        let mut config = bound.binding.destination.config.clone();
        let object = config
            .as_object_mut()
            .context("the thread's docker config is not an object")?;
        object.insert("image".into(), Value::String(image.to_string()));
        // A warm pool of checkpoint containers would serve nobody.
        object.remove("pool_size");
        Ok(ForkedWorkspace::Runner {
            provider_id: PROVIDER_ID.to_string(),
            config,
            workspace: bound.binding.workspace.clone(),
            read_roots: bound.binding.read_roots.clone(),
        })
    }
}

impl DockerCheckpointer {
    /// Removes (or with `dry_run` lists) the images of `checkpoints` that
    /// are commits (a checkpoint that is the destination's image is never
    /// removed). An image already gone is skipped; one a container still
    /// uses (a fork's) is kept with a warning.
    async fn remove_images(
        &self,
        checkpoints: &[WorkspaceCheckpoint],
        dry_run: bool,
    ) -> anyhow::Result<Vec<RemovedCheckpoint>> {
        let commits: Vec<&WorkspaceCheckpoint> = checkpoints
            .iter()
            .filter(|checkpoint| {
                checkpoint.checkpointer == CHECKPOINTER_ID
                    && checkpoint.metadata.get("kind").and_then(Value::as_str) == Some(KIND_COMMIT)
            })
            .collect();
        if commits.is_empty() {
            return Ok(Vec::new());
        }
        let docker = self.provider.docker().await?;
        let mut removed = Vec::new();
        for checkpoint in commits {
            let image = checkpoint_image(checkpoint)?;
            let bytes = match docker.inspect_image(image).await {
                Ok(inspect) => inspect.size.and_then(|size| u64::try_from(size).ok()),
                Err(error) if is_not_found(&error) => continue,
                Err(error) => bail!(
                    "cannot inspect checkpoint image {image}: {}",
                    crate::client::message_of(&error)
                ),
            };
            if !dry_run {
                match docker
                    .remove_image(
                        image,
                        None::<bollard::query_parameters::RemoveImageOptions>,
                        None,
                    )
                    .await
                {
                    Ok(_) => {}
                    Err(error) if is_not_found(&error) => continue,
                    Err(error) if crate::client::status_of(&error) == Some(409) => {
                        tracing::warn!(
                            "checkpoint image {image} kept: {}",
                            crate::client::message_of(&error)
                        );
                        continue;
                    }
                    Err(error) => bail!(
                        "cannot remove checkpoint image {image}: {}",
                        crate::client::message_of(&error)
                    ),
                }
            }
            removed.push(RemovedCheckpoint {
                checkpointer: CHECKPOINTER_ID.to_string(),
                id: image.to_string(),
                bytes,
            });
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roder_api::remote_runner::{RunnerDestination, RunnerManifest};

    fn workspace(config: Value) -> CheckpointWorkspace {
        CheckpointWorkspace::Runner {
            binding: Box::new(ThreadRunnerBinding {
                destination: RunnerDestination {
                    id: "thread-t".into(),
                    provider_id: PROVIDER_ID.into(),
                    config,
                    default_manifest: RunnerManifest::default(),
                },
                workspace: "/workspace".into(),
                read_roots: vec![],
            }),
            state: None,
        }
    }

    #[tokio::test]
    async fn without_per_turn_there_is_no_checkpoint_and_other_backends_are_not_handled() {
        let checkpointer = DockerCheckpointer::new(Arc::new(DockerRunnerProvider::default()));
        let off = workspace(json!({"image": "img"}));
        assert!(checkpointer.handles(&off));
        let taken = checkpointer
            .checkpoint(CheckpointRequest {
                thread_id: "t",
                turn_id: "u",
                workspace: &off,
            })
            .await
            .unwrap();
        assert_eq!(taken, None);
        let local = CheckpointWorkspace::Local { path: "/w".into() };
        assert!(!checkpointer.handles(&local));
    }

    #[tokio::test]
    async fn before_any_container_the_checkpoint_is_the_image_and_bind_mounts_are_refused() {
        let checkpointer = DockerCheckpointer::new(Arc::new(DockerRunnerProvider::default()));
        let fresh = workspace(json!({"image": "img", "checkpoints": "per_turn"}));
        let taken = checkpointer
            .checkpoint(CheckpointRequest {
                thread_id: "t",
                turn_id: "u",
                workspace: &fresh,
            })
            .await
            .unwrap()
            .unwrap();
        assert_eq!(taken.id, "img");
        assert_eq!(taken.metadata["kind"], KIND_IMAGE);
        // With no container, restoring the image is a no-op.
        checkpointer.restore(&fresh, &taken).await.unwrap();

        let dir = tempfile::tempdir().unwrap();
        let mounted = workspace(json!({
            "image": "img",
            "checkpoints": "per_turn",
            "mounts": [{"source": dir.path(), "target": "/workspace"}],
        }));
        let error = checkpointer
            .checkpoint(CheckpointRequest {
                thread_id: "t",
                turn_id: "u",
                workspace: &mounted,
            })
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains("bind mount"), "{error}");

        let mut foreign = taken.clone();
        foreign.checkpointer = "git".into();
        let error = checkpointer
            .restore(&fresh, &foreign)
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains("\"git\" checkpointer"), "{error}");
    }
}
