//! The event bus vocabulary: every meaningful transition of a thread.
//!
//! Each event travels in an [`EventEnvelope`] numbered by a per-thread `seq`
//! (1, 2, 3, ...), and is appended to the thread's persisted log before it is
//! broadcast, so a client that reads the log after a cursor and then follows
//! the bus misses nothing.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::inference::{MessagePhase, TokenUsage};
use crate::remote_runner::RunnerSessionState;
use crate::stop_reason::StopReason;
use crate::transcript::TranscriptItem;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventEnvelope {
    /// Position in the thread's log, starting at 1 and without gaps.
    pub seq: u64,
    #[serde(with = "time::serde::rfc3339")]
    pub timestamp: OffsetDateTime,
    pub thread_id: String,
    pub turn_id: Option<String>,
    pub event: RoderEvent,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RoderEvent {
    ThreadCreated(ThreadCreated),
    TurnStarted(TurnStarted),
    InferenceStarted(InferenceStarted),
    MessageDelta(MessageDeltaEvent),
    ReasoningDelta(ReasoningDeltaEvent),
    UsageUpdated(UsageUpdated),
    TranscriptItemAppended(TranscriptItemAppended),
    ToolCallRequested(ToolCallRequested),
    ToolCallStarted(ToolCallStarted),
    ToolCallCompleted(ToolCallCompleted),
    ExternalToolCallRequested(ExternalToolCallRequested),
    ExternalToolCallResolved(ExternalToolCallResolved),
    FileChangePreviewReady(FileChangePreviewReady),
    RunnerLifecycle(RunnerLifecycle),
    ContextCompacted(ContextCompacted),
    TurnCompleted(TurnCompleted),
    TurnFailed(TurnFailed),
    TurnInterrupted(TurnInterrupted),
    TurnDeadlineExceeded(TurnDeadlineExceeded),
    WorkspaceCheckpointed(crate::checkpoint::WorkspaceCheckpointed),
    WorkspaceCheckpointFailed(crate::checkpoint::WorkspaceCheckpointFailed),
    ThreadRolledBack(crate::checkpoint::ThreadRolledBack),
    ThreadForked(crate::checkpoint::ThreadForked),
    ThreadToolsStarted(ThreadToolsStarted),
    ApprovalRequested(ApprovalRequested),
    ApprovalResolved(ApprovalResolved),
}

impl RoderEvent {
    /// Whether this event is broadcast only, never persisted: streamed
    /// fragments whose whole text the log receives in a later
    /// `TranscriptItemAppended`. A transient event carries the `seq` of the
    /// persisted event before it, so a client that drops repeated `seq`s must
    /// apply that rule to persisted events only.
    ///
    /// ```
    /// use roder_api::events::{MessageDeltaEvent, RoderEvent};
    ///
    /// let delta = RoderEvent::MessageDelta(MessageDeltaEvent {
    ///     thread_id: "t".into(),
    ///     turn_id: "u".into(),
    ///     text: "Hel".into(),
    ///     phase: None,
    /// });
    /// assert!(delta.is_transient());
    /// ```
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            RoderEvent::MessageDelta(_) | RoderEvent::ReasoningDelta(_)
        )
    }

    /// Whether this event ends a turn.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            RoderEvent::TurnCompleted(_)
                | RoderEvent::TurnFailed(_)
                | RoderEvent::TurnInterrupted(_)
                | RoderEvent::TurnDeadlineExceeded(_)
        )
    }
}

/// Tool sources a client declared for the thread were started (by the
/// factory `factory`): which are ready, which failed and why, which start in
/// the thread's runner. Their tools are offered to this thread's turns while
/// this process holds them; a later `ThreadToolsStarted` of the same factory
/// replaces them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadToolsStarted {
    pub thread_id: String,
    pub factory: String,
    pub sources: Vec<crate::thread_tools::ToolSourceStatus>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadCreated {
    pub thread_id: String,
    pub workspace: String,
    pub runner_provider_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnStarted {
    pub thread_id: String,
    pub turn_id: String,
    pub message: String,
    pub provider: String,
    pub model: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InferenceStarted {
    pub thread_id: String,
    pub turn_id: String,
    /// 1 for the turn's first model request, then 2, 3, ...
    pub round: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageDeltaEvent {
    pub thread_id: String,
    pub turn_id: String,
    pub text: String,
    pub phase: Option<MessagePhase>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasoningDeltaEvent {
    pub thread_id: String,
    pub turn_id: String,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageUpdated {
    pub thread_id: String,
    pub turn_id: String,
    /// Usage of the model request that just finished.
    pub usage: TokenUsage,
    /// Usage of the whole turn so far.
    pub turn_total: TokenUsage,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TranscriptItemAppended {
    pub thread_id: String,
    pub turn_id: String,
    pub item: TranscriptItem,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallRequested {
    pub thread_id: String,
    pub turn_id: String,
    pub call_id: String,
    pub tool_name: String,
    /// Raw JSON text from the model.
    pub arguments: String,
    /// What the tool declares it does (`None`: no such tool, or a log from
    /// before tools declared effects).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effects: Option<crate::approval::ToolEffects>,
}

/// A call is about to run: whatever decided it (the mode, a rule, a person)
/// is recorded here, in the log, before it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallStarted {
    pub thread_id: String,
    pub turn_id: String,
    pub call_id: String,
    pub tool_name: String,
    /// Who let it run (`None` in logs from before approvals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<crate::approval::DecidedBy>,
}

/// A call waits for a person's decision. Persisted before anyone is asked,
/// with everything they need to decide: the call's effects, its preview and
/// the rules that `allow_thread` or `allow_always` would keep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequested {
    pub thread_id: String,
    pub turn_id: String,
    /// Answer with `Runtime::resolve_approval(approval_id, ..)`.
    pub approval_id: String,
    pub call_id: String,
    pub tool_name: String,
    pub effects: crate::approval::ToolEffects,
    pub preview: crate::approval::CallPreview,
    /// What `allow_thread` / `allow_always` would keep (and `reject_always`
    /// deny). Empty: the call cannot be described by a rule (an opaque
    /// command line), so those decisions act once.
    #[serde(default)]
    pub rules: Vec<crate::approval::ApprovalRule>,
    /// When the ask times out and the call is rejected.
    #[serde(with = "time::serde::rfc3339")]
    pub expires_at: OffsetDateTime,
}

/// An ask was settled: by whom, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalResolved {
    pub thread_id: String,
    pub turn_id: String,
    pub approval_id: String,
    pub call_id: String,
    pub decision: crate::approval::ApprovalDecision,
    pub by: crate::approval::DecidedBy,
    /// The person's message, passed to the model with a rejection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallCompleted {
    pub thread_id: String,
    pub turn_id: String,
    pub call_id: String,
    pub tool_name: Option<String>,
    pub output: Option<String>,
    pub is_error: bool,
    #[serde(default)]
    pub data: serde_json::Value,
    pub duration_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalToolCallRequested {
    /// Pass this to `resolve_external_tool_call`.
    pub request_id: String,
    pub thread_id: String,
    pub turn_id: String,
    pub call_id: String,
    pub tool_name: String,
    pub arguments: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalToolCallResolved {
    pub request_id: String,
    pub thread_id: String,
    pub turn_id: String,
    pub is_error: bool,
}

/// A local file change a tool made, with its diff, for clients that show
/// edits as they happen. Never emitted for runner-bound or refused calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChangePreviewReady {
    pub thread_id: String,
    pub turn_id: String,
    pub call_id: String,
    pub path: String,
    pub diff: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunnerLifecycleAction {
    Provisioning,
    Created,
    Resumed,
    ProvisioningFailed,
    Paused,
    /// Stopped while idle (`on_idle = "stop"`); the next use starts it.
    Stopped,
    Woken,
    Detached,
    Rejoined,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnerLifecycle {
    pub thread_id: String,
    pub provider_id: String,
    pub action: RunnerLifecycleAction,
    pub state: Option<RunnerSessionState>,
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnCompleted {
    pub thread_id: String,
    pub turn_id: String,
    pub final_message: Option<String>,
    pub usage: TokenUsage,
    /// Why the model stopped on its last request, when the engine said.
    #[serde(default)]
    pub stop_reason: Option<StopReason>,
    /// Usage of the thread so far, this turn included.
    #[serde(default)]
    pub thread_usage: TokenUsage,
    /// Set when the answer is not whole: cut off by the output limit,
    /// refused, or ending in a tool call whose arguments were cut off. A
    /// client must not present such a turn as a plain success.
    #[serde(default)]
    pub incomplete: Option<IncompleteAnswer>,
}

/// The thread's context was compacted: later requests carry `transcript`
/// (the instructions are added per request) instead of everything before.
/// The full history stays in the log; rebuilding a transcript replaces what
/// came before this event with `transcript`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextCompacted {
    pub thread_id: String,
    /// The turn that compacted, `None` for a manual compaction between turns.
    #[serde(default)]
    pub turn_id: Option<String>,
    /// The model's summary of what was replaced.
    pub summary: String,
    /// The transcript from here on: the summary as a message, the recent
    /// user messages and the most recent items that fit the budget.
    pub transcript: Vec<TranscriptItem>,
    /// The seq of the last event whose items the summary replaced.
    pub replaced_through_seq: u64,
    /// Items replaced by the summary (dropped from later requests).
    pub replaced_items: u64,
    /// Estimated tokens before and after (bytes / 4).
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// `auto` (a threshold was crossed), `overflow` (the provider refused
    /// the request as too long) or `manual`.
    pub trigger: CompactionTrigger,
    /// The thread's token usage through the events before this one, so a
    /// thread can be reopened from its last compaction without reading the
    /// log before it. `None` in logs written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_usage: Option<crate::inference::TokenUsage>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionTrigger {
    Auto,
    Overflow,
    Manual,
}

/// Why a completed turn's answer is not the whole answer.
///
/// ```
/// use roder_api::events::IncompleteAnswer;
///
/// let cut = IncompleteAnswer::ToolCallTruncated { call_id: "c1".into(), tool_name: Some("write_file".into()) };
/// assert_eq!(cut.describe(), "the model's output limit cut off the arguments of tool call c1 (write_file)");
/// assert_eq!(IncompleteAnswer::Refusal.describe(), "the model refused to answer");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum IncompleteAnswer {
    /// The output-token limit cut the answer off.
    MaxOutputTokens,
    /// The model declined; its refusal text is the final message.
    Refusal,
    /// The provider's content filter stopped the answer.
    ContentFilter,
    /// The provider said the answer is incomplete without saying why.
    Unspecified,
    /// The output limit cut a tool call off mid-arguments: it was not run.
    ToolCallTruncated {
        call_id: String,
        #[serde(default)]
        tool_name: Option<String>,
    },
}

impl IncompleteAnswer {
    /// One line for a person (`roder exec` prints it on stderr).
    pub fn describe(&self) -> String {
        match self {
            IncompleteAnswer::MaxOutputTokens => {
                "the model's output limit cut the answer off".to_string()
            }
            IncompleteAnswer::Refusal => "the model refused to answer".to_string(),
            IncompleteAnswer::ContentFilter => {
                "the provider's content filter stopped the answer".to_string()
            }
            IncompleteAnswer::Unspecified => {
                "the provider reported the answer incomplete without a reason".to_string()
            }
            IncompleteAnswer::ToolCallTruncated { call_id, tool_name } => match tool_name {
                Some(name) => format!(
                    "the model's output limit cut off the arguments of tool call {call_id} ({name})"
                ),
                None => {
                    format!("the model's output limit cut off the arguments of tool call {call_id}")
                }
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnFailed {
    pub thread_id: String,
    pub turn_id: String,
    pub error: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnInterrupted {
    pub thread_id: String,
    pub turn_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnDeadlineExceeded {
    pub thread_id: String,
    pub turn_id: String,
    pub deadline_seconds: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_round_trips_as_tagged_json() {
        let envelope = EventEnvelope {
            seq: 7,
            timestamp: OffsetDateTime::UNIX_EPOCH,
            thread_id: "t".to_string(),
            turn_id: Some("u".to_string()),
            event: RoderEvent::TurnInterrupted(TurnInterrupted {
                thread_id: "t".to_string(),
                turn_id: "u".to_string(),
            }),
        };
        let json = serde_json::to_value(&envelope).unwrap();
        assert_eq!(json["event"]["type"], "turn_interrupted");
        assert_eq!(json["timestamp"], "1970-01-01T00:00:00Z");
        let back: EventEnvelope = serde_json::from_value(json).unwrap();
        assert_eq!(back, envelope);
        assert!(back.event.is_terminal());
    }
}
