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

    pub fn cancellation(&self) -> &CancellationToken {
        &self.plan.active.cancellation
    }

    /// Numbers, persists and publishes one event of the turn.
    pub async fn emit(&self, event: RoderEvent) -> anyhow::Result<()> {
        self.runtime
            .bus
            .emit(&self.plan.thread, Some(&self.plan.turn_id), event)
            .await
            .map(|_| ())
    }

    /// Appends `item` to the thread's transcript (an event like any other).
    pub async fn append(&self, item: TranscriptItem) -> anyhow::Result<()> {
        self.emit(RoderEvent::TranscriptItemAppended(TranscriptItemAppended {
            thread_id: self.thread_id(),
            turn_id: self.turn_id(),
            item,
        }))
        .await
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
