//! The conversation as the model sees it, item by item.

use serde::{Deserialize, Serialize};

/// One entry of a thread's transcript. The transcript is rebuilt from the
/// persisted `TranscriptItemAppended` events, so it survives restarts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TranscriptItem {
    UserMessage {
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<String>,
    },
    AssistantMessage {
        text: String,
    },
    Reasoning {
        text: String,
        /// What the provider needs back to continue from this reasoning
        /// (a Responses reasoning item with its encrypted content, an
        /// Anthropic thinking block with its signature), opaque to the
        /// runtime. Persisted with the transcript, so a thread resumed by
        /// another process sends it; engines ignore data of another format.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_data: Option<serde_json::Value>,
    },
    ToolCall {
        id: String,
        name: String,
        /// Raw JSON text exactly as the model produced it.
        arguments: String,
    },
    ToolResult {
        id: String,
        name: String,
        output: String,
        is_error: bool,
    },
}

/// Applies one persisted event to a transcript being rebuilt from a log.
///
/// Items come from `TranscriptItemAppended`, with one exception that keeps a
/// turn's answer stored once: the final answer is not appended as its own
/// item but carried by `TurnCompleted::final_message`, and becomes the
/// turn's last `AssistantMessage` here. (Logs written before that rule have
/// the answer twice; an answer equal to the message right before it is not
/// added again.)
///
/// ```
/// use roder_api::events::{RoderEvent, TurnCompleted};
/// use roder_api::transcript::{TranscriptItem, apply_event};
///
/// let mut transcript = vec![TranscriptItem::UserMessage { text: "hi".into(), images: vec![] }];
/// let done = RoderEvent::TurnCompleted(TurnCompleted {
///     thread_id: "t".into(),
///     turn_id: "u".into(),
///     final_message: Some("hello".into()),
///     usage: Default::default(),
///     thread_usage: Default::default(),
///     stop_reason: None,
///     incomplete: None,
/// });
/// apply_event(&mut transcript, &done);
/// apply_event(&mut transcript, &done);
/// assert_eq!(transcript.len(), 2);
/// assert_eq!(transcript[1], TranscriptItem::AssistantMessage { text: "hello".into() });
/// ```
pub fn apply_event(transcript: &mut Vec<TranscriptItem>, event: &crate::events::RoderEvent) {
    use crate::events::RoderEvent;
    match event {
        RoderEvent::TranscriptItemAppended(appended) => transcript.push(appended.item.clone()),
        RoderEvent::ContextCompacted(compacted) => {
            // The summary stands in for everything it replaced.
            transcript.clear();
            transcript.extend(compacted.transcript.iter().cloned());
        }
        // A rollback or a fork carries the conversation from there on.
        RoderEvent::ThreadRolledBack(rolled_back) => {
            transcript.clone_from(&rolled_back.transcript);
        }
        RoderEvent::ThreadForked(forked) => transcript.clone_from(&forked.transcript),
        RoderEvent::TurnCompleted(completed) => {
            let Some(answer) = completed
                .final_message
                .as_ref()
                .filter(|text| !text.is_empty())
            else {
                return;
            };
            let already = matches!(
                transcript.last(),
                Some(TranscriptItem::AssistantMessage { text }) if text == answer
            );
            if !already {
                transcript.push(TranscriptItem::AssistantMessage {
                    text: answer.clone(),
                });
            }
        }
        _ => {}
    }
}
