//! Checkpoint retention: [`Runtime::collect_checkpoints`] removes a
//! thread's checkpoints past the last few turns' (`roder gc`, `[checkpoints]
//! keep_turns`), and deleting a thread removes all of its own. With
//! `RuntimeConfig::checkpoint_keep_turns` set, the runtime also collects a
//! thread's old checkpoints itself, in the background: after the first
//! checkpoint this process takes of the thread (a `roder exec` process
//! runs one turn), then each time `keep` more have been taken. A
//! long-lived server never holds more than about twice `keep` per thread,
//! and reads a thread's log for it once every `keep` turns, not every turn.
//!
//! What a checkpoint is made of (a git ref, a directory copy, an image) is
//! its checkpointer's business; this file decides which ones nothing needs
//! any more: every `WorkspaceCheckpointed` of the thread's log but the last
//! `keep_turns`. Rolling back to a turn whose checkpoint was collected then
//! fails, saying the checkpoint is gone.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use roder_api::checkpoint::{RemovedCheckpoint, WorkspaceCheckpoint};
use roder_api::events::RoderEvent;
use roder_api::thread::ThreadMetadata;

use crate::runtime::Runtime;

/// Threads whose counts are kept before they are dropped.
const MAX_THREADS: usize = 100_000;

/// Per thread: checkpoints taken since its last automatic collection,
/// whether this process collected it yet, and whether a collection runs.
#[derive(Debug, Default)]
pub(crate) struct Retention(Mutex<RetentionState>);

#[derive(Debug, Default)]
struct RetentionState {
    taken: HashMap<String, usize>,
    collected: HashSet<String>,
    running: HashSet<String>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Retention {
    /// Counts a checkpoint of `thread_id`.
    pub fn taken(&self, thread_id: &str) {
        *self.lock().taken.entry(thread_id.to_string()).or_default() += 1;
    }

    /// Whether a collection of `thread_id` is due (a checkpoint was taken,
    /// and this is the first in this process or `keep` since the last; none
    /// running); if so it is now running.
    fn start_if_due(&self, thread_id: &str, keep: usize) -> bool {
        let mut state = self.lock();
        let taken = state.taken.get(thread_id).copied().unwrap_or(0);
        let due = taken > 0 && (!state.collected.contains(thread_id) || taken >= keep.max(1));
        if !due || state.running.contains(thread_id) {
            return false;
        }
        state.taken.remove(thread_id);
        // Bounded however many threads a server sees: forgetting that a
        // thread was collected costs it one early collection.
        if state.collected.len() >= MAX_THREADS {
            state.collected.clear();
        }
        if state.taken.len() >= MAX_THREADS {
            state.taken.clear();
        }
        state.collected.insert(thread_id.to_string());
        state.running.insert(thread_id.to_string());
        true
    }

    fn finished(&self, thread_id: &str) {
        self.lock().running.remove(thread_id);
    }

    /// Drops what is known of a deleted thread.
    pub fn forget(&self, thread_id: &str) {
        let mut state = self.lock();
        state.taken.remove(thread_id);
        state.collected.remove(thread_id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RetentionState> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Runtime {
    /// Collects `thread_id`'s old checkpoints in the background when
    /// `checkpoint_keep_turns` more have been taken since the last time.
    pub(crate) fn collect_checkpoints_if_due(self: &Arc<Self>, thread_id: &str) {
        let Some(keep) = self.config.checkpoint_keep_turns else {
            return;
        };
        if !self.retention.start_if_due(thread_id, keep) {
            return;
        }
        let (runtime, thread_id) = (Arc::clone(self), thread_id.to_string());
        let task = tokio::spawn(async move {
            match runtime.collect_checkpoints(&thread_id, keep, false).await {
                Ok(removed) => tracing::debug!(
                    thread_id,
                    removed = removed.len(),
                    "collected checkpoints past the last {keep} turns"
                ),
                Err(error) => {
                    tracing::warn!(thread_id, "could not collect old checkpoints: {error:#}")
                }
            }
            runtime.retention.finished(&thread_id);
        });
        let mut state = self.retention.lock();
        state.tasks.retain(|task| !task.is_finished());
        state.tasks.push(task);
    }

    /// Waits for the background checkpoint collections this runtime
    /// started: a process about to exit (`roder exec`) calls it so none is
    /// cut off half way.
    ///
    /// ```no_run
    /// # async fn demo(runtime: &roder_core::Runtime) {
    /// runtime.settle_checkpoint_collections().await;
    /// # }
    /// ```
    pub async fn settle_checkpoint_collections(&self) {
        let tasks = std::mem::take(&mut self.retention.lock().tasks);
        for task in tasks {
            let _ = task.await;
        }
    }
}

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
