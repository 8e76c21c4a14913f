//! [`GitCheckpointer`]: per-turn checkpoints of git-worktree threads and of
//! local workspaces inside a git repository, as git commit objects
//! (`snapshot.rs`), with rollback and fork.
//!
//! A fork is a new worktree (under the same root as the materializer's)
//! at the checkpoint's `HEAD`, with the checkpoint's files and index put
//! into it, so it starts exactly where the source was, uncommitted and
//! untracked work included, and shares the source's object store. A local
//! workspace forks into a worktree too: a fork must not share the user's
//! checkout.

use std::path::PathBuf;

use anyhow::{Context, bail};
use roder_api::checkpoint::{
    CheckpointRequest, CheckpointWorkspace, ForkedWorkspace, RemovedCheckpoint,
    WorkspaceCheckpoint, WorkspaceCheckpointer, checkpoint_ref,
};
use roder_api::sandbox_policy::SANDBOX_CONFIG_KEY;
use roder_api::workdir::WorkdirRequest;
use serde_json::{Value, json};

use crate::config::WorktreeConfig;
use crate::layout::Layout;
use crate::snapshot::{self, Snapshot};
use crate::{PROVIDER_ID, lifecycle, materialize};

/// The id recorded in every checkpoint this crate takes.
pub const CHECKPOINTER_ID: &str = "git";

/// Checkpoints for `git-worktree` threads and local workspaces in a git
/// repository. `root` must be the materializer's: forks are materialized
/// there.
#[derive(Debug, Clone)]
pub struct GitCheckpointer {
    layout: Layout,
}

/// Where a workspace's checkout is, and what a fork of it needs.
struct Located {
    checkout: PathBuf,
    repository: PathBuf,
    relative_cwd: Option<PathBuf>,
    sandbox: Option<Value>,
}

impl GitCheckpointer {
    pub fn new(root: PathBuf) -> Self {
        Self {
            layout: Layout::new(root),
        }
    }

    /// The checkout of `workspace`; `None` for a local directory outside
    /// any git work tree.
    async fn locate(&self, workspace: &CheckpointWorkspace) -> anyhow::Result<Option<Located>> {
        match workspace {
            CheckpointWorkspace::Local { path } => {
                let Some(top) = snapshot::toplevel(path).await? else {
                    return Ok(None);
                };
                let canonical = tokio::fs::canonicalize(path)
                    .await
                    .with_context(|| format!("cannot resolve workspace `{}`", path.display()))?;
                let relative_cwd = canonical
                    .strip_prefix(&top)
                    .ok()
                    .filter(|relative| !relative.as_os_str().is_empty())
                    .map(PathBuf::from);
                Ok(Some(Located {
                    checkout: top.clone(),
                    repository: top,
                    relative_cwd,
                    sandbox: None,
                }))
            }
            CheckpointWorkspace::Runner { binding, .. } => {
                let config = &binding.destination.config;
                let parsed = WorktreeConfig::from_json(config, "thread binding config")?;
                let (record, _) = lifecycle::require_active(&self.layout, &parsed.worktree_id)
                    .await
                    .with_context(|| {
                        format!("cannot checkpoint worktree `{}`", parsed.worktree_id)
                    })?;
                Ok(Some(Located {
                    checkout: record.checkout,
                    repository: record.repository,
                    relative_cwd: parsed.relative_cwd,
                    sandbox: config.get(SANDBOX_CONFIG_KEY).cloned(),
                }))
            }
        }
    }

    async fn require(&self, workspace: &CheckpointWorkspace) -> anyhow::Result<Located> {
        self.locate(workspace).await?.with_context(|| {
            format!(
                "rollback and fork are not supported for workspace `{}`: it is not inside a git \
                 repository, so it has no checkpoints",
                workspace.root().display()
            )
        })
    }
}

fn snapshot_of(checkpoint: &WorkspaceCheckpoint) -> anyhow::Result<Snapshot> {
    if checkpoint.checkpointer != CHECKPOINTER_ID {
        bail!(
            "checkpoint {} was taken by the \"{}\" checkpointer, not \"{CHECKPOINTER_ID}\"",
            checkpoint.id,
            checkpoint.checkpointer
        );
    }
    let text = |key: &str| {
        checkpoint
            .metadata
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    Ok(Snapshot {
        commit: checkpoint.id.clone(),
        head: text("head"),
        index: text("index"),
    })
}

fn worktree_id(forked: &ForkedWorkspace) -> Option<&str> {
    match forked {
        ForkedWorkspace::Runner {
            provider_id,
            config,
            ..
        } if provider_id == PROVIDER_ID => config.get("worktree_id").and_then(Value::as_str),
        _ => None,
    }
}

#[async_trait::async_trait]
impl WorkspaceCheckpointer for GitCheckpointer {
    fn id(&self) -> String {
        CHECKPOINTER_ID.to_string()
    }

    fn handles(&self, workspace: &CheckpointWorkspace) -> bool {
        match workspace.provider_id() {
            None => true,
            Some(provider) => provider == PROVIDER_ID,
        }
    }

    async fn checkpoint(
        &self,
        request: CheckpointRequest<'_>,
    ) -> anyhow::Result<Option<WorkspaceCheckpoint>> {
        let Some(located) = self.locate(request.workspace).await? else {
            return Ok(None);
        };
        let reference = checkpoint_ref(request.thread_id, request.turn_id);
        let message = format!(
            "roder checkpoint: thread {} before turn {}",
            request.thread_id, request.turn_id
        );
        let taken = snapshot::take(&located.checkout, &reference, &message).await?;
        Ok(Some(WorkspaceCheckpoint {
            checkpointer: CHECKPOINTER_ID.to_string(),
            id: taken.commit,
            reference: Some(reference),
            metadata: json!({
                "head": taken.head,
                "index": taken.index,
                "checkout": located.checkout,
            }),
        }))
    }

    async fn restore(
        &self,
        workspace: &CheckpointWorkspace,
        checkpoint: &WorkspaceCheckpoint,
    ) -> anyhow::Result<()> {
        let snapshot = snapshot_of(checkpoint)?;
        let located = self.require(workspace).await?;
        snapshot::restore(&located.checkout, &snapshot)
            .await
            .with_context(|| {
                format!(
                    "cannot restore checkpoint {} in `{}`",
                    checkpoint.id,
                    located.checkout.display()
                )
            })
    }

    async fn fork(
        &self,
        workspace: &CheckpointWorkspace,
        checkpoint: &WorkspaceCheckpoint,
    ) -> anyhow::Result<ForkedWorkspace> {
        let snapshot = snapshot_of(checkpoint)?;
        let located = self.require(workspace).await?;
        let Some(head) = snapshot.head.clone() else {
            bail!(
                "forking is not supported for repository `{}` before its first commit \
                 (a worktree needs a commit to start from)",
                located.repository.display()
            );
        };
        let made = materialize::materialize(
            &self.layout,
            WorkdirRequest {
                repository: located.repository.clone(),
                selector: Some(head.clone()),
                id: None,
            },
        )
        .await?;
        let id = made.info.id.clone();
        let prepared = async {
            snapshot::restore(&made.info.checkout, &snapshot).await?;
            lifecycle::claimed_cwd(&made.info.checkout, located.relative_cwd.as_deref()).await
        }
        .await;
        let cwd = match prepared {
            Ok(cwd) => cwd,
            Err(error) => {
                if let Err(undo) = lifecycle::rollback(&self.layout, &id).await {
                    return Err(error.context(format!(
                        "and removing the fork's worktree `{id}` failed: {undo:#}"
                    )));
                }
                return Err(error);
            }
        };
        let mut config = json!({
            "worktree_id": id,
            "relative_cwd": located.relative_cwd.map(|path| path.display().to_string()),
            "repository": located.repository,
            "selector": head,
        });
        if let (Some(sandbox), Some(object)) = (located.sandbox, config.as_object_mut()) {
            object.insert(SANDBOX_CONFIG_KEY.to_string(), sandbox);
        }
        Ok(ForkedWorkspace::Runner {
            provider_id: PROVIDER_ID.to_string(),
            config,
            workspace: cwd,
            read_roots: Vec::new(),
        })
    }

    async fn adopt(&self, forked: &ForkedWorkspace, thread_id: &str) -> anyhow::Result<()> {
        match worktree_id(forked) {
            Some(id) => lifecycle::bind(&self.layout, id, thread_id).await,
            None => Ok(()),
        }
    }

    async fn discard(&self, forked: &ForkedWorkspace) -> anyhow::Result<()> {
        match worktree_id(forked) {
            Some(id) => lifecycle::rollback(&self.layout, id).await,
            None => Ok(()),
        }
    }

    /// Deletes the checkpoints' refs in the checkout each was taken in (as
    /// recorded in it, so a deleted thread's worktree need not be active);
    /// checkpoints without one use the workspace's checkout. A checkout
    /// that is gone has nothing left to remove.
    async fn remove_checkpoints(
        &self,
        workspace: &CheckpointWorkspace,
        checkpoints: &[WorkspaceCheckpoint],
        dry_run: bool,
    ) -> anyhow::Result<Vec<RemovedCheckpoint>> {
        let mut by_checkout: std::collections::BTreeMap<PathBuf, Vec<&WorkspaceCheckpoint>> =
            Default::default();
        let mut fallback = None;
        for checkpoint in checkpoints {
            snapshot_of(checkpoint)?;
            let checkout = match crate::retention::checkout_of(checkpoint) {
                Some(checkout) => checkout,
                None => {
                    if fallback.is_none() {
                        fallback = Some(self.locate(workspace).await?.map(|l| l.checkout));
                    }
                    match fallback.clone().flatten() {
                        Some(checkout) => checkout,
                        None => continue,
                    }
                }
            };
            by_checkout.entry(checkout).or_default().push(checkpoint);
        }
        let mut removed = Vec::new();
        for (checkout, group) in by_checkout {
            if !tokio::fs::try_exists(&checkout).await.unwrap_or(false) {
                continue;
            }
            removed.extend(crate::retention::remove_refs(&checkout, &group, dry_run).await?);
        }
        Ok(removed)
    }
}
