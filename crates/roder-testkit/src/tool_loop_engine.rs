//! An engine that calls one tool a fixed number of times per turn, then
//! answers. It decides from each request's transcript, so any number of
//! concurrent turns can share it (unlike `ScriptedEngine`, whose rounds are
//! one queue for the whole runtime).

use futures::StreamExt;
use roder_api::catalog::PROVIDER_MOCK;
use roder_api::extension::InferenceEngineId;
use roder_api::inference::{
    AgentInferenceRequest, CompletionMetadata, InferenceCapabilities, InferenceEngine,
    InferenceEvent, InferenceEventStream, InferenceProviderContext, InferenceTurnContext,
    MessageDelta, ModelDescriptor, ToolCallCompleted,
};
use roder_api::transcript::TranscriptItem;

pub struct ToolLoopEngine {
    tool: String,
    arguments: String,
    calls: usize,
    answer: String,
}

impl ToolLoopEngine {
    /// Each turn: `calls` calls of `tool` with `arguments` (JSON), one per
    /// model request, then the text `answer`.
    pub fn new(tool: &str, arguments: &str, calls: usize, answer: &str) -> Self {
        Self {
            tool: tool.to_string(),
            arguments: arguments.to_string(),
            calls,
            answer: answer.to_string(),
        }
    }
}

/// Tool results since the turn's user message.
fn results_this_turn(transcript: &[TranscriptItem]) -> usize {
    transcript
        .iter()
        .rev()
        .take_while(|item| !matches!(item, TranscriptItem::UserMessage { .. }))
        .filter(|item| matches!(item, TranscriptItem::ToolResult { .. }))
        .count()
}

#[async_trait::async_trait]
impl InferenceEngine for ToolLoopEngine {
    fn id(&self) -> InferenceEngineId {
        PROVIDER_MOCK.to_string()
    }

    fn capabilities(&self) -> InferenceCapabilities {
        InferenceCapabilities::coding_agent_default()
    }

    async fn list_models(
        &self,
        _ctx: InferenceProviderContext<'_>,
    ) -> anyhow::Result<Vec<ModelDescriptor>> {
        Ok(vec![ModelDescriptor {
            id: "mock".to_string(),
            display_name: None,
            context_window: None,
        }])
    }

    async fn stream_turn(
        &self,
        _ctx: InferenceTurnContext<'_>,
        request: AgentInferenceRequest,
    ) -> anyhow::Result<InferenceEventStream> {
        let done = results_this_turn(&request.transcript);
        let (event, stop) = if done < self.calls {
            let call = InferenceEvent::ToolCallCompleted(ToolCallCompleted {
                id: format!("call-{done}"),
                name: self.tool.clone(),
                arguments: self.arguments.clone(),
            });
            (call, "tool_calls")
        } else {
            let text = InferenceEvent::MessageDelta(MessageDelta {
                text: self.answer.clone(),
                phase: None,
            });
            (text, "stop")
        };
        let completed = InferenceEvent::Completed(CompletionMetadata {
            stop_reason: Some(stop.to_string()),
            provider_response_id: None,
        });
        Ok(futures::stream::iter([Ok(event), Ok(completed)]).boxed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_results_after_the_last_user_message_count() {
        let result = || TranscriptItem::ToolResult {
            id: "c".to_string(),
            name: "t".to_string(),
            output: String::new(),
            is_error: false,
        };
        let user = || TranscriptItem::UserMessage {
            text: "go".to_string(),
            images: Vec::new(),
        };
        assert_eq!(results_this_turn(&[user(), result(), result()]), 2);
        assert_eq!(results_this_turn(&[result(), user(), result()]), 1);
        assert_eq!(results_this_turn(&[result(), user()]), 0);
    }
}
