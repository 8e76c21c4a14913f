//! Checkpoints at turn start: before a turn's first model request, the
//! thread's workspace is saved by the installed checkpointer that handles
//! it, and the checkpoint is an event (`WorkspaceCheckpointed`). A failed
//! checkpoint is an event too (`WorkspaceCheckpointFailed`) and never fails
//! the turn: the turn runs, it just cannot be rolled back to.

use std::sync::Arc;

use roder_api::checkpoint::{
    CheckpointRequest, CheckpointWorkspace, WorkspaceCheckpointFailed, WorkspaceCheckpointed,
    WorkspaceCheckpointer,
};
use roder_api::events::RoderEvent;
use roder_api::thread::ThreadMetadata;

use crate::runtime::Runtime;
use crate::threads::ThreadState;
use crate::turn::plan::TurnWorkspace;

impl Runtime {
    /// The first installed checkpointer that handles `workspace`.
    pub(crate) fn checkpointer_for(
        &self,
        workspace: &CheckpointWorkspace,
    ) -> Option<&Arc<dyn WorkspaceCheckpointer>> {
        self.checkpointers
            .iter()
            .find(|checkpointer| checkpointer.handles(workspace))
    }

    /// The thread's workspace and its checkpointer, or why rollback and
    /// fork are not supported for it.
    pub(crate) fn checkpointed_workspace(
        &self,
        metadata: &ThreadMetadata,
    ) -> anyhow::Result<(CheckpointWorkspace, Arc<dyn WorkspaceCheckpointer>)> {
        let workspace = match &metadata.runner_binding {
            Some(binding) => CheckpointWorkspace::Runner {
                binding: Box::new(binding.clone()),
                state: metadata.runner_state.clone().map(Box::new),
            },
            None => CheckpointWorkspace::Local {
                path: metadata.workspace.clone().into(),
            },
        };
        let checkpointer = self.checkpointer_for(&workspace).cloned().ok_or_else(|| {
            let kind = match workspace.provider_id() {
                Some(provider) => format!("runner \"{provider}\""),
                None => "a local workspace".to_string(),
            };
            anyhow::anyhow!(
                "rollback and fork are not supported for thread \"{}\": no installed \
                 checkpointer handles {kind}",
                metadata.thread_id
            )
        })?;
        Ok((workspace, checkpointer))
    }

    /// Saves the workspace of a starting turn, if a checkpointer handles it.
    pub(crate) async fn checkpoint_turn_start(
        &self,
        thread: &ThreadState,
        metadata: &ThreadMetadata,
        turn_id: &str,
        workspace: &TurnWorkspace,
    ) -> anyhow::Result<()> {
        let workspace = match workspace {
            TurnWorkspace::Local(path) => CheckpointWorkspace::Local { path: path.clone() },
            TurnWorkspace::Runner(binding) => CheckpointWorkspace::Runner {
                binding: Box::new(binding.clone()),
                state: metadata.runner_state.clone().map(Box::new),
            },
            TurnWorkspace::Disabled => return Ok(()),
        };
        let Some(checkpointer) = self.checkpointer_for(&workspace) else {
            return Ok(());
        };
        let taken = checkpointer
            .checkpoint(CheckpointRequest {
                thread_id: &thread.thread_id,
                turn_id,
                workspace: &workspace,
            })
            .await;
        let event = match taken {
            Ok(None) => return Ok(()),
            Ok(Some(checkpoint)) => {
                self.retention.taken(&thread.thread_id);
                RoderEvent::WorkspaceCheckpointed(WorkspaceCheckpointed {
                    thread_id: thread.thread_id.clone(),
                    turn_id: turn_id.to_string(),
                    checkpoint,
                })
            }
            Err(error) => {
                tracing::warn!(
                    thread_id = %thread.thread_id,
                    turn_id,
                    "could not checkpoint the workspace: {error:#}"
                );
                RoderEvent::WorkspaceCheckpointFailed(WorkspaceCheckpointFailed {
                    thread_id: thread.thread_id.clone(),
                    turn_id: turn_id.to_string(),
                    checkpointer: checkpointer.id(),
                    error: format!("{error:#}"),
                })
            }
        };
        self.bus.emit(thread, Some(turn_id), event).await?;
        Ok(())
    }
}
