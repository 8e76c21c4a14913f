//! Errors callers branch on. Everything else is an `anyhow::Error` with a
//! message a user can act on; these are wrapped in it and can be recovered
//! with `downcast_ref::<RuntimeError>()` (the app server maps them to codes).

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum RuntimeError {
    #[error("thread \"{0}\" does not exist")]
    ThreadNotFound(String),
    #[error(
        "thread \"{thread_id}\" is busy: turn \"{turn_id}\" is still running; wait for it to end or interrupt it"
    )]
    ThreadBusy { thread_id: String, turn_id: String },
    #[error("turn \"{turn_id}\" is not running on thread \"{thread_id}\"")]
    TurnNotRunning { thread_id: String, turn_id: String },
    #[error("cursor {cursor} is beyond the end of thread \"{thread_id}\" (last seq {last_seq})")]
    CursorOutOfRange {
        thread_id: String,
        cursor: u64,
        last_seq: u64,
    },
    #[error("no pending external tool call has request id \"{0}\"")]
    ExternalCallNotFound(String),
    #[error(
        "approval \"{0}\" is not pending: it was answered already (the first answer wins), timed out, or its turn ended"
    )]
    ApprovalNotPending(String),
    #[error(
        "history cursor \"{0}\" is not one this runtime returned; pass a `next_cursor` from a previous page, or none for the first page"
    )]
    ForeignCursor(String),
}
