//! The contract between the agent loop and a model API.
//!
//! An [`InferenceEngine`] turns one [`AgentInferenceRequest`] (instructions,
//! transcript, tools) into a stream of [`InferenceEvent`]s. Engines own their
//! wire format, retries and authentication; the runtime owns the loop.

use std::pin::Pin;
use std::time::Duration;

use futures::Stream;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::extension::InferenceEngineId;
use crate::tools::ToolSpec;
use crate::transcript::TranscriptItem;

/// What an engine can do; the runtime adapts the request to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InferenceCapabilities {
    pub streaming: bool,
    pub tool_calls: bool,
    pub parallel_tool_calls: bool,
    pub reasoning: bool,
    pub images: bool,
    pub hosted_web_search: bool,
}

impl InferenceCapabilities {
    /// Streaming text and tool calls, parallel calls allowed, no images or
    /// hosted search: what a coding agent needs from a model.
    pub fn coding_agent_default() -> Self {
        Self {
            streaming: true,
            tool_calls: true,
            parallel_tool_calls: true,
            reasoning: true,
            images: false,
            hosted_web_search: false,
        }
    }
}

/// One model an engine can serve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelDescriptor {
    pub id: String,
    #[serde(default)]
    pub display_name: Option<String>,
    #[serde(default)]
    pub context_window: Option<u64>,
}

/// How hard a reasoning model should think.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningEffort {
    Minimal,
    Low,
    Medium,
    High,
}

impl ReasoningEffort {
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::Minimal => "minimal",
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        }
    }
}

/// Provider-hosted web search (a tool the model API runs itself).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostedWebSearchConfig {
    pub enabled: bool,
}

impl HostedWebSearchConfig {
    pub fn disabled() -> Self {
        Self { enabled: false }
    }
}

/// Whether a person is watching the turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeProfile {
    /// A person drives the thread turn by turn.
    #[default]
    Interactive,
    /// Batch use (`roder exec`, evaluations): no one will answer a question.
    NonInteractive,
}

/// Retry policy for model requests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReliabilityConfig {
    /// Attempts per model request, the first included (at least 1).
    pub max_attempts: u32,
    /// Backoff before the second attempt; doubles after each failure.
    pub initial_backoff_ms: u64,
    /// Upper bound for one backoff, `Retry-After` included.
    pub max_backoff_ms: u64,
}

impl Default for ReliabilityConfig {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            initial_backoff_ms: 500,
            max_backoff_ms: 30_000,
        }
    }
}

impl ReliabilityConfig {
    /// The backoff before attempt `attempt` (1-based; attempt 1 has none).
    pub fn backoff(&self, attempt: u32) -> Duration {
        if attempt <= 1 {
            return Duration::ZERO;
        }
        let factor = 1u64.checked_shl(attempt - 2).unwrap_or(u64::MAX);
        Duration::from_millis(
            self.initial_backoff_ms
                .saturating_mul(factor)
                .min(self.max_backoff_ms),
        )
    }
}

/// Context for calls that are not part of a turn (listing models).
#[derive(Debug, Clone, Copy)]
pub struct InferenceProviderContext<'a> {
    pub reliability: &'a ReliabilityConfig,
}

/// Context of one model request inside a turn.
#[derive(Debug, Clone, Copy)]
pub struct InferenceTurnContext<'a> {
    pub thread_id: &'a str,
    pub turn_id: &'a str,
    pub reliability: &'a ReliabilityConfig,
    /// Cancelled when the turn is interrupted or its deadline passes; engines
    /// stop retrying and drop their connection.
    pub cancellation: &'a CancellationToken,
    /// The `traceparent` of this model call's span when the turn is traced:
    /// HTTP engines send it as a header.
    pub traceparent: Option<&'a str>,
}

/// Everything the model sees in one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentInferenceRequest {
    pub model: String,
    pub instructions: String,
    pub developer_context: Option<String>,
    pub transcript: Vec<TranscriptItem>,
    pub tools: Vec<ToolSpec>,
    pub parallel_tool_calls: bool,
    pub reasoning: Option<ReasoningEffort>,
    pub hosted_web_search: HostedWebSearchConfig,
}

/// Whether streamed assistant text is commentary between tool calls or the
/// final answer, where the API says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessagePhase {
    Commentary,
    FinalAnswer,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageDelta {
    pub text: String,
    pub phase: Option<MessagePhase>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasoningDelta {
    pub text: String,
}

/// A fragment of a tool call's JSON arguments as the model streams them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallArgumentsDelta {
    pub id: String,
    pub name: Option<String>,
    pub delta: String,
}

/// A whole tool call. `arguments` is the raw JSON text from the model; the
/// runtime parses it so that malformed JSON becomes a tool error result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallCompleted {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default)]
    pub cached_input_tokens: u64,
    #[serde(default)]
    pub reasoning_tokens: u64,
}

impl TokenUsage {
    pub fn add(&mut self, other: &TokenUsage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletionMetadata {
    pub stop_reason: Option<String>,
    pub provider_response_id: Option<String>,
}

/// The model request failed after the engine's own retries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InferenceFailure {
    pub message: String,
}

/// A finished piece of reasoning with what the provider needs back to
/// continue from it (`TranscriptItem::Reasoning::provider_data`). An engine
/// emits one per reasoning item or thinking block, after its deltas; the
/// runtime keeps them, in order, in the response's reasoning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasoningItem {
    /// The item's readable text (its summary), possibly empty.
    pub text: String,
    pub provider_data: serde_json::Value,
}

/// The request did not fit the model's context window. Engines return it
/// (inside the `anyhow::Error` of `stream_turn`, or as the error of a stream
/// item) so the runtime can compact the thread and retry once instead of
/// failing the turn: `error.downcast_ref::<ContextOverflow>()`.
///
/// ```
/// use roder_api::inference::ContextOverflow;
///
/// let error: anyhow::Error = ContextOverflow { message: "prompt is too long".into() }.into();
/// assert!(error.downcast_ref::<ContextOverflow>().is_some());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the request is larger than the model's context window: {message}")]
pub struct ContextOverflow {
    /// The provider's own words.
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum InferenceEvent {
    MessageDelta(MessageDelta),
    ReasoningDelta(ReasoningDelta),
    ReasoningItem(ReasoningItem),
    ToolCallArgumentsDelta(ToolCallArgumentsDelta),
    ToolCallCompleted(ToolCallCompleted),
    Usage(TokenUsage),
    Completed(CompletionMetadata),
    Failed(InferenceFailure),
}

pub type InferenceEventStream =
    Pin<Box<dyn Stream<Item = anyhow::Result<InferenceEvent>> + Send + 'static>>;

/// A model API.
#[async_trait::async_trait]
pub trait InferenceEngine: Send + Sync + 'static {
    /// The provider id threads select it by (`"openai"`, `"mock"`, ...).
    fn id(&self) -> InferenceEngineId;

    fn capabilities(&self) -> InferenceCapabilities;

    async fn list_models(
        &self,
        ctx: InferenceProviderContext<'_>,
    ) -> anyhow::Result<Vec<ModelDescriptor>>;

    /// Starts one model request. Errors before the first event (bad key,
    /// unreachable server) are returned here; errors mid-stream arrive as an
    /// `Err` item or an [`InferenceEvent::Failed`].
    async fn stream_turn(
        &self,
        ctx: InferenceTurnContext<'_>,
        request: AgentInferenceRequest,
    ) -> anyhow::Result<InferenceEventStream>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        let config = ReliabilityConfig {
            max_attempts: 10,
            initial_backoff_ms: 100,
            max_backoff_ms: 1_000,
        };
        assert_eq!(config.backoff(1), Duration::ZERO);
        assert_eq!(config.backoff(2), Duration::from_millis(100));
        assert_eq!(config.backoff(3), Duration::from_millis(200));
        assert_eq!(config.backoff(6), Duration::from_millis(1_000));
        assert_eq!(config.backoff(80), Duration::from_millis(1_000));
    }
}
