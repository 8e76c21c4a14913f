//! What every part of a running turn shares: the runtime, the plan, and the
//! two things they all do — emit the turn's events and stop waiting when the
//! turn is cancelled.
//!
//! The loop (`round`), tool calls (`tool_call`) and routing (`routing`) all
//! take a [`TurnContext`]; none of them imports another for these.

use std::future::Future;

use roder_api::events::{RoderEvent, TranscriptItemAppended};
use roder_api::transcript::TranscriptItem;
use tokio_util::sync::CancellationToken;

use crate::runtime::Runtime;
use crate::turn::plan::TurnPlan;

/// Whether an event goes out now or with the next one
/// ([`TurnContext::defer`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Emit {
    Now,
    Deferred,
}

#[derive(Clone, Copy)]
pub(crate) struct TurnContext<'a> {
    pub runtime: &'a Runtime,
    pub plan: &'a TurnPlan,
}

impl<'a> TurnContext<'a> {
    pub fn new(runtime: &'a Runtime, plan: &'a TurnPlan) -> Self {
        Self { runtime, plan }
    }

    pub fn thread_id(&self) -> String {
        self.plan.thread_id().to_string()
    }

    pub fn turn_id(&self) -> String {
        self.plan.turn_id.clone()
    }

    /// What the tool `name` declares it does (`None`: no such tool, or one
    /// the client resolves itself).
    pub fn tool_effects(&self, name: &str) -> Option<roder_api::approval::ToolEffects> {
        self.plan
            .thread_tools
            .get(name)
            .or_else(|| self.runtime.tools.get(name))
            .map(|tool| tool.effects())
    }

    /// The approval mode a call made now runs under.
    pub fn mode(&self) -> roder_api::policy_mode::PolicyMode {
        self.plan.mode_over(self.runtime.config.policy_mode)
    }

    pub fn cancellation(&self) -> &CancellationToken {
        &self.plan.active.cancellation
    }

    /// Numbers, persists and publishes one event of the turn, after the
    /// events deferred before it, all in one append.
    pub async fn emit(&self, event: RoderEvent) -> anyhow::Result<()> {
        let mut events = self.plan.take_deferred();
        events.push(event);
        self.emit_all(events).await
    }

    /// Queues `event` to go out with the turn's next emitted event (or
    /// [`flush`](Self::flush)), in the same order and one store append.
    ///
    /// Why: a tool step's events come in two bursts (the model's call, its
    /// request and start; then its completion, result and the next round's
    /// start), and one append per burst instead of per event is most of
    /// what the runtime costs per step. Only for events followed at once by
    /// another emit: nothing a client waits on or that acts on the world
    /// (a tool's execution, a model request) may come between.
    pub fn defer(&self, event: RoderEvent) {
        self.plan.defer(event);
    }

    /// Appends `item` to the thread's transcript (an event like any other).
    pub async fn append(&self, item: TranscriptItem) -> anyhow::Result<()> {
        self.emit(self.transcript_event(item)).await
    }

    /// [`append`](Self::append), [deferred](Self::defer).
    pub fn defer_append(&self, item: TranscriptItem) {
        self.defer(self.transcript_event(item));
    }

    /// Emits what was deferred, if anything.
    pub async fn flush(&self) -> anyhow::Result<()> {
        self.emit_all(self.plan.take_deferred()).await
    }

    async fn emit_all(&self, events: Vec<RoderEvent>) -> anyhow::Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        self.runtime
            .bus
            .emit_all(&self.plan.thread, Some(&self.plan.turn_id), events)
            .await
            .map(|_| ())
    }

    fn transcript_event(&self, item: TranscriptItem) -> RoderEvent {
        RoderEvent::TranscriptItemAppended(TranscriptItemAppended {
            thread_id: self.thread_id(),
            turn_id: self.turn_id(),
            item,
        })
    }

    /// Runs `work` unless the turn is cancelled first: a model that stops
    /// streaming or a provisioning that hangs must not hold an interrupted
    /// turn for its grace period.
    pub async fn cancellable<T>(
        &self,
        work: impl Future<Output = anyhow::Result<T>>,
    ) -> anyhow::Result<T> {
        tokio::select! {
            biased;
            _ = self.cancellation().cancelled() => anyhow::bail!("the turn was cancelled"),
            result = work => result,
        }
    }
}
