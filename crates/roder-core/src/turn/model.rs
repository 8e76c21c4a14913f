//! One model request: streaming its events, publishing deltas as they
//! arrive, and assembling what the model said.
//!
//! Text is kept per phase: commentary between tool calls and the final
//! answer are separate messages, never glued together. The request's stop
//! reason is kept, and a tool call whose arguments began streaming but never
//! completed is reported as cut off instead of vanishing.

use futures::StreamExt;
use roder_api::events::{MessageDeltaEvent, ReasoningDeltaEvent, RoderEvent};
use roder_api::inference::{
    AgentInferenceRequest, InferenceEvent, InferenceTurnContext, MessagePhase, ReasoningItem,
    TokenUsage, ToolCallCompleted as ModelToolCall,
};
use roder_api::stop_reason::StopReason;
use roder_api::transcript::TranscriptItem;

use crate::trace;
use crate::turn::context::TurnContext;
use tracing::Instrument;

/// Text of one phase, as one transcript message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PhasedText {
    pub phase: Option<MessagePhase>,
    pub text: String,
}

/// A tool call the stream began but never completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CutOffCall {
    pub call_id: String,
    pub tool_name: Option<String>,
}

/// What one model request produced.
#[derive(Debug, Default)]
pub(crate) struct ModelResponse {
    pub messages: Vec<PhasedText>,
    pub reasoning: String,
    /// Finished reasoning items with what the provider needs back.
    pub reasoning_items: Vec<ReasoningItem>,
    pub tool_calls: Vec<ModelToolCall>,
    pub usage: TokenUsage,
    pub stop_reason: Option<StopReason>,
    pub cut_off_call: Option<CutOffCall>,
}

impl ModelResponse {
    /// The response's reasoning as transcript items: one per finished item
    /// the engine reported (keeping what the provider needs back), else the
    /// streamed text as one item.
    pub fn reasoning_transcript(&self) -> Vec<TranscriptItem> {
        if !self.reasoning_items.is_empty() {
            return self
                .reasoning_items
                .iter()
                .map(|item| TranscriptItem::Reasoning {
                    text: item.text.clone(),
                    provider_data: Some(item.provider_data.clone()),
                })
                .collect();
        }
        if self.reasoning.is_empty() {
            return Vec::new();
        }
        vec![TranscriptItem::Reasoning {
            text: self.reasoning.clone(),
            provider_data: None,
        }]
    }

    fn push_text(&mut self, phase: Option<MessagePhase>, text: &str) {
        match self.messages.last_mut() {
            Some(last) if last.phase == phase => last.text.push_str(text),
            _ => self.messages.push(PhasedText {
                phase,
                text: text.to_string(),
            }),
        }
    }

    /// Splits a last response's text into the commentary that goes to the
    /// transcript as messages and the answer a client shows: the
    /// final-answer text, or everything when the API marks no phases, or the
    /// last commentary when there is nothing else.
    pub fn split_answer(&self) -> (Vec<&PhasedText>, Option<String>) {
        let is_answer = |message: &PhasedText| message.phase != Some(MessagePhase::Commentary);
        let answer: String = self
            .messages
            .iter()
            .filter(|message| is_answer(message))
            .map(|message| message.text.as_str())
            .collect();
        if !answer.is_empty() {
            let commentary = self.messages.iter().filter(|m| !is_answer(m)).collect();
            return (commentary, Some(answer));
        }
        match self.messages.split_last() {
            Some((last, before)) if !last.text.is_empty() => {
                (before.iter().collect(), Some(last.text.clone()))
            }
            _ => (self.messages.iter().collect(), None),
        }
    }
}

/// Streams one model response, in its own span.
pub(crate) async fn request(
    ctx: TurnContext<'_>,
    request: AgentInferenceRequest,
) -> anyhow::Result<ModelResponse> {
    let span = trace::model_call(&ctx.plan.engine.id(), &request.model);
    if ctx.runtime.config.telemetry_capture_content
        && let Some(last) = request.transcript.last()
    {
        span.record(
            "gen_ai.prompt",
            trace::captured(&serde_json::to_string(last).unwrap_or_default()),
        );
    }
    let started = std::time::Instant::now();
    let outcome = stream_response(ctx, request, started)
        .instrument(span.clone())
        .await;
    match &outcome {
        Ok((response, first_token)) => {
            let reason = response
                .stop_reason
                .as_ref()
                .and_then(|reason| serde_json::to_value(reason).ok())
                .and_then(|reason| reason.as_str().map(str::to_string));
            trace::model_answered(&span, &response.usage, reason.as_deref(), *first_token);
            if ctx.runtime.config.telemetry_capture_content {
                let text: String = response.messages.iter().map(|m| m.text.as_str()).collect();
                span.record("gen_ai.completion", trace::captured(&text));
            }
        }
        Err(error) => trace::failed(&span, &format!("{error:#}")),
    }
    outcome.map(|(response, _)| response)
}

/// The response, and how long its first event took.
async fn stream_response(
    ctx: TurnContext<'_>,
    request: AgentInferenceRequest,
    started: std::time::Instant,
) -> anyhow::Result<(ModelResponse, Option<std::time::Duration>)> {
    let traceparent = trace::traceparent(ctx.runtime);
    let inference = InferenceTurnContext {
        thread_id: ctx.plan.thread_id(),
        turn_id: &ctx.plan.turn_id,
        reliability: &ctx.runtime.config.reliability,
        cancellation: ctx.cancellation(),
        traceparent: traceparent.as_deref(),
    };
    let mut first_token = None;
    let mut stream = ctx
        .cancellable(ctx.plan.engine.stream_turn(inference, request))
        .await?;
    let mut response = ModelResponse::default();
    // Calls whose arguments are streaming, by id, until they complete.
    let mut streaming: Vec<CutOffCall> = Vec::new();
    let mut completed = false;
    while let Some(event) = ctx.cancellable(async { Ok(stream.next().await) }).await? {
        first_token.get_or_insert_with(|| started.elapsed());
        match event? {
            InferenceEvent::MessageDelta(delta) => {
                response.push_text(delta.phase, &delta.text);
                publish(
                    ctx,
                    RoderEvent::MessageDelta(MessageDeltaEvent {
                        thread_id: ctx.thread_id(),
                        turn_id: ctx.turn_id(),
                        text: delta.text,
                        phase: delta.phase,
                    }),
                )
                .await;
            }
            InferenceEvent::ReasoningDelta(delta) => {
                response.reasoning.push_str(&delta.text);
                publish(
                    ctx,
                    RoderEvent::ReasoningDelta(ReasoningDeltaEvent {
                        thread_id: ctx.thread_id(),
                        turn_id: ctx.turn_id(),
                        text: delta.text,
                    }),
                )
                .await;
            }
            InferenceEvent::ReasoningItem(item) => response.reasoning_items.push(item),
            InferenceEvent::ToolCallArgumentsDelta(delta) => {
                if !streaming.iter().any(|call| call.call_id == delta.id) {
                    streaming.push(CutOffCall {
                        call_id: delta.id,
                        tool_name: delta.name,
                    });
                }
            }
            InferenceEvent::ToolCallCompleted(call) => {
                streaming.retain(|open| open.call_id != call.id);
                response.tool_calls.push(call);
            }
            InferenceEvent::Usage(usage) => response.usage.add(&usage),
            InferenceEvent::Completed(metadata) => {
                response.stop_reason = metadata
                    .stop_reason
                    .as_deref()
                    .map(StopReason::from_provider);
                completed = true;
                break;
            }
            InferenceEvent::Failed(failure) => {
                anyhow::bail!("the model request failed: {}", failure.message)
            }
        }
    }
    if !completed {
        anyhow::bail!("the model's response stream ended before it completed");
    }
    response.cut_off_call = streaming.into_iter().next();
    Ok((response, first_token))
}

async fn publish(ctx: TurnContext<'_>, event: RoderEvent) {
    ctx.runtime
        .bus
        .publish_transient(&ctx.plan.thread, Some(&ctx.plan.turn_id), event)
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_are_kept_apart_and_the_answer_is_the_final_phase() {
        let mut response = ModelResponse::default();
        response.push_text(Some(MessagePhase::Commentary), "Let me ");
        response.push_text(Some(MessagePhase::Commentary), "look.");
        response.push_text(Some(MessagePhase::FinalAnswer), "Done.");
        assert_eq!(response.messages.len(), 2);
        assert_eq!(response.messages[0].text, "Let me look.");
        let (commentary, answer) = response.split_answer();
        assert_eq!(commentary, vec![&response.messages[0]]);
        assert_eq!(answer.as_deref(), Some("Done."));
    }

    #[test]
    fn without_phases_everything_is_the_answer() {
        let mut response = ModelResponse::default();
        response.push_text(None, "a");
        response.push_text(None, "b");
        assert_eq!(response.split_answer(), (vec![], Some("ab".to_string())));
        let mut commentary_only = ModelResponse::default();
        commentary_only.push_text(Some(MessagePhase::Commentary), "thinking aloud");
        assert_eq!(
            commentary_only.split_answer(),
            (vec![], Some("thinking aloud".to_string()))
        );
        assert_eq!(ModelResponse::default().split_answer(), (vec![], None));
    }
}
