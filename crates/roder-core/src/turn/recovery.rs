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

use roder_api::events::{
    EventEnvelope, RoderEvent, ToolCallCompleted, TranscriptItemAppended, TurnFailed,
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
}

/// The result text of a call whose process died while it ran.
pub(crate) const STOPPED_CALL_NOTE: &str = "the process running this tool call stopped before it finished (it was killed or crashed); its outcome is unknown and it may have changed the workspace partially";

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
                    }),
                    TranscriptItem::ToolResult { id, .. } => {
                        open.calls.retain(|call| &call.call_id != id);
                    }
                    _ => {}
                }
            }
            RoderEvent::ToolCallCompleted(completed) => {
                if let Some(call) = self.open.as_mut().and_then(|open| {
                    open.calls
                        .iter_mut()
                        .find(|call| call.call_id == completed.call_id)
                }) {
                    call.completed = Some((
                        completed.output.clone().unwrap_or_default(),
                        completed.is_error,
                    ));
                }
            }
            _ => {}
        }
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
        let (output, is_error) = match &call.completed {
            Some((output, is_error)) => (output.clone(), *is_error),
            None => {
                events.push(RoderEvent::ToolCallCompleted(ToolCallCompleted {
                    thread_id: thread_id.to_string(),
                    turn_id: open.turn_id.clone(),
                    call_id: call.call_id.clone(),
                    tool_name: Some(call.tool_name.clone()),
                    output: Some(STOPPED_CALL_NOTE.to_string()),
                    is_error: true,
                    data: serde_json::Value::Null,
                    duration_ms: 0,
                }));
                (STOPPED_CALL_NOTE.to_string(), true)
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
}
