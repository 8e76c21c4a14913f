//! Persisting a thread's runner state into its metadata.

use roder_api::remote_runner::RunnerSessionState;
use roder_api::thread::{ThreadMetadata, ThreadStore};
use time::OffsetDateTime;

use crate::error::RuntimeError;
use crate::threads::ThreadState;

/// Loads the thread's metadata fresh from the store (another process or store
/// handle may have changed it), applies `change` and writes it back, all
/// under the thread's metadata lock.
pub(crate) async fn update_metadata(
    store: &dyn ThreadStore,
    thread: &ThreadState,
    change: impl FnOnce(&mut ThreadMetadata),
) -> anyhow::Result<ThreadMetadata> {
    let _guard = thread.metadata_lock.lock().await;
    let mut metadata = store
        .load_metadata(&thread.thread_id)
        .await?
        .ok_or_else(|| RuntimeError::ThreadNotFound(thread.thread_id.clone()))?;
    change(&mut metadata);
    metadata.updated_at = OffsetDateTime::now_utc();
    store.update_thread_metadata(metadata.clone()).await?;
    Ok(metadata)
}

pub(crate) async fn persist_runner_state(
    store: &dyn ThreadStore,
    thread: &ThreadState,
    state: RunnerSessionState,
) -> anyhow::Result<()> {
    update_metadata(store, thread, |metadata| {
        metadata.runner_state = Some(state);
        // A state recorded now is a live session's: no longer idle-paused.
        metadata.runner_idle_paused = false;
    })
    .await
    .map(|_| ())
}
