//! The method table: each method's name, params, result and handler in one
//! line, from which the request enum, the dispatcher and the schema's method
//! list are generated, so they can never disagree.

use schemars::SchemaGenerator;
use serde_json::{Value, json};

use crate::connection::Context;
use crate::decode::decode_params;
use crate::error::RpcError;
use crate::handlers::{rewind, runners, session, threads, tools, turns, workdirs};
use crate::protocol::*;

pub(crate) const INITIALIZE: &str = "initialize";

macro_rules! methods {
    ($(
        $(#[doc = $doc:literal])*
        $variant:ident = $name:literal ($params:ty) -> $result:ty => $handler:path;
    )*) => {
        /// A request with its params decoded. Short-lived (decoded, then
        /// handled), so a large variant costs nothing worth a box.
        #[derive(Debug, Clone, PartialEq)]
        #[allow(clippy::large_enum_variant)]
        pub(crate) enum ClientRequest {
            $( $variant($params), )*
        }

        /// Every method, in the order of the table.
        pub const METHODS: &[&str] = &[$($name),*];

        impl ClientRequest {
            /// -32601 for an unknown method, -32602 naming the field for bad params.
            pub fn decode(method: &str, params: Option<Value>) -> Result<Self, RpcError> {
                match method {
                    $( $name => decode_params(method, params).map(ClientRequest::$variant), )*
                    other => Err(RpcError::method_not_found(other)),
                }
            }

            pub fn method(&self) -> &'static str {
                match self {
                    $( ClientRequest::$variant(_) => $name, )*
                }
            }
        }

        /// Runs a request's handler and serializes its result.
        pub(crate) async fn dispatch(context: &Context, call: ClientRequest) -> Result<Value, RpcError> {
            match call {
                $( ClientRequest::$variant(params) => {
                    let result: $result = $handler(context, params).await?;
                    serde_json::to_value(result).map_err(RpcError::internal)
                } )*
            }
        }

        /// `{method: {description, params, result}}` for the schema.
        pub(crate) fn method_schemas(generator: &mut SchemaGenerator) -> serde_json::Map<String, Value> {
            let mut methods = serde_json::Map::new();
            $(
                let description: &[&str] = &[$($doc),*];
                methods.insert($name.to_string(), json!({
                    "description": description.iter().map(|line| line.trim()).collect::<Vec<_>>().join(" "),
                    "params": generator.subschema_for::<$params>(),
                    "result": generator.subschema_for::<$result>(),
                }));
            )*
            methods
        }
    };
}

methods! {
    /// First request of a connection; every other method before it gets -32005.
    Initialize = "initialize" (InitializeParams) -> InitializeResult => session::initialize;
    /// Creates a thread and subscribes this connection to it.
    ThreadStart = "thread/start" (ThreadStartParams) -> ThreadResult => threads::start;
    /// Subscribes to an existing thread, replaying its events after `afterSeq` first.
    ThreadResume = "thread/resume" (ThreadResumeParams) -> ThreadResumeResult => threads::resume;
    /// Sets (or with `mode: null` clears) a thread's own approval mode; applies from its next tool call.
    ThreadSetMode = "thread/setMode" (ThreadSetModeParams) -> ThreadResult => threads::set_mode;
    /// Stops this connection's notifications of a thread.
    ThreadUnsubscribe = "thread/unsubscribe" (ThreadIdParams) -> ThreadUnsubscribeResult => threads::unsubscribe;
    /// A thread, its last seq and its running turn.
    ThreadRead = "thread/read" (ThreadIdParams) -> ThreadReadResult => threads::read;
    /// Threads, most recently updated first, a page at a time.
    ThreadList = "thread/list" (ThreadListParams) -> ThreadListResult => threads::list;
    /// A thread's persisted events after a cursor, a page at a time.
    ThreadEvents = "thread/events" (ThreadEventsParams) -> ThreadEventsResult => threads::events;
    /// A thread's history in pages bounded by events and bytes, with an opaque cursor; the log before the cursor is not read.
    ThreadHistory = "thread/history" (ThreadHistoryParams) -> ThreadHistoryResult => threads::history;
    /// Marks a thread archived (its working directory stays).
    ThreadArchive = "thread/archive" (ThreadIdParams) -> ThreadResult => threads::archive;
    /// Compacts a thread now; refused as busy while a turn runs; nothing is written if it fails.
    ThreadCompact = "thread/compact" (ThreadIdParams) -> ThreadCompactResult => threads::compact;
    /// The turns a thread can go back to: each whose next turn took a workspace checkpoint.
    ThreadRewindTargets = "thread/rewindTargets" (ThreadIdParams) -> ThreadRewindTargetsResult => rewind::targets;
    /// Restores the workspace to the end of turn `toTurn` and drops later turns from the model's context; refused as busy while a turn runs.
    ThreadRollback = "thread/rollback" (ThreadRollbackParams) -> ThreadRollbackResult => rewind::rollback;
    /// A new thread with the source's transcript up to `atTurn` and a copy of its workspace there; subscribes this connection to it.
    ThreadFork = "thread/fork" (ThreadForkParams) -> ThreadResult => rewind::fork;
    /// Starts a turn and answers with its id at once; its events arrive as notifications.
    TurnStart = "turn/start" (TurnStartParams) -> TurnStartResult => turns::start;
    /// Interrupts a running turn and answers once it has ended.
    TurnInterrupt = "turn/interrupt" (TurnInterruptParams) -> Empty => turns::interrupt;
    /// Answers an external tool call (`external_tool_call_requested`).
    ToolsResolve = "tools/resolve" (ToolsResolveParams) -> Empty => tools::resolve;
    /// Installed runner providers, their capabilities and setup hints.
    RunnersList = "runners/list" (RunnersListParams) -> RunnersListResult => runners::list;
    /// Provisions (or reuses) the thread's runner session, then pauses it.
    RunnersPause = "runners/pause" (ThreadIdParams) -> RunnerStateResult => runners::pause;
    /// Wakes the thread's runner session.
    RunnersResume = "runners/resume" (ThreadIdParams) -> RunnerStateResult => runners::resume;
    /// Releases the local handle of the thread's runner and keeps the sandbox.
    RunnersDetach = "runners/detach" (ThreadIdParams) -> RunnerStateResult => runners::detach;
    /// Reattaches to the thread's detached sandbox without creating one.
    RunnersRejoin = "runners/rejoin" (RunnersRejoinParams) -> RunnerStateResult => runners::rejoin;
    /// Materializes a working directory (a git worktree) of a local repository.
    WorkdirsCreate = "workdirs/create" (WorkdirsCreateParams) -> WorkdirResult => workdirs::create;
    /// Every working directory.
    WorkdirsList = "workdirs/list" (WorkdirsListParams) -> WorkdirsListResult => workdirs::list;
    /// One working directory's status (`not_found` when unknown).
    WorkdirsGet = "workdirs/get" (WorkdirIdParams) -> WorkdirResult => workdirs::get;
    /// Removes a working directory; refused while a thread is bound to it.
    WorkdirsCleanup = "workdirs/cleanup" (WorkdirIdParams) -> WorkdirResult => workdirs::cleanup;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::codes;

    #[test]
    fn unknown_methods_are_method_not_found() {
        let error = ClientRequest::decode("thread/explode", None).unwrap_err();
        assert_eq!(error.code, codes::METHOD_NOT_FOUND);
    }

    #[test]
    fn every_method_name_round_trips() {
        for name in METHODS {
            // Params may be missing fields; an error must then be about params.
            match ClientRequest::decode(name, None) {
                Ok(call) => assert_eq!(call.method(), *name),
                Err(error) => assert_eq!(error.code, codes::INVALID_PARAMS, "{name}"),
            }
        }
        assert!(METHODS.contains(&INITIALIZE));
    }
}
