//! Starting and interrupting turns.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use roder_api::events::{RoderEvent, TranscriptItemAppended, TurnStarted};
use roder_api::inference::RuntimeProfile;
use roder_api::thread::ThreadMetadata;
use roder_api::transcript::TranscriptItem;

use crate::error::RuntimeError;
use crate::requests::{StartTurnRequest, TurnOptions};
use crate::runner::deadline::TurnDeadline;
use crate::runtime::Runtime;
use crate::threads::{ActiveTurn, ThreadState};
use crate::trace;
use crate::turn::driver;
use crate::turn::plan::{TurnPlan, TurnWorkspace};
use tracing::Instrument;

/// Largest `AGENTS.md` read into the developer context.
const AGENTS_MD_LIMIT: usize = 64 * 1024;

const NON_INTERACTIVE_NOTE: &str = "You are running non-interactively: nobody will answer \
questions during this turn. Make reasonable assumptions, finish the task, and state any \
assumption in your final answer.";

impl Runtime {
    /// Starts a turn on its own task and returns its id at once. A thread runs
    /// one turn at a time, across processes: input for a thread busy here
    /// ([`RuntimeError::ThreadBusy`]) or in another process (a
    /// [`ThreadWriterBusy`](roder_api::writer_lease::ThreadWriterBusy) naming
    /// it) is refused (nothing is queued, no state changes, no event is
    /// written). A turn a dead process left open is closed first.
    pub async fn start_turn(self: &Arc<Self>, request: StartTurnRequest) -> anyhow::Result<String> {
        self.start_turn_with(request, TurnOptions::default()).await
    }

    /// [`start_turn`](Self::start_turn) with what [`StartTurnRequest`]
    /// cannot carry: this turn's approval mode.
    ///
    /// ```no_run
    /// # async fn demo(runtime: std::sync::Arc<roder_core::Runtime>) -> anyhow::Result<()> {
    /// use roder_api::policy_mode::PolicyMode;
    /// use roder_core::{StartTurnRequest, TurnOptions};
    ///
    /// let look_only = TurnOptions { policy_mode: Some(PolicyMode::Plan), traceparent: None };
    /// runtime
    ///     .start_turn_with(StartTurnRequest::new("thread-id", "how is this tested?"), look_only)
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn start_turn_with(
        self: &Arc<Self>,
        request: StartTurnRequest,
        options: TurnOptions,
    ) -> anyhow::Result<String> {
        if request.task_ledger_required {
            anyhow::bail!("task_ledger_required is not supported; set it to false");
        }
        if let Some(traceparent) = &options.traceparent
            && !roder_api::telemetry::valid_traceparent(traceparent)
        {
            anyhow::bail!(
                "traceparent {traceparent:?} is not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)"
            );
        }
        let thread = self.thread_state(&request.thread_id).await?;
        let metadata = self.thread_metadata(&request.thread_id).await?;
        let provider = request
            .provider_override
            .clone()
            .or_else(|| metadata.provider.clone())
            .unwrap_or_else(|| self.config.default_provider.clone());
        let engine = self.engine(&provider)?;
        if !request.images.is_empty() && !engine.capabilities().images {
            anyhow::bail!("inference provider \"{provider}\" does not accept images");
        }
        let turn_id = uuid::Uuid::new_v4().to_string();
        let provider_label = provider.clone();
        let active = thread.claim_new(turn_id.clone())?;
        match self
            .plan_turn(&thread, metadata, request, provider, engine, active)
            .await
        {
            Ok(mut plan) => {
                plan.mode_override = options.policy_mode;
                let span = trace::turn(plan.thread_id(), &turn_id, &provider_label, &plan.model);
                if let (Some(context), Some(parent)) = (&self.trace_context, &options.traceparent) {
                    context.set_parent(&span, parent);
                }
                tokio::spawn(driver::drive(self.clone(), plan).instrument(span));
                // This turn's checkpoint is taken: older ones may go.
                self.collect_checkpoints_if_due(&thread.thread_id);
                Ok(turn_id)
            }
            Err(error) => {
                thread.release(&turn_id);
                Err(error)
            }
        }
    }

    async fn plan_turn(
        &self,
        thread: &Arc<ThreadState>,
        metadata: ThreadMetadata,
        request: StartTurnRequest,
        provider: String,
        engine: Arc<dyn roder_api::inference::InferenceEngine>,
        active: ActiveTurn,
    ) -> anyhow::Result<TurnPlan> {
        // Before anything is written: busy in another process, or a turn a
        // dead process left open to close.
        let writer = self.open_writer(thread).await?;
        // Another process may have changed the thread's approvals since.
        thread.set_approvals(metadata.approvals.clone());
        let model = request
            .model_override
            .clone()
            .or_else(|| metadata.model.clone())
            .unwrap_or_else(|| self.config.default_model.clone());
        let workspace = match &metadata.runner_binding {
            Some(binding) => TurnWorkspace::Runner(binding.clone()),
            None if !self.allows_local_workspaces() => TurnWorkspace::Disabled,
            None if !request.workspace.is_empty() => {
                TurnWorkspace::Local(PathBuf::from(&request.workspace))
            }
            None => TurnWorkspace::Local(PathBuf::from(&metadata.workspace)),
        };
        let developer_context = self
            .developer_context(&metadata, request.developer_context.as_deref(), &workspace)
            .await;
        let mut instructions = request.instructions;
        if self.config.runtime_profile == RuntimeProfile::NonInteractive {
            instructions.push_str("\n\n");
            instructions.push_str(NON_INTERACTIVE_NOTE);
        }
        let turn_id = active.turn_id.clone();
        self.bus
            .emit(
                thread,
                Some(&turn_id),
                RoderEvent::TurnStarted(TurnStarted {
                    thread_id: metadata.thread_id.clone(),
                    turn_id: turn_id.clone(),
                    message: request.message.clone(),
                    provider,
                    model: model.clone(),
                }),
            )
            .await?;
        self.bus
            .emit(
                thread,
                Some(&turn_id),
                RoderEvent::TranscriptItemAppended(TranscriptItemAppended {
                    thread_id: metadata.thread_id.clone(),
                    turn_id: turn_id.clone(),
                    item: TranscriptItem::UserMessage {
                        text: request.message,
                        images: request.images,
                    },
                }),
            )
            .await?;
        // The state before this turn, for a later rollback or fork.
        self.checkpoint_turn_start(thread, &metadata, &turn_id, &workspace)
            .await?;
        let sandbox = metadata
            .sandbox
            .clone()
            .or_else(|| {
                metadata
                    .runner_binding
                    .as_ref()
                    .and_then(crate::runner::binding::binding_sandbox)
            })
            .unwrap_or_else(|| self.config.sandbox.clone());
        let limits = metadata
            .profile
            .as_ref()
            .map(|profile| profile.limits.clone())
            .unwrap_or_default();
        // The smaller of the runtime's deadline and the profile's.
        let deadline_seconds = match (self.config.turn_deadline_seconds, limits.turn_deadline_s) {
            (Some(runtime), Some(profile)) => Some(runtime.min(profile)),
            (runtime, profile) => runtime.or(profile),
        };
        let profile_reasoning = metadata
            .profile
            .as_ref()
            .and_then(|profile| profile.reasoning_effort);
        let parallel_tool_calls = self.config.parallel_tool_calls_allowed(&model)
            && engine.capabilities().parallel_tool_calls;
        Ok(TurnPlan {
            thread: thread.clone(),
            turn_id,
            active,
            engine,
            model,
            instructions,
            developer_context,
            reasoning: request
                .reasoning_override
                .or(profile_reasoning)
                .or(self.config.reasoning),
            workspace,
            external_tools: metadata.external_tools,
            thread_tools: self.thread_tools.of(&thread.thread_id),
            thread_allowlist: metadata.tool_allowlist,
            mode_override: None,
            deadline: TurnDeadline::new(deadline_seconds),
            deadline_seconds,
            max_tool_calls: limits.max_tool_calls,
            tool_calls: Default::default(),
            parallel_tool_calls,
            sandbox,
            usage: Default::default(),
            writer: std::sync::Mutex::new(Some(writer)),
            deferred: Default::default(),
        })
    }

    /// Thread instructions, the turn's context and, with
    /// `file_backed_dynamic_context`, the local workspace's `AGENTS.md`.
    async fn developer_context(
        &self,
        metadata: &ThreadMetadata,
        turn_context: Option<&str>,
        workspace: &TurnWorkspace,
    ) -> Option<String> {
        let mut parts: Vec<String> = Vec::new();
        if let Some(instructions) = &metadata.developer_instructions {
            parts.push(instructions.clone());
        }
        if let Some(context) = turn_context {
            parts.push(context.to_string());
        }
        if self.config.file_backed_dynamic_context
            && let TurnWorkspace::Local(root) = workspace
            && let Some(agents) = read_agents_md(root).await
        {
            parts.push(format!("Project instructions from AGENTS.md:\n{agents}"));
        }
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }

    /// Interrupts a running turn and waits until it has ended (its terminal
    /// `TurnInterrupted` event is written and the thread accepts input).
    pub async fn interrupt_turn(
        &self,
        thread_id: impl AsRef<str>,
        turn_id: impl AsRef<str>,
    ) -> anyhow::Result<()> {
        let (thread_id, turn_id) = (thread_id.as_ref(), turn_id.as_ref());
        let thread = self.thread_state(thread_id).await?;
        let active = thread
            .active_turn()
            .filter(|active| active.turn_id == turn_id)
            .ok_or_else(|| RuntimeError::TurnNotRunning {
                thread_id: thread_id.to_string(),
                turn_id: turn_id.to_string(),
            })?;
        active.cancellation.cancel();
        loop {
            let finished = active.finished.notified();
            if active.done.load(Ordering::SeqCst) {
                return Ok(());
            }
            finished.await;
        }
    }

    /// The turn running on a thread, if any.
    pub async fn running_turn(&self, thread_id: &str) -> anyhow::Result<Option<String>> {
        Ok(self
            .thread_state(thread_id)
            .await?
            .active_turn()
            .map(|active| active.turn_id))
    }
}

async fn read_agents_md(root: &Path) -> Option<String> {
    let text = tokio::fs::read_to_string(root.join("AGENTS.md"))
        .await
        .ok()?;
    let mut end = text.len().min(AGENTS_MD_LIMIT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Some(text[..end].to_string())
}
