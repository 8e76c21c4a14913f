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
