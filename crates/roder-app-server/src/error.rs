//! JSON-RPC errors: the code table and the mapping from runtime errors.
//!
//! Clients branch on codes, so every condition a client can act on has its
//! own: the standard JSON-RPC ones, then one per [`RuntimeError`] variant and
//! per transport condition. Anything else the runtime refuses is -32000 with
//! the runtime's message, which names the thing and the fix.

use roder_api::writer_lease::ThreadWriterBusy;
use roder_core::RuntimeError;
use serde_json::{Value, json};

use crate::protocol::ErrorObject;

/// Error codes. -32768..-32000 is JSON-RPC's reserved server range.
pub mod codes {
    /// The message is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// JSON, but not a JSON-RPC 2.0 request object (or a batch).
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// `data.field` names the offending field.
    pub const INVALID_PARAMS: i64 = -32602;
    /// A bug or an I/O failure in the server itself.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// The runtime refused or failed the request; the message says why.
    pub const RUNTIME_ERROR: i64 = -32000;
    pub const THREAD_NOT_FOUND: i64 = -32001;
    /// A turn is running on the thread; wait for it or interrupt it.
    pub const THREAD_BUSY: i64 = -32002;
    pub const TURN_NOT_RUNNING: i64 = -32003;
    /// `data.lastSeq` is the end of the log.
    pub const CURSOR_OUT_OF_RANGE: i64 = -32004;
    /// Send `initialize` first.
    pub const NOT_INITIALIZED: i64 = -32005;
    /// Missing or wrong bearer token (the WebSocket upgrade answers 401).
    pub const UNAUTHORIZED: i64 = -32006;
    /// The message exceeds `limits.maxMessageBytes`.
    pub const MESSAGE_TOO_LARGE: i64 = -32007;
    /// The client read too slowly and its subscriptions were dropped;
    /// `data.threads` tells where to resume from.
    pub const CLIENT_LAGGED: i64 = -32008;
    /// `tools/resolve` named no pending external tool call.
    pub const EXTERNAL_CALL_NOT_FOUND: i64 = -32009;
    /// The approval was answered already, timed out, or its turn ended.
    pub const APPROVAL_NOT_PENDING: i64 = -32010;
}

/// Every code with its name and meaning, for the schema and the docs.
pub const ERROR_CODES: &[(i64, &str, &str)] = &[
    (
        codes::PARSE_ERROR,
        "parse_error",
        "the message is not valid JSON",
    ),
    (
        codes::INVALID_REQUEST,
        "invalid_request",
        "not a single JSON-RPC 2.0 request object (batches are refused), or initialize sent twice",
    ),
    (
        codes::METHOD_NOT_FOUND,
        "method_not_found",
        "no such method",
    ),
    (
        codes::INVALID_PARAMS,
        "invalid_params",
        "bad params; data.field names the field",
    ),
    (
        codes::INTERNAL_ERROR,
        "internal_error",
        "a failure inside the server",
    ),
    (
        codes::RUNTIME_ERROR,
        "runtime_error",
        "the runtime refused or failed the request; the message says why",
    ),
    (
        codes::THREAD_NOT_FOUND,
        "thread_not_found",
        "no thread has this id",
    ),
    (
        codes::THREAD_BUSY,
        "thread_busy",
        "a turn is running on the thread; wait for it or interrupt it",
    ),
    (
        codes::TURN_NOT_RUNNING,
        "turn_not_running",
        "the turn is not running on the thread",
    ),
    (
        codes::CURSOR_OUT_OF_RANGE,
        "cursor_out_of_range",
        "the cursor is past the end of the log; data.lastSeq is the end",
    ),
    (
        codes::NOT_INITIALIZED,
        "not_initialized",
        "send initialize first",
    ),
    (
        codes::UNAUTHORIZED,
        "unauthorized",
        "missing or wrong bearer token (the WebSocket upgrade answers HTTP 401 with this error as its body)",
    ),
    (
        codes::MESSAGE_TOO_LARGE,
        "message_too_large",
        "the message exceeds limits.maxMessageBytes",
    ),
    (
        codes::CLIENT_LAGGED,
        "client_lagged",
        "sent with a null id: the client read too slowly, its subscriptions were dropped; data.threads says where each stopped",
    ),
    (
        codes::EXTERNAL_CALL_NOT_FOUND,
        "external_call_not_found",
        "no pending external tool call has this request id",
    ),
    (
        codes::APPROVAL_NOT_PENDING,
        "approval_not_pending",
        "the approval was answered already (the first answer wins), timed out, or its turn ended",
    ),
];

/// An error answer before it gets its request id.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message} ({code})")]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub fn parse_error(detail: impl std::fmt::Display) -> Self {
        Self::new(
            codes::PARSE_ERROR,
            format!("parse error: the message is not valid JSON: {detail}"),
        )
    }

    pub fn invalid_request(detail: impl std::fmt::Display) -> Self {
        Self::new(codes::INVALID_REQUEST, format!("invalid request: {detail}"))
    }

    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            codes::METHOD_NOT_FOUND,
            format!("method \"{method}\" does not exist (see initialize's `methods`)"),
        )
        .with_data(json!({ "method": method }))
    }

    /// Bad params; `field` is the dotted path of the offending field.
    pub fn invalid_params(method: &str, field: &str, detail: impl std::fmt::Display) -> Self {
        Self::new(
            codes::INVALID_PARAMS,
            format!("invalid params for {method}: field \"{field}\": {detail}"),
        )
        .with_data(json!({ "field": field }))
    }

    pub fn internal(detail: impl std::fmt::Display) -> Self {
        Self::new(codes::INTERNAL_ERROR, format!("internal error: {detail}"))
    }

    pub fn not_initialized(method: &str) -> Self {
        Self::new(
            codes::NOT_INITIALIZED,
            format!("\"{method}\" before initialize: send initialize first"),
        )
    }

    pub fn message_too_large(size: usize, limit: usize) -> Self {
        Self::new(
            codes::MESSAGE_TOO_LARGE,
            format!("message of {size} bytes exceeds the limit of {limit} bytes"),
        )
        .with_data(json!({ "limit": limit }))
    }

    /// A runtime failure: its [`RuntimeError`] code when it has one, else
    /// -32000 with the whole error chain as the message.
    pub fn from_runtime(error: anyhow::Error) -> Self {
        let message = format!("{error:#}");
        // Another process (a replica) holds the thread's writer lease: busy,
        // as for a turn running here, with the holder named.
        if let Some(busy) = error
            .chain()
            .find_map(|cause| cause.downcast_ref::<ThreadWriterBusy>())
        {
            return Self::new(codes::THREAD_BUSY, message).with_data(json!({
                "threadId": busy.thread_id,
                "holder": {
                    "pid": busy.holder.pid,
                    "host": busy.holder.host,
                    "ownerId": busy.holder.owner_id,
                },
            }));
        }
        let Some(known) = error.downcast_ref::<RuntimeError>() else {
            return Self::new(codes::RUNTIME_ERROR, message);
        };
        let (code, data) = match known {
            RuntimeError::ThreadNotFound(thread_id) => {
                (codes::THREAD_NOT_FOUND, json!({ "threadId": thread_id }))
            }
            RuntimeError::ThreadBusy { thread_id, turn_id } => (
                codes::THREAD_BUSY,
                json!({ "threadId": thread_id, "turnId": turn_id }),
            ),
            RuntimeError::TurnNotRunning { thread_id, turn_id } => (
                codes::TURN_NOT_RUNNING,
                json!({ "threadId": thread_id, "turnId": turn_id }),
            ),
            RuntimeError::CursorOutOfRange {
                thread_id,
                cursor,
                last_seq,
            } => (
                codes::CURSOR_OUT_OF_RANGE,
                json!({ "threadId": thread_id, "cursor": cursor, "lastSeq": last_seq }),
            ),
            RuntimeError::ExternalCallNotFound(request_id) => (
                codes::EXTERNAL_CALL_NOT_FOUND,
                json!({ "requestId": request_id }),
            ),
            RuntimeError::ApprovalNotPending(approval_id) => (
                codes::APPROVAL_NOT_PENDING,
                json!({ "approvalId": approval_id }),
            ),
            RuntimeError::ForeignCursor(cursor) => {
                (codes::INVALID_PARAMS, json!({ "cursor": cursor }))
            }
        };
        Self::new(code, message).with_data(data)
    }

    pub fn into_object(self) -> ErrorObject {
        ErrorObject {
            code: self.code,
            message: self.message,
            data: self.data,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_errors_keep_their_code_through_context() {
        let error = anyhow::Error::from(RuntimeError::ThreadBusy {
            thread_id: "t".into(),
            turn_id: "u".into(),
        })
        .context("starting a turn");
        let rpc = RpcError::from_runtime(error);
        assert_eq!(rpc.code, codes::THREAD_BUSY);
        assert_eq!(rpc.data, Some(json!({"threadId": "t", "turnId": "u"})));
        assert!(rpc.message.contains("busy"), "{}", rpc.message);
    }

    #[test]
    fn a_writer_lease_held_elsewhere_is_busy_naming_the_holder() {
        let holder = roder_api::writer_lease::WriterIdentity {
            owner_id: "o".into(),
            pid: 42,
            host: "replica-a".into(),
            since: time::OffsetDateTime::UNIX_EPOCH,
        };
        let error = anyhow::Error::from(ThreadWriterBusy {
            thread_id: "t".into(),
            holder,
        })
        .context("starting a turn");
        let rpc = RpcError::from_runtime(error);
        assert_eq!(rpc.code, codes::THREAD_BUSY);
        let data = rpc.data.unwrap();
        assert_eq!(data["threadId"], "t");
        assert_eq!(data["holder"]["pid"], 42);
        assert_eq!(data["holder"]["host"], "replica-a");
    }

    #[test]
    fn other_runtime_errors_are_generic_with_the_message() {
        let rpc = RpcError::from_runtime(anyhow::anyhow!("provider \"x\" is not installed"));
        assert_eq!(rpc.code, codes::RUNTIME_ERROR);
        assert!(rpc.message.contains("\"x\""));
    }
}
