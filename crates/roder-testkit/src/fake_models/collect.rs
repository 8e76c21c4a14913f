//! Reads an engine's event stream the way the runtime's agent loop does, so
//! engine tests check the contract the runtime relies on: deltas as they
//! stream, whole tool calls, usage, then exactly one `Completed` and
//! nothing after it; an `Err` item or `Failed` fails the request.

use futures::StreamExt;
use roder_api::inference::{
    CompletionMetadata, InferenceEvent, InferenceEventStream, ReasoningItem, TokenUsage,
    ToolCallArgumentsDelta, ToolCallCompleted,
};

/// What one model request produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CollectedResponse {
    pub text: String,
    pub reasoning: String,
    /// Finished reasoning items with their provider data, in order.
    pub reasoning_items: Vec<ReasoningItem>,
    /// Text deltas in arrival order (to check they were not merged away).
    pub text_deltas: Vec<String>,
    pub argument_deltas: Vec<ToolCallArgumentsDelta>,
    pub tool_calls: Vec<ToolCallCompleted>,
    pub usage: TokenUsage,
    pub completion: Option<CompletionMetadata>,
    /// Every event, in order.
    pub events: Vec<InferenceEvent>,
}

/// Drains `stream`. Fails on an `Err` item, on `Failed`, when the stream
/// ends without `Completed`, and when anything follows `Completed`.
pub async fn collect_response(
    mut stream: InferenceEventStream,
) -> anyhow::Result<CollectedResponse> {
    let mut response = CollectedResponse::default();
    while let Some(event) = stream.next().await {
        let event = event?;
        if response.completion.is_some() {
            anyhow::bail!("event after Completed: {event:?}");
        }
        response.events.push(event.clone());
        match event {
            InferenceEvent::MessageDelta(delta) => {
                response.text.push_str(&delta.text);
                response.text_deltas.push(delta.text);
            }
            InferenceEvent::ReasoningDelta(delta) => response.reasoning.push_str(&delta.text),
            InferenceEvent::ReasoningItem(item) => response.reasoning_items.push(item),
            InferenceEvent::ToolCallArgumentsDelta(delta) => response.argument_deltas.push(delta),
            InferenceEvent::ToolCallCompleted(call) => response.tool_calls.push(call),
            InferenceEvent::Usage(usage) => response.usage.add(&usage),
            InferenceEvent::Completed(metadata) => response.completion = Some(metadata),
            InferenceEvent::Failed(failure) => {
                anyhow::bail!("the model request failed: {}", failure.message)
            }
        }
    }
    if response.completion.is_none() {
        anyhow::bail!("the model's response stream ended before it completed");
    }
    Ok(response)
}
