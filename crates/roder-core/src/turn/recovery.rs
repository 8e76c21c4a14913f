//! Closing a turn that a dead process left open.
//!
//! A process killed mid-turn (`kill -9`, a crash, a lost machine) leaves the
//! log ending inside a turn: tool calls announced and never answered, no
//! terminal event. The next model request built from that log would carry a
//! tool call with no result, which the model APIs reject. So the log's last
//! turn is tracked as events are loaded and appended ([`TurnTracker`]), and
//! the first writer to open the thread afterwards closes it: every open call
//! gets an error result (or, when its `ToolCallCompleted` was written before
//! the crash, its real output) and a `TurnFailed` says why.

use roder_api::approval::{ApprovalDecision, DecidedBy};
use roder_api::events::{
    ApprovalResolved, EventEnvelope, RoderEvent, ToolCallCompleted, TranscriptItemAppended,
    TurnFailed,
};
use roder_api::transcript::TranscriptItem;

/// What the log says about its last turn, kept in step with every event.
#[derive(Debug, Default, Clone)]
pub(crate) struct TurnTracker {
    open: Option<OpenTurn>,
}

/// A turn with a `TurnStarted` and no terminal event yet.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OpenTurn {
    pub turn_id: String,
    /// Tool calls in the transcript without a result, in order.
    pub calls: Vec<LoggedCall>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LoggedCall {
    pub call_id: String,
    pub tool_name: String,
    /// The outcome, when `ToolCallCompleted` reached the log.
    pub completed: Option<(String, bool)>,
    /// Whether its `ToolCallStarted` reached the log: a call without one
    /// never ran (it is written before the call runs).
    pub started: bool,
    /// The ask it was waiting on, if one was open.
    pub awaiting_approval: Option<String>,
}

/// The result text of a call whose process died while it ran.
pub(crate) const STOPPED_CALL_NOTE: &str = "the process running this tool call stopped before it finished (it was killed or crashed); its outcome is unknown and it may have changed the workspace partially";

/// The result text of a call whose process died before it ran.
pub(crate) const UNSTARTED_CALL_NOTE: &str = "the process running this turn stopped before this tool call started (it was killed or crashed); the call never ran";

/// The result text of a call whose process died while it waited for a
/// person's approval.
pub(crate) const UNAPPROVED_CALL_NOTE: &str = "the process running this turn stopped while this tool call waited for approval (it was killed or crashed); the call never ran";

impl TurnTracker {
    pub fn observe(&mut self, envelope: &EventEnvelope) {
        match &envelope.event {
            RoderEvent::TurnStarted(started) => {
                self.open = Some(OpenTurn {
                    turn_id: started.turn_id.clone(),
                    calls: Vec::new(),
                });
            }
            event if event.is_terminal() => self.open = None,
            // A thread rebuilt from its last compaction sees no TurnStarted
            // of a turn that compacted midway: the compaction says it is
            // open (between rounds, so with no call pending).
            RoderEvent::ContextCompacted(compacted) => {
                if let Some(turn_id) = &compacted.turn_id
                    && self
                        .open
                        .as_ref()
                        .is_none_or(|open| &open.turn_id != turn_id)
                {
                    self.open = Some(OpenTurn {
                        turn_id: turn_id.clone(),
                        calls: Vec::new(),
                    });
                }
            }
            RoderEvent::TranscriptItemAppended(appended) => {
                let Some(open) = self.open.as_mut() else {
                    return;
                };
                match &appended.item {
                    TranscriptItem::ToolCall { id, name, .. } => open.calls.push(LoggedCall {
                        call_id: id.clone(),
                        tool_name: name.clone(),
                        completed: None,
                        started: false,
                        awaiting_approval: None,
                    }),
                    TranscriptItem::ToolResult { id, .. } => {
                        open.calls.retain(|call| &call.call_id != id);
                    }
                    _ => {}
                }
            }
            RoderEvent::ToolCallCompleted(completed) => {
                if let Some(call) = self.call(&completed.call_id) {
                    call.completed = Some((
                        completed.output.clone().unwrap_or_default(),
                        completed.is_error,
                    ));
                }
            }
            RoderEvent::ToolCallStarted(started) => {
                if let Some(call) = self.call(&started.call_id) {
                    call.started = true;
                }
            }
            RoderEvent::ApprovalRequested(asked) => {
                if let Some(call) = self.call(&asked.call_id) {
                    call.awaiting_approval = Some(asked.approval_id.clone());
                }
            }
            RoderEvent::ApprovalResolved(resolved) => {
                if let Some(call) = self.call(&resolved.call_id) {
                    call.awaiting_approval = None;
                }
            }
            _ => {}
        }
    }

    fn call(&mut self, call_id: &str) -> Option<&mut LoggedCall> {
        self.open
            .as_mut()
            .and_then(|open| open.calls.iter_mut().find(|call| call.call_id == call_id))
    }

    /// The turn the log leaves open, if any.
    pub fn open_turn(&self) -> Option<&OpenTurn> {
        self.open.as_ref()
    }
}

/// The events that close `open` for thread `thread_id`, in order.
pub(crate) fn closing_events(thread_id: &str, open: &OpenTurn) -> Vec<RoderEvent> {
    let mut events = Vec::new();
    for call in &open.calls {
        if let Some(approval_id) = &call.awaiting_approval {
            // The ask dies with its process; the call never runs later.
            events.push(RoderEvent::ApprovalResolved(ApprovalResolved {
                thread_id: thread_id.to_string(),
                turn_id: open.turn_id.clone(),
                approval_id: approval_id.clone(),
                call_id: call.call_id.clone(),
                decision: ApprovalDecision::Reject,
                by: DecidedBy::ProcessStopped,
                message: None,
            }));
        }
        let (output, is_error) = match &call.completed {
            Some((output, is_error)) => (output.clone(), *is_error),
            None => {
                let note = if call.awaiting_approval.is_some() {
                    UNAPPROVED_CALL_NOTE
                } else if call.started {
                    STOPPED_CALL_NOTE
                } else {
                    UNSTARTED_CALL_NOTE
                };
                events.push(RoderEvent::ToolCallCompleted(ToolCallCompleted {
                    thread_id: thread_id.to_string(),
                    turn_id: open.turn_id.clone(),
                    call_id: call.call_id.clone(),
                    tool_name: Some(call.tool_name.clone()),
                    output: Some(note.to_string()),
                    is_error: true,
                    data: serde_json::Value::Null,
                    duration_ms: 0,
                }));
                (note.to_string(), true)
            }
        };
        events.push(RoderEvent::TranscriptItemAppended(TranscriptItemAppended {
            thread_id: thread_id.to_string(),
            turn_id: open.turn_id.clone(),
            item: TranscriptItem::ToolResult {
                id: call.call_id.clone(),
                name: call.tool_name.clone(),
                output,
                is_error,
            },
        }));
    }
    events.push(RoderEvent::TurnFailed(TurnFailed {
        thread_id: thread_id.to_string(),
        turn_id: open.turn_id.clone(),
        error: "the process running this turn stopped before the turn ended (it was killed or crashed); the turn was closed when the thread was next opened for writing".to_string(),
    }));
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use roder_api::events::{TurnCompleted, TurnStarted};

    fn envelope(seq: u64, event: RoderEvent) -> EventEnvelope {
        EventEnvelope {
            seq,
            timestamp: time::OffsetDateTime::UNIX_EPOCH,
            thread_id: "t".into(),
            turn_id: Some("u".into()),
            event,
        }
    }

    fn item(item: TranscriptItem) -> RoderEvent {
        RoderEvent::TranscriptItemAppended(TranscriptItemAppended {
            thread_id: "t".into(),
            turn_id: "u".into(),
            item,
        })
    }

    fn started() -> RoderEvent {
        RoderEvent::TurnStarted(TurnStarted {
            thread_id: "t".into(),
            turn_id: "u".into(),
            message: "go".into(),
            provider: "mock".into(),
            model: "mock".into(),
        })
    }

    fn call(id: &str) -> RoderEvent {
        item(TranscriptItem::ToolCall {
            id: id.into(),
            name: "exec_command".into(),
            arguments: "{}".into(),
        })
    }

    fn call_started(id: &str) -> RoderEvent {
        RoderEvent::ToolCallStarted(roder_api::events::ToolCallStarted {
            thread_id: "t".into(),
            turn_id: "u".into(),
            call_id: id.into(),
            tool_name: "exec_command".into(),
            approved_by: None,
        })
    }

    fn completed(id: &str, output: &str) -> RoderEvent {
        RoderEvent::ToolCallCompleted(ToolCallCompleted {
            thread_id: "t".into(),
            turn_id: "u".into(),
            call_id: id.into(),
            tool_name: Some("exec_command".into()),
            output: Some(output.into()),
            is_error: false,
            data: serde_json::Value::Null,
            duration_ms: 1,
        })
    }

    #[test]
    fn a_finished_turn_leaves_nothing_open() {
        let mut tracker = TurnTracker::default();
        tracker.observe(&envelope(1, started()));
        tracker.observe(&envelope(2, call("a")));
        assert!(tracker.open_turn().is_some());
        tracker.observe(&envelope(
            3,
            RoderEvent::TurnCompleted(TurnCompleted {
                thread_id: "t".into(),
                turn_id: "u".into(),
                final_message: None,
                usage: Default::default(),
                thread_usage: Default::default(),
                stop_reason: None,
                incomplete: None,
            }),
        ));
        assert_eq!(tracker.open_turn(), None);
    }

    #[test]
    fn closing_keeps_real_outputs_and_answers_every_open_call_once() {
        let mut tracker = TurnTracker::default();
        for (seq, event) in [
            started(),
            call("done"),
            call("running"),
            call("answered"),
            call_started("running"),
            completed("answered", "ok"),
            item(TranscriptItem::ToolResult {
                id: "answered".into(),
                name: "exec_command".into(),
                output: "ok".into(),
                is_error: false,
            }),
            completed("done", "real output"),
        ]
        .into_iter()
        .enumerate()
        {
            tracker.observe(&envelope(seq as u64 + 1, event));
        }
        let Some(open) = tracker.open_turn() else {
            panic!("the turn is open");
        };
        let events = closing_events("t", open);
        let results: Vec<(String, String, bool)> = events
            .iter()
            .filter_map(|event| match event {
                RoderEvent::TranscriptItemAppended(TranscriptItemAppended {
                    item:
                        TranscriptItem::ToolResult {
                            id,
                            output,
                            is_error,
                            ..
                        },
                    ..
                }) => Some((id.clone(), output.clone(), *is_error)),
                _ => None,
            })
            .collect();
        assert_eq!(
            results,
            vec![
                ("done".to_string(), "real output".to_string(), false),
                ("running".to_string(), STOPPED_CALL_NOTE.to_string(), true),
            ]
        );
        let completions: Vec<&str> = events
            .iter()
            .filter_map(|event| match event {
                RoderEvent::ToolCallCompleted(c) => Some(c.call_id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            completions,
            vec!["running"],
            "a completed call is not reported twice"
        );
        assert!(matches!(events.last(), Some(RoderEvent::TurnFailed(_))));
    }

    #[test]
    fn a_call_left_waiting_for_approval_is_closed_as_never_run() {
        let mut tracker = TurnTracker::default();
        let asked = RoderEvent::ApprovalRequested(roder_api::events::ApprovalRequested {
            thread_id: "t".into(),
            turn_id: "u".into(),
            approval_id: "ask-1".into(),
            call_id: "waiting".into(),
            tool_name: "exec_command".into(),
            effects: roder_api::approval::ToolEffects::EXECUTE,
            preview: Default::default(),
            rules: Vec::new(),
            expires_at: time::OffsetDateTime::UNIX_EPOCH,
        });
        for (seq, event) in [started(), call("waiting"), call("queued"), asked]
            .into_iter()
            .enumerate()
        {
            tracker.observe(&envelope(seq as u64 + 1, event));
        }
        let Some(open) = tracker.open_turn() else {
            panic!("the turn is open");
        };
        let events = closing_events("t", open);
        assert!(matches!(
            &events[0],
            RoderEvent::ApprovalResolved(ApprovalResolved { approval_id, by: DecidedBy::ProcessStopped, .. })
                if approval_id == "ask-1"
        ));
        let notes: Vec<(&str, &str)> = events
            .iter()
            .filter_map(|event| match event {
                RoderEvent::ToolCallCompleted(c) => {
                    Some((c.call_id.as_str(), c.output.as_deref().unwrap_or_default()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            notes,
            vec![
                ("waiting", UNAPPROVED_CALL_NOTE),
                ("queued", UNSTARTED_CALL_NOTE)
            ]
        );
    }
}
