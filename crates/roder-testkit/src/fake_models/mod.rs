//! Fake model API servers for tests: OpenAI Chat Completions, OpenAI
//! Responses and Anthropic Messages, streaming over SSE on 127.0.0.1.
//!
//! One [`FakeModelServer`] serves all three wire formats; the route decides
//! which (`…/chat/completions`, `…/responses`, `…/messages`, and `…/models`
//! for model listing), so an engine's `base_url` can point at it as it
//! would at the real service. The server plays a script: each model request
//! takes the next [`FakeReply`] — a stream built with [`ChatStream`],
//! [`ResponsesStream`] or [`MessagesStream`], an HTTP error, a hang, or a
//! [`RecordedReply`] served byte for byte (the recordings of the
//! [`model_wire`] peer suite) — and every request is recorded with its
//! headers and JSON body.
//!
//! Long-session behaviour is scriptable too: Responses reasoning items with
//! `encrypted_content` ([`ResponsesStream::reasoning_item`]), signed
//! Anthropic thinking ([`MessagesStream::thinking`],
//! [`MessagesStream::redacted_thinking`]), each API's context-overflow
//! error ([`FakeError::context_length_exceeded`],
//! [`FakeError::prompt_too_long`]) and a context window that rejects every
//! request over it ([`FakeModelServer::set_context_window`]).
//!
//! Streams can be cut at any byte ([`FakeStream::split_at`],
//! [`FakeStream::split_every`]) and can break the connection part way
//! ([`FakeStream::drop_after_frames`]), so parsers and retry logic are
//! tested against what real networks do. When the script is empty the
//! server answers 400 with a message saying so: a test that makes one
//! request too many fails loudly instead of hanging.

mod anthropic;
mod collect;
pub mod model_wire;
mod openai_chat;
mod openai_responses;
mod recorded;
mod script;
mod server;

use axum::serve::ListenerExt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

pub use anthropic::MessagesStream;
pub use collect::{CollectedResponse, collect_response};
pub use model_wire::ModelWireSuite;
pub use openai_chat::ChatStream;
pub use openai_responses::ResponsesStream;
pub use recorded::{RecordedReply, sse_event_spans, sse_events};
pub use script::{Ending, FakeError, FakeReply, FakeStream, Split, SseFrame};
pub use server::{FakeWire, RecordedModelRequest};

use server::Shared;

/// A fake model server on an ephemeral port of 127.0.0.1; stops when dropped.
pub struct FakeModelServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl FakeModelServer {
    /// Binds 127.0.0.1:0 and starts serving an empty script.
    pub async fn start() -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let app = server::router(shared.clone());
        let task = tokio::spawn(async move {
            // The server lives until the handle is dropped (aborted).
            let _ = axum::serve(listener.tap_io(no_delay), app).await;
        });
        Ok(Self { addr, shared, task })
    }

    /// `http://127.0.0.1:PORT`: the base URL for Anthropic engines.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/v1`: the base URL for OpenAI engines.
    pub fn openai_base_url(&self) -> String {
        format!("{}/v1", self.url())
    }

    /// Requires this key from now on (`Authorization: Bearer KEY` on OpenAI
    /// routes, `x-api-key: KEY` on Anthropic ones); other requests get 401
    /// in the route's format and take no reply from the script.
    pub fn require_api_key(&self, key: &str) {
        self.shared.lock().api_key = Some(key.to_string());
    }

    /// Appends one reply to the script.
    pub fn push(&self, reply: impl Into<FakeReply>) {
        self.shared.lock().replies.push_back(reply.into());
    }

    /// Serves `reply` for every model request once the script is empty
    /// (a provider that keeps answering the same way).
    pub fn repeat_when_empty(&self, reply: impl Into<FakeReply>) {
        self.shared.lock().fallback = Some(reply.into());
    }

    /// From now on, a model request estimated (body bytes / 4) at more
    /// than `tokens` tokens is answered with the route's context-overflow
    /// error ([`FakeError::context_overflow`]) and takes no scripted reply:
    /// a provider with a context window of `tokens`.
    pub fn set_context_window(&self, tokens: u64) {
        self.shared.lock().context_window = Some(tokens);
    }

    /// Replies not yet taken.
    pub fn remaining_replies(&self) -> usize {
        self.shared.lock().replies.len()
    }

    /// Model ids served by `GET …/models`.
    pub fn set_models(&self, ids: &[&str]) {
        self.shared.lock().models = ids.iter().map(|id| id.to_string()).collect();
    }

    /// Every request received so far, model listings included.
    pub fn requests(&self) -> Vec<RecordedModelRequest> {
        self.shared.lock().requests.clone()
    }

    /// Requests to the model routes (not `…/models`).
    pub fn model_requests(&self) -> Vec<RecordedModelRequest> {
        self.requests()
            .into_iter()
            .filter(|request| request.wire != Some(FakeWire::Models))
            .collect()
    }

    /// Streams the client dropped before the server finished sending them.
    pub fn disconnects(&self) -> usize {
        self.shared.lock().disconnects
    }

    /// Waits until at least `count` requests arrived.
    pub async fn wait_for_requests(&self, count: usize, timeout: Duration) -> anyhow::Result<()> {
        self.shared
            .wait_until(timeout, |state| state.requests.len() >= count)
            .await
            .map_err(|_| anyhow::anyhow!("fake model server: fewer than {count} requests arrived"))
    }

    /// Waits until clients dropped at least `count` unfinished streams.
    pub async fn wait_for_disconnects(
        &self,
        count: usize,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        self.shared
            .wait_until(timeout, |state| state.disconnects >= count)
            .await
            .map_err(|_| {
                anyhow::anyhow!("fake model server: fewer than {count} streams were dropped")
            })
    }
}

impl Drop for FakeModelServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Small frames (SSE chunks, notifications) go out at once: without
/// `TCP_NODELAY`, Nagle's algorithm meets the peer's delayed ACK and adds
/// ~40 ms to every exchange.
fn no_delay(stream: &mut tokio::net::TcpStream) {
    let _ = stream.set_nodelay(true);
}
