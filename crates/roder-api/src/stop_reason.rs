//! Why a model stopped, in one vocabulary for every wire format.
//!
//! Engines pass the provider's own word through
//! [`CompletionMetadata::stop_reason`](crate::inference::CompletionMetadata)
//! (`"length"`, `"max_tokens"`, `"incomplete"`, ...); the runtime reads it
//! with [`StopReason::from_provider`] so that an answer cut off by the output
//! limit or refused is never reported as a plain success, whichever API it
//! came from.

use serde::{Deserialize, Serialize};

/// Why the model stopped generating.
///
/// ```
/// use roder_api::stop_reason::StopReason;
///
/// assert_eq!(StopReason::from_provider("length"), StopReason::MaxOutputTokens);
/// assert_eq!(StopReason::from_provider("max_tokens"), StopReason::MaxOutputTokens);
/// assert_eq!(StopReason::from_provider("end_turn"), StopReason::EndTurn);
/// assert!(StopReason::from_provider("refusal").is_incomplete());
/// assert_eq!(StopReason::from_provider("weird").as_str(), "weird");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum StopReason {
    /// The model finished its answer (`stop`, `end_turn`, `completed`).
    EndTurn,
    /// The model stopped to have tools run (`tool_calls`, `tool_use`).
    ToolUse,
    /// The output-token limit cut the answer off (`length`, `max_tokens`,
    /// Responses `incomplete` with `max_output_tokens`).
    MaxOutputTokens,
    /// The model declined to answer (`refusal`).
    Refusal,
    /// The provider's content filter stopped the answer (`content_filter`).
    ContentFilter,
    /// A configured stop sequence matched (`stop_sequence`).
    StopSequence,
    /// The provider paused a long turn to be continued (`pause_turn`).
    PauseTurn,
    /// The provider said the answer is incomplete without saying why
    /// (Responses `incomplete` with no reason).
    Incomplete,
    /// A word this version does not know, kept as sent.
    Other(String),
}

impl StopReason {
    /// Classifies a provider's stop word (OpenAI Chat `finish_reason`,
    /// Responses status or incomplete reason, Anthropic `stop_reason`).
    pub fn from_provider(raw: &str) -> StopReason {
        match raw {
            "stop" | "end_turn" | "completed" | "end" => StopReason::EndTurn,
            "tool_calls" | "tool_use" | "function_call" => StopReason::ToolUse,
            "length" | "max_tokens" | "max_output_tokens" | "model_context_window_exceeded" => {
                StopReason::MaxOutputTokens
            }
            "refusal" => StopReason::Refusal,
            "content_filter" => StopReason::ContentFilter,
            "stop_sequence" => StopReason::StopSequence,
            "pause_turn" => StopReason::PauseTurn,
            "incomplete" => StopReason::Incomplete,
            other => StopReason::Other(other.to_string()),
        }
    }

    /// The canonical word, as persisted and shown.
    pub fn as_str(&self) -> &str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::ToolUse => "tool_use",
            StopReason::MaxOutputTokens => "max_output_tokens",
            StopReason::Refusal => "refusal",
            StopReason::ContentFilter => "content_filter",
            StopReason::StopSequence => "stop_sequence",
            StopReason::PauseTurn => "pause_turn",
            StopReason::Incomplete => "incomplete",
            StopReason::Other(raw) => raw,
        }
    }

    /// Whether an answer that ended this way is not the whole answer the
    /// model meant to give.
    pub fn is_incomplete(&self) -> bool {
        matches!(
            self,
            StopReason::MaxOutputTokens
                | StopReason::Refusal
                | StopReason::ContentFilter
                | StopReason::Incomplete
        )
    }
}

impl From<String> for StopReason {
    fn from(raw: String) -> Self {
        StopReason::from_provider(&raw)
    }
}

impl From<StopReason> for String {
    fn from(reason: StopReason) -> Self {
        reason.as_str().to_string()
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_words_round_trip() {
        for reason in [
            StopReason::EndTurn,
            StopReason::ToolUse,
            StopReason::MaxOutputTokens,
            StopReason::Refusal,
            StopReason::ContentFilter,
            StopReason::StopSequence,
            StopReason::PauseTurn,
            StopReason::Incomplete,
            StopReason::Other("odd".into()),
        ] {
            assert_eq!(StopReason::from_provider(reason.as_str()), reason);
            let json = serde_json::to_string(&reason).unwrap_or_default();
            assert_eq!(serde_json::from_str::<StopReason>(&json).ok(), Some(reason));
        }
    }

    #[test]
    fn only_cut_off_or_refused_answers_are_incomplete() {
        assert!(StopReason::from_provider("length").is_incomplete());
        assert!(StopReason::from_provider("content_filter").is_incomplete());
        assert!(!StopReason::from_provider("stop").is_incomplete());
        assert!(!StopReason::from_provider("tool_calls").is_incomplete());
    }
}
