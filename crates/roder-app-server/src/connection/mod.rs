//! One client connection, whatever its transport: it reads messages, runs
//! requests, and queues responses and notifications for the transport's
//! writer to drain.
//!
//! Requests run concurrently (up to `max_in_flight`), each on its own task,
//! so a slow one (`turn/interrupt` waits for the turn to end, `runners/pause`
//! may provision a sandbox) does not hold the others up. `initialize` runs
//! inline, so a request sent right after it always finds the connection
//! initialized. Handlers are never cancelled when the client leaves: a
//! half-done runtime call (a worktree materialized but no thread yet) would
//! skip its rollback. Turns run on the runtime's own tasks and go on.

mod approver;
mod context;
mod fanout;
mod forwarder;
mod limits;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use roder_core::Runtime;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::AbortHandle;

pub(crate) use context::Context;
pub(crate) use fanout::Fanout;
pub use limits::ConnectionLimits;

use crate::decode;
use crate::error::RpcError;
use crate::methods::{self, ClientRequest};
use crate::protocol::{ApprovalResult, JsonRpcClientResponse, RequestId, ServerMessage};
use context::Subscriptions;
use forwarder::Forwarder;

/// Commands to the forwarder waiting at once (they are awaited by handlers,
/// so this only bounds bursts).
const COMMAND_QUEUE: usize = 64;

pub(crate) struct Connection {
    context: Arc<Context>,
    outgoing: mpsc::Sender<ServerMessage>,
    in_flight: Arc<Semaphore>,
    forwarder: AbortHandle,
}

impl Connection {
    /// Opens a connection and returns the queue its transport must drain.
    /// `fanout` is the server's router of runtime events (one per server,
    /// shared by its connections).
    pub fn open(
        runtime: Arc<Runtime>,
        fanout: Arc<Fanout>,
        limits: ConnectionLimits,
    ) -> (Connection, mpsc::Receiver<ServerMessage>) {
        let (outgoing, queue) = mpsc::channel(limits.client_queue);
        let (commands, command_queue) = mpsc::channel(COMMAND_QUEUE);
        let approver = Arc::new(approver::Approver::new());
        let forwarder = Forwarder::new(
            runtime.clone(),
            fanout,
            command_queue,
            outgoing.clone(),
            limits.client_queue,
            approver.clone(),
        );
        let forwarder = tokio::spawn(forwarder.run()).abort_handle();
        let context = Arc::new(Context::new(
            runtime,
            limits,
            Subscriptions::new(commands),
            approver,
        ));
        let connection = Connection {
            context,
            outgoing,
            in_flight: Arc::new(Semaphore::new(limits.max_in_flight)),
            forwarder,
        };
        (connection, queue)
    }

    /// Handles one message. Returns once the request is running (or was
    /// answered); waits while `max_in_flight` requests are running.
    pub async fn receive(&self, text: &str) {
        let limit = self.context.limits.max_message_bytes;
        if text.len() > limit {
            self.reply_error(None, RpcError::message_too_large(text.len(), limit))
                .await;
            return;
        }
        let request = match decode::parse_message(text) {
            Ok(decode::Incoming::Request(request)) => request,
            Ok(decode::Incoming::Response(response)) => {
                self.answered(response).await;
                return;
            }
            Err(rejected) => {
                self.reply_error(rejected.id, rejected.error).await;
                return;
            }
        };
        let Some(id) = request.id else {
            // A notification: JSON-RPC forbids answering it, even with an error.
            tracing::debug!(method = %request.method, "ignoring client notification");
            return;
        };
        let is_initialize = request.method == methods::INITIALIZE;
        if !is_initialize && !self.context.is_initialized() {
            self.reply_error(Some(id), RpcError::not_initialized(&request.method))
                .await;
            return;
        }
        let call = match ClientRequest::decode(&request.method, request.params) {
            Ok(call) => call,
            Err(error) => {
                self.reply_error(Some(id), error).await;
                return;
            }
        };
        if is_initialize {
            let reply = run(&self.context, call).await;
            let _ = self.outgoing.send(answer(id, reply)).await;
            return;
        }
        let Ok(permit) = self.in_flight.clone().acquire_owned().await else {
            return;
        };
        let context = self.context.clone();
        let outgoing = self.outgoing.clone();
        tokio::spawn(async move {
            let reply = run(&context, call).await;
            let _ = outgoing.send(answer(id, reply)).await;
            drop(permit);
        });
    }

    /// The client's answer to an `approval/request`. The first answer of
    /// any approver wins; a later one is only logged (every approver gets
    /// `approval/resolved`). An answer that cannot be read is refused with
    /// an error naming the request, and a corrected one is still taken.
    async fn answered(&self, response: JsonRpcClientResponse) {
        let Some(approval_id) = self.context.approver.answered(&response.id) else {
            tracing::debug!(id = %response.id, "ignoring a response to no request of ours");
            return;
        };
        let result = match (response.result, response.error) {
            (Some(result), None) => serde_json::from_value::<ApprovalResult>(result)
                .map_err(|error| format!("its result is not {{decision, message?}}: {error}")),
            (None, Some(error)) => {
                // The client could not answer: the ask waits for another
                // approver or its timeout.
                tracing::info!(
                    approval_id,
                    code = error.code,
                    "a client declined to answer an approval: {}",
                    error.message
                );
                return;
            }
            _ => Err("a response carries exactly one of result and error".to_string()),
        };
        match result {
            Ok(result) => {
                let client_id = self.context.approver.client_id();
                if let Err(error) = self.context.runtime.resolve_approval(
                    &approval_id,
                    crate::convert::answer(result),
                    &client_id,
                ) {
                    tracing::debug!(approval_id, "answer not taken: {error:#}");
                }
            }
            Err(problem) => {
                self.context
                    .approver
                    .unanswered(response.id.clone(), approval_id);
                self.reply_error(
                    None,
                    RpcError::invalid_params(
                        crate::protocol::APPROVAL_REQUEST,
                        "result",
                        format!(
                            "the answer to approval/request {} is invalid: {problem}; answer it again",
                            response.id
                        ),
                    ),
                )
                .await;
            }
        }
    }

    /// Answers a message the transport could not even read whole.
    pub async fn reject_oversized(&self, size: usize) {
        let limit = self.context.limits.max_message_bytes;
        self.reply_error(None, RpcError::message_too_large(size, limit))
            .await;
    }

    /// Answers a message that is not text.
    pub async fn reject_unreadable(&self, detail: impl std::fmt::Display) {
        self.reply_error(None, RpcError::parse_error(detail)).await;
    }

    /// Waits until every request still running has queued its answer.
    pub async fn finish(&self) {
        let all = u32::try_from(self.context.limits.max_in_flight).unwrap_or(u32::MAX);
        let _ = self.in_flight.acquire_many(all).await;
    }

    async fn reply_error(&self, id: Option<RequestId>, error: RpcError) {
        let _ = self
            .outgoing
            .send(ServerMessage::error(id, error.into_object()))
            .await;
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.forwarder.abort();
    }
}

/// Runs one request; a panicking handler becomes -32603 instead of a
/// request that is never answered.
async fn run(context: &Context, call: ClientRequest) -> Result<serde_json::Value, RpcError> {
    let method = call.method();
    match AssertUnwindSafe(methods::dispatch(context, call))
        .catch_unwind()
        .await
    {
        Ok(reply) => reply,
        Err(_) => {
            tracing::error!(method, "request handler panicked");
            Err(RpcError::internal(format!("the {method} handler panicked")))
        }
    }
}

fn answer(id: RequestId, reply: Result<serde_json::Value, RpcError>) -> ServerMessage {
    match reply {
        Ok(result) => ServerMessage::response(id, result),
        Err(error) => ServerMessage::error(Some(id), error.into_object()),
    }
}
