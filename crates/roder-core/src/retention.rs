//! Checkpoint retention: [`Runtime::collect_checkpoints`] removes a
//! thread's checkpoints past the last few turns' (`roder gc`, `[checkpoints]
//! keep_turns`), and deleting a thread removes all of its own.
//!
//! What a checkpoint is made of (a git ref, a directory copy, an image) is
//! its checkpointer's business; this file decides which ones nothing needs
//! any more: every `WorkspaceCheckpointed` of the thread's log but the last
//! `keep_turns`. Rolling back to a turn whose checkpoint was collected then
//! fails, saying the checkpoint is gone.

use roder_api::checkpoint::{RemovedCheckpoint, WorkspaceCheckpoint};
use roder_api::events::RoderEvent;
use roder_api::thread::ThreadMetadata;

use crate::runtime::Runtime;

impl Runtime {
    /// Removes `thread_id`'s checkpoints but those of its last
    /// `keep_turns` turns (or, with `dry_run`, only lists them), through
    /// the checkpointer that took each. Checkpoints already gone are not
    /// listed; one whose checkpointer is not installed is skipped with a
    /// warning.
    ///
    /// ```no_run
    /// # async fn demo(runtime: &roder_core::Runtime) -> anyhow::Result<()> {
    /// let removed = runtime.collect_checkpoints("t", 10, false).await?;
    /// println!("{} checkpoints removed", removed.len());
    /// # Ok(()) }
    /// ```
    pub async fn collect_checkpoints(
        &self,
        thread_id: &str,
        keep_turns: usize,
        dry_run: bool,
    ) -> anyhow::Result<Vec<RemovedCheckpoint>> {
        let metadata = self.thread_metadata(thread_id).await?;
        let events = self.store.load_events(thread_id, 0).await?;
        let checkpoints: Vec<WorkspaceCheckpoint> = events
            .into_iter()
            .filter_map(|envelope| match envelope.event {
                RoderEvent::WorkspaceCheckpointed(taken) => Some(taken.checkpoint),
                _ => None,
            })
            .collect();
        let past = checkpoints.len().saturating_sub(keep_turns);
        self.remove_checkpoints(
            &metadata,
            checkpoints.get(..past).unwrap_or_default(),
            dry_run,
        )
        .await
    }

    /// Removes `checkpoints` of the thread of `metadata`, grouped by the
    /// checkpointer that took them.
    pub(crate) async fn remove_checkpoints(
        &self,
        metadata: &ThreadMetadata,
        checkpoints: &[WorkspaceCheckpoint],
        dry_run: bool,
    ) -> anyhow::Result<Vec<RemovedCheckpoint>> {
        if checkpoints.is_empty() {
            return Ok(Vec::new());
        }
        let workspace = match &metadata.runner_binding {
            Some(binding) => roder_api::checkpoint::CheckpointWorkspace::Runner {
                binding: Box::new(binding.clone()),
                state: metadata.runner_state.clone().map(Box::new),
            },
            None => roder_api::checkpoint::CheckpointWorkspace::Local {
                path: metadata.workspace.clone().into(),
            },
        };
        let mut removed = Vec::new();
        let mut ids: Vec<&str> = checkpoints
            .iter()
            .map(|checkpoint| checkpoint.checkpointer.as_str())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            let group: Vec<WorkspaceCheckpoint> = checkpoints
                .iter()
                .filter(|checkpoint| checkpoint.checkpointer == id)
                .cloned()
                .collect();
            let Some(checkpointer) = self.checkpointers.iter().find(|c| c.id() == id) else {
                tracing::warn!(
                    thread_id = %metadata.thread_id,
                    "{} checkpoints of the \"{id}\" checkpointer kept: it is not installed",
                    group.len()
                );
                continue;
            };
            removed.extend(
                checkpointer
                    .remove_checkpoints(&workspace, &group, dry_run)
                    .await?,
            );
        }
        Ok(removed)
    }
}
