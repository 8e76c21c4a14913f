//! Manual compaction: [`Runtime::compact_thread`].
//!
//! Between turns, a client may ask for a thread to be compacted now (the
//! app server's `thread/compact`, `roder threads compact ID`). It is a write
//! like a turn: refused while a turn runs (here, or in another process
//! through the writer lease), and a transaction: nothing is written unless
//! the new transcript is complete.

use roder_api::events::{CompactionTrigger, ContextCompacted, RoderEvent, UsageUpdated};
use roder_api::inference::{AgentInferenceRequest, InferenceTurnContext, TokenUsage};

use crate::runner::state::update_metadata;
use crate::runtime::Runtime;
use crate::threads::ThreadState;
use crate::turn::compaction::{self, CompactionInput, Limits};

impl Runtime {
    /// Compacts a thread now and returns the `ContextCompacted` event it
    /// wrote. Refused with [`RuntimeError::ThreadBusy`] while a turn runs
    /// (nothing is written); fails, writing nothing, when there is nothing to
    /// compact or the model's summary is no shorter than the history.
    ///
    /// The summary's token usage counts as the thread's (a `UsageUpdated`
    /// event under the compaction's own id, and the thread's metadata).
    pub async fn compact_thread(&self, thread_id: &str) -> anyhow::Result<ContextCompacted> {
        let thread = self.thread_state(thread_id).await?;
        let metadata = self.thread_metadata(thread_id).await?;
        let provider = metadata
            .provider
            .clone()
            .unwrap_or_else(|| self.config.default_provider.clone());
        let engine = self.engine(&provider)?;
        let model = metadata
            .model
            .clone()
            .unwrap_or_else(|| self.config.default_model.clone());
        let compaction_id = format!("compaction-{}", uuid::Uuid::new_v4());
        let active = thread.claim_new(compaction_id.clone())?;
        // Freed however this ends, a dropped future included.
        let _claim = Claim {
            thread: &thread,
            id: &compaction_id,
        };
        async {
            let writer = self.open_writer(&thread).await?;
            let (mut transcript, last_seq) = {
                let cursor = thread.log.lock().await;
                (cursor.transcript.clone(), cursor.next_seq.saturating_sub(1))
            };
            compaction::cap_tool_outputs(&mut transcript, self.config.tool_output_cap_bytes);
            let tools = self
                .tools
                .specs()
                .into_iter()
                .chain(metadata.external_tools.iter().cloned())
                .chain(
                    self.thread_tools
                        .of(thread_id)
                        .executors()
                        .map(|tool| tool.spec()),
                )
                .collect();
            let request = AgentInferenceRequest {
                model: model.clone(),
                instructions: crate::default_instructions(),
                developer_context: metadata.developer_instructions.clone(),
                transcript,
                tools,
                parallel_tool_calls: false,
                reasoning: self.config.reasoning,
                hosted_web_search: self.config.hosted_web_search.clone(),
            };
            let current = compaction::estimate_tokens(&request);
            let limits = Limits::resolve(
                self.config.auto_compact_token_limit,
                &engine,
                &model,
                &self.config.reliability,
            )
            .await;
            // Asked for now: aim at half of what the thread is, or of the
            // threshold when the thread is over it.
            let threshold = limits
                .threshold
                .map_or(current, |threshold| threshold.min(current));
            let input = CompactionInput {
                engine: engine.as_ref(),
                context: InferenceTurnContext {
                    thread_id,
                    turn_id: &compaction_id,
                    reliability: &self.config.reliability,
                    cancellation: &active.cancellation,
                    traceparent: None,
                },
                request,
                threshold,
                // Without a known threshold the thread's requests were sent
                // whole: its history fits one summary request.
                request_budget: limits.threshold.unwrap_or(u64::MAX / 8),
                trigger: CompactionTrigger::Manual,
                last_seq,
                turn_id: None,
            };
            let done = compaction::compact(input).await?;
            let recorded = {
                let mut cursor = thread.log.lock().await;
                if done.usage != TokenUsage::default() {
                    self.bus
                        .emit_locked(
                            &mut cursor,
                            thread_id,
                            None,
                            RoderEvent::UsageUpdated(UsageUpdated {
                                thread_id: thread_id.to_string(),
                                turn_id: compaction_id.clone(),
                                usage: done.usage.clone(),
                                turn_total: done.usage.clone(),
                            }),
                        )
                        .await?;
                }
                let recorded = self
                    .bus
                    .emit_locked(
                        &mut cursor,
                        thread_id,
                        None,
                        RoderEvent::ContextCompacted(done.event),
                    )
                    .await?;
                writer.release_locked(&mut cursor);
                recorded
            };
            update_metadata(self.store.as_ref(), &thread, |metadata| {
                metadata.usage.add(&done.usage);
                metadata.last_compaction_seq = Some(recorded.seq);
            })
            .await?;
            match recorded.event {
                RoderEvent::ContextCompacted(compacted) => anyhow::Ok(compacted),
                other => anyhow::bail!("internal error: recorded {other:?} for a compaction"),
            }
        }
        .await
    }
}

/// The thread claimed for a compaction, released on drop.
struct Claim<'a> {
    thread: &'a ThreadState,
    id: &'a str,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.thread.release(self.id);
    }
}
