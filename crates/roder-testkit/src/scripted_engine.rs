//! An inference engine that plays a script: one batch of events per model
//! request, recording every request it receives.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use roder_api::catalog::PROVIDER_MOCK;
use roder_api::extension::InferenceEngineId;
use roder_api::inference::{
    AgentInferenceRequest, CompletionMetadata, InferenceCapabilities, InferenceEngine,
    InferenceEvent, InferenceEventStream, InferenceProviderContext, InferenceTurnContext,
    MessageDelta, ModelDescriptor, ToolCallCompleted,
};
use tokio::sync::Notify;

/// One model response of the script.
#[derive(Debug, Clone)]
pub enum ScriptedRound {
    /// Stream these events, then end the stream.
    Events(Vec<InferenceEvent>),
    /// Never answer (until the turn drops the stream): for interrupt and
    /// deadline tests.
    Hang,
    /// Fail the request before any event.
    Fail(String),
}

/// A tool call event.
pub fn tool_call(id: &str, name: &str, arguments: &str) -> InferenceEvent {
    InferenceEvent::ToolCallCompleted(ToolCallCompleted {
        id: id.to_string(),
        name: name.to_string(),
        arguments: arguments.to_string(),
    })
}

/// A response calling `calls` (id, name, JSON arguments).
pub fn tool_round(calls: &[(&str, &str, &str)]) -> ScriptedRound {
    let mut events: Vec<InferenceEvent> = calls
        .iter()
        .map(|(id, name, arguments)| tool_call(id, name, arguments))
        .collect();
    events.push(completed("tool_calls"));
    ScriptedRound::Events(events)
}

/// A final text answer.
pub fn final_round(text: &str) -> ScriptedRound {
    ScriptedRound::Events(vec![
        InferenceEvent::MessageDelta(MessageDelta {
            text: text.to_string(),
            phase: None,
        }),
        completed("stop"),
    ])
}

fn completed(stop_reason: &str) -> InferenceEvent {
    InferenceEvent::Completed(CompletionMetadata {
        stop_reason: Some(stop_reason.to_string()),
        provider_response_id: Some(format!("scripted-{stop_reason}")),
    })
}

pub struct ScriptedEngine {
    id: String,
    capabilities: InferenceCapabilities,
    rounds: Mutex<VecDeque<ScriptedRound>>,
    requests: Mutex<Vec<AgentInferenceRequest>>,
    request_started: Arc<Notify>,
}

impl ScriptedEngine {
    /// An engine with id `mock` that plays `rounds`, then answers "done".
    pub fn new(rounds: Vec<ScriptedRound>) -> Arc<Self> {
        Arc::new(Self::build(PROVIDER_MOCK, rounds))
    }

    pub fn with_id(id: &str, rounds: Vec<ScriptedRound>) -> Arc<Self> {
        Arc::new(Self::build(id, rounds))
    }

    fn build(id: &str, rounds: Vec<ScriptedRound>) -> Self {
        Self {
            id: id.to_string(),
            capabilities: InferenceCapabilities::coding_agent_default(),
            rounds: Mutex::new(rounds.into()),
            requests: Mutex::new(Vec::new()),
            request_started: Arc::new(Notify::new()),
        }
    }

    pub fn push_round(&self, round: ScriptedRound) {
        lock(&self.rounds).push_back(round);
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<AgentInferenceRequest> {
        lock(&self.requests).clone()
    }

    /// Waits until the engine has received at least `count` requests.
    pub async fn wait_for_requests(&self, count: usize) {
        loop {
            let started = self.request_started.notified();
            if lock(&self.requests).len() >= count {
                return;
            }
            started.await;
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[async_trait::async_trait]
impl InferenceEngine for ScriptedEngine {
    fn id(&self) -> InferenceEngineId {
        self.id.clone()
    }

    fn capabilities(&self) -> InferenceCapabilities {
        self.capabilities.clone()
    }

    async fn list_models(
        &self,
        _ctx: InferenceProviderContext<'_>,
    ) -> anyhow::Result<Vec<ModelDescriptor>> {
        Ok(vec![ModelDescriptor {
            id: "mock".to_string(),
            display_name: Some("Scripted mock".to_string()),
            context_window: None,
        }])
    }

    async fn stream_turn(
        &self,
        _ctx: InferenceTurnContext<'_>,
        request: AgentInferenceRequest,
    ) -> anyhow::Result<InferenceEventStream> {
        lock(&self.requests).push(request);
        let round = lock(&self.rounds)
            .pop_front()
            .unwrap_or_else(|| final_round("done"));
        self.request_started.notify_waiters();
        match round {
            ScriptedRound::Events(events) => {
                Ok(futures::stream::iter(events.into_iter().map(Ok)).boxed())
            }
            ScriptedRound::Hang => Ok(futures::stream::pending().boxed()),
            ScriptedRound::Fail(message) => Err(anyhow::anyhow!(message)),
        }
    }
}
