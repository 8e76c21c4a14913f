//! Fork: [`Runtime::fork_thread`] makes a new thread whose conversation is
//! its source's up to a turn and whose workspace is a copy of the source's
//! workspace at that point, made by the same checkpointer (a new worktree
//! from a git checkpoint, say). The source is not written: its log,
//! metadata and workspace stay as they are.

use roder_api::checkpoint::{CheckpointRequest, ForkedWorkspace, ThreadForked};
use roder_api::events::RoderEvent;
use roder_api::thread::ThreadMetadata;

use crate::error::RuntimeError;
use crate::requests::{CreateThreadRequest, ThreadRunnerSelection};
use crate::rewind::{TurnLog, transcript_before};
use crate::runtime::Runtime;

impl Runtime {
    /// Forks `thread_id` at the end of turn `at_turn` (default: its current
    /// turn, from the workspace as it is now) and returns the new thread.
    /// Forking at the current turn is refused as busy while a turn runs
    /// (its workspace is changing); an earlier turn forks from the
    /// checkpoint the next turn took. A workspace no checkpointer handles,
    /// or one whose checkpointer cannot fork, is refused as not supported.
    ///
    /// ```no_run
    /// # async fn demo(runtime: &roder_core::Runtime) -> anyhow::Result<()> {
    /// let fork = runtime.fork_thread("t", Some(1)).await?;
    /// println!("fork {} works in {}", fork.thread_id, fork.workspace);
    /// # Ok(()) }
    /// ```
    pub async fn fork_thread(
        &self,
        thread_id: &str,
        at_turn: Option<u32>,
    ) -> anyhow::Result<ThreadMetadata> {
        let thread = self.thread_state(thread_id).await?;
        let source = self.thread_metadata(thread_id).await?;
        let (workspace, checkpointer) = self.checkpointed_workspace(&source)?;
        let events = self.store.load_events(thread_id, 0).await?;
        let log = TurnLog::replay(&events);
        let current = log.current();
        let at_turn = at_turn.unwrap_or(current);
        let (checkpoint, transcript) = if at_turn == current {
            if let Some(active) = thread.active_turn() {
                return Err(RuntimeError::ThreadBusy {
                    thread_id: thread_id.to_string(),
                    turn_id: active.turn_id,
                }
                .into());
            }
            let label = format!("fork-{}", uuid::Uuid::new_v4());
            let checkpoint = checkpointer
                .checkpoint(CheckpointRequest {
                    thread_id,
                    turn_id: &label,
                    workspace: &workspace,
                })
                .await?
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "forking thread \"{thread_id}\" is not supported: its workspace `{}` \
                         has no checkpoints (the \"{}\" checkpointer cannot save it)",
                        workspace.root().display(),
                        checkpointer.id()
                    )
                })?;
            (checkpoint, transcript_before(&events, u64::MAX))
        } else {
            let next = log.turn_after(thread_id, at_turn)?;
            let checkpoint = next.checkpoint.clone().ok_or_else(|| {
                anyhow::anyhow!(
                    "thread \"{thread_id}\" cannot be forked at turn {at_turn}: no checkpoint \
                     was taken when turn {} started",
                    at_turn + 1
                )
            })?;
            (checkpoint, transcript_before(&events, next.started_seq))
        };
        let forked = checkpointer.fork(&workspace, &checkpoint).await?;
        let mut request = CreateThreadRequest::in_workspace(source.workspace.clone());
        request.title = source.title.clone();
        request.provider = source.provider.clone();
        request.model = source.model.clone();
        request.tool_allowlist = source.tool_allowlist.clone();
        request.developer_instructions = source.developer_instructions.clone();
        request.external_tools = source.external_tools.clone();
        match &forked {
            ForkedWorkspace::Local { path } => request.workspace = path.display().to_string(),
            ForkedWorkspace::Runner {
                provider_id,
                config,
                workspace,
                read_roots,
            } => {
                request.runner = Some(ThreadRunnerSelection {
                    provider_id: provider_id.clone(),
                    config: config.clone(),
                    workspace: workspace.display().to_string(),
                    read_roots: read_roots
                        .iter()
                        .map(|root| root.display().to_string())
                        .collect(),
                })
            }
        }
        let created = async {
            // A profile's fork keeps its snapshot (never resolved again) and
            // the approvals that carry its mode and deny rules.
            let approvals = match &source.profile {
                Some(_) => source.approvals.clone(),
                None => Default::default(),
            };
            let metadata = self
                .create_thread_settled(
                    request,
                    source.sandbox.clone(),
                    approvals,
                    source.profile.clone(),
                )
                .await?;
            // The fork is offered the tools the client declared for its
            // source (the same host servers; sandboxed ones start in its own).
            self.thread_tools.share(thread_id, &metadata.thread_id);
            let adopted = async {
                checkpointer.adopt(&forked, &metadata.thread_id).await?;
                let fork = self.thread_state(&metadata.thread_id).await?;
                self.bus
                    .emit(
                        &fork,
                        None,
                        RoderEvent::ThreadForked(ThreadForked {
                            thread_id: metadata.thread_id.clone(),
                            source_thread_id: thread_id.to_string(),
                            at_turn,
                            checkpoint,
                            transcript,
                        }),
                    )
                    .await?;
                anyhow::Ok(())
            }
            .await;
            if let Err(error) = adopted {
                let _ = self.store.delete_thread(&metadata.thread_id).await;
                self.threads.remove(&metadata.thread_id);
                return Err(error);
            }
            anyhow::Ok(metadata)
        }
        .await;
        match created {
            Ok(metadata) => Ok(metadata),
            Err(error) => {
                if let Err(undo) = checkpointer.discard(&forked).await {
                    return Err(error.context(format!(
                        "and removing the fork's workspace failed: {undo:#}"
                    )));
                }
                Err(error)
            }
        }
    }
}
