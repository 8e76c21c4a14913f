//! What the server pushes: runtime events of subscribed threads, and the
//! data of the "client lagged" error.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Method name of the notification that carries one runtime event.
pub const THREAD_EVENT: &str = "thread/event";

/// One runtime event of a thread: the params of a `thread/event`
/// notification, and an item of a `thread/events` page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadEvent {
    pub thread_id: String,
    /// Position in the thread's log (1, 2, 3, ...). Pass the last one you
    /// have as `afterSeq` / `cursor` to continue without missing anything.
    pub seq: u64,
    pub turn_id: Option<String>,
    /// RFC 3339, when the runtime emitted the event.
    pub timestamp: String,
    pub event: RuntimeEvent,
}

/// The runtime's event exactly as it is persisted in the thread's log: an
/// object whose `type` names the event (`turn_started`,
/// `tool_call_completed`, ...) with snake_case fields. New types may appear;
/// clients ignore the ones they do not know.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RuntimeEvent(pub Value);

impl JsonSchema for RuntimeEvent {
    fn schema_name() -> Cow<'static, str> {
        "RuntimeEvent".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A runtime event as persisted in the thread's log: `type` names it (snake_case), the other fields are the event's own (snake_case). Unknown types must be ignored.",
            "type": "object",
            "required": ["type"],
            "properties": { "type": { "type": "string" } }
        })
    }
}

/// `data` of the -32008 "client lagged" error: the subscriptions that were
/// dropped and the last seq the server queued for each. Resume each with
/// `thread/resume` (or read `thread/events`) from the last seq you received.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LaggedData {
    pub threads: Vec<ThreadCursor>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadCursor {
    pub thread_id: String,
    pub last_seq: u64,
}
