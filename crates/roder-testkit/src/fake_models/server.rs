//! The HTTP side of the fake: routing by path suffix, authentication,
//! request recording, and turning a [`FakeReply`] into a response whose
//! body is written the way the script says.

use std::collections::{BTreeMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::Response;
use bytes::Bytes;
use futures::Stream;
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::recorded::RecordedReply;
use super::script::{FakeError, FakeReply};

/// Which API a request addressed, decided by its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FakeWire {
    /// `POST …/chat/completions`
    OpenAiChat,
    /// `POST …/responses`
    OpenAiResponses,
    /// `POST …/messages`
    AnthropicMessages,
    /// `GET …/models` (either provider's format, by its headers)
    Models,
}

impl FakeWire {
    fn of(path: &str) -> Option<Self> {
        let path = path.trim_end_matches('/');
        if path.ends_with("/chat/completions") {
            Some(FakeWire::OpenAiChat)
        } else if path.ends_with("/responses") {
            Some(FakeWire::OpenAiResponses)
        } else if path.ends_with("/messages") {
            Some(FakeWire::AnthropicMessages)
        } else if path.ends_with("/models") {
            Some(FakeWire::Models)
        } else {
            None
        }
    }
}

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedModelRequest {
    pub method: String,
    pub path: String,
    pub wire: Option<FakeWire>,
    /// Header names lower-cased.
    pub headers: BTreeMap<String, String>,
    /// The body parsed as JSON (`Null` when it is not JSON).
    pub body: Value,
    /// Whether it carried the key set with `require_api_key` (true when
    /// none is required).
    pub authorized: bool,
}

impl RecordedModelRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }
}

#[derive(Default)]
pub(crate) struct ServerState {
    pub replies: VecDeque<FakeReply>,
    pub requests: Vec<RecordedModelRequest>,
    pub disconnects: usize,
    pub api_key: Option<String>,
    pub models: Vec<String>,
    /// Served (again and again) once the script is empty.
    pub fallback: Option<FakeReply>,
    /// Model requests estimated (body bytes / 4) over this many tokens get
    /// the route's context-overflow error and take no reply.
    pub context_window: Option<u64>,
}

#[derive(Default)]
pub(crate) struct Shared {
    state: Mutex<ServerState>,
    changed: Notify,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, ServerState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn changed(&self) {
        self.changed.notify_waiters();
    }

    pub async fn wait_until(
        &self,
        timeout: Duration,
        done: impl Fn(&ServerState) -> bool,
    ) -> Result<(), tokio::time::error::Elapsed> {
        tokio::time::timeout(timeout, async {
            loop {
                // Created before the check so no change between the check
                // and the wait is missed.
                let changed = self.changed.notified();
                if done(&self.lock()) {
                    return;
                }
                changed.await;
            }
        })
        .await
    }
}

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new().fallback(handle).with_state(shared)
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let wire = FakeWire::of(&path);
    let anthropic = wire == Some(FakeWire::AnthropicMessages)
        || (wire == Some(FakeWire::Models) && headers.contains_key("anthropic-version"));
    let recorded_headers: BTreeMap<String, String> = headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_string(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    let (authorized, reply, models, number) = {
        let mut state = shared.lock();
        let authorized = match &state.api_key {
            None => true,
            Some(key) if anthropic => recorded_headers.get("x-api-key") == Some(key),
            Some(key) => recorded_headers.get("authorization") == Some(&format!("Bearer {key}")),
        };
        state.requests.push(RecordedModelRequest {
            method: method.to_string(),
            path: path.clone(),
            wire,
            headers: recorded_headers,
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
            authorized,
        });
        let number = state.requests.len();
        let takes_reply = authorized && !matches!(wire, None | Some(FakeWire::Models));
        let tokens = u64::try_from(body.len() / 4).unwrap_or(u64::MAX);
        let overflow = state
            .context_window
            .filter(|&window| takes_reply && tokens > window);
        let reply = if let Some(window) = overflow {
            Some(FakeReply::Error(FakeError::context_overflow(
                anthropic, tokens, window,
            )))
        } else if takes_reply {
            state.replies.pop_front().or_else(|| state.fallback.clone())
        } else {
            None
        };
        (authorized, reply, state.models.clone(), number)
    };
    shared.changed();

    if !authorized {
        let message = if anthropic {
            "invalid x-api-key"
        } else {
            "Incorrect API key provided"
        };
        return error_response(anthropic, &FakeError::new(401, message));
    }
    match wire {
        None => error_response(
            anthropic,
            &FakeError::new(404, format!("fake model server: no route {path}")),
        ),
        Some(FakeWire::Models) => models_response(anthropic, &models),
        Some(_) => match reply {
            Some(FakeReply::Stream(stream)) => {
                let (writes, abort) = stream.writes();
                sse_response(ReplyBody::new(shared, writes.into(), abort, false))
            }
            Some(FakeReply::Error(error)) => error_response(anthropic, &error),
            Some(FakeReply::Hang) => {
                sse_response(ReplyBody::new(shared, VecDeque::new(), false, true))
            }
            Some(FakeReply::Recorded(recorded)) => recorded_response(shared, &recorded),
            None => error_response(
                anthropic,
                &FakeError::new(
                    400,
                    format!(
                        "fake model server: no scripted reply left for request #{number} to {path}"
                    ),
                ),
            ),
        },
    }
}

fn sse_response(body: ReplyBody) -> Response {
    let mut response = Response::new(Body::from_stream(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

fn recorded_response(shared: Arc<Shared>, recorded: &RecordedReply) -> Response {
    let body = ReplyBody::new(shared, recorded.writes().into(), false, false);
    let mut response = Response::new(Body::from_stream(body));
    *response.status_mut() =
        StatusCode::from_u16(recorded.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(recorded.content_type()) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    for (name, value) in &recorded.headers {
        if let (Ok(name), Ok(value)) = (
            header::HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            headers.insert(name, value);
        }
    }
    response
}

fn error_response(anthropic: bool, error: &FakeError) -> Response {
    let body = match &error.raw_body {
        Some(raw) => raw.clone(),
        None if anthropic => json!({
            "type": "error",
            "error": {
                "type": error.kind.clone().unwrap_or_else(|| anthropic_kind(error.status).to_string()),
                "message": error.message,
            },
        })
        .to_string(),
        None => json!({
            "error": {
                "message": error.message,
                "type": openai_kind(error.status),
                "param": null,
                "code": error.kind,
            },
        })
        .to_string(),
    };
    let mut response = Response::new(Body::from(body));
    *response.status_mut() =
        StatusCode::from_u16(error.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(value) = error
        .retry_after
        .as_deref()
        .and_then(|value| HeaderValue::from_str(value).ok())
    {
        headers.insert(header::RETRY_AFTER, value);
    }
    if let Some(ms) = error.retry_after_ms {
        headers.insert("retry-after-ms", HeaderValue::from(ms));
    }
    response
}

fn anthropic_kind(status: u16) -> &'static str {
    match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

fn openai_kind(status: u16) -> &'static str {
    match status {
        400..=428 => "invalid_request_error",
        429 => "requests",
        _ => "server_error",
    }
}

fn models_response(anthropic: bool, models: &[String]) -> Response {
    let body = if anthropic {
        json!({
            "data": models.iter().map(|id| json!({
                "type": "model",
                "id": id,
                "display_name": format!("Fake {id}"),
                "created_at": "2025-01-01T00:00:00Z",
            })).collect::<Vec<_>>(),
            "has_more": false,
            "first_id": models.first(),
            "last_id": models.last(),
        })
    } else {
        json!({
            "object": "list",
            "data": models.iter().map(|id| json!({
                "id": id,
                "object": "model",
                "created": 1_700_000_000,
                "owned_by": "fake",
            })).collect::<Vec<_>>(),
        })
    };
    let mut response = Response::new(Body::from(body.to_string()));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// A streamed body that writes its chunks one at a time, yielding to the
/// runtime between them so each is flushed separately, and that counts a
/// disconnect when it is dropped before it finished.
struct ReplyBody {
    shared: Arc<Shared>,
    writes: VecDeque<Bytes>,
    abort: bool,
    hang: bool,
    yield_next: bool,
    finished: bool,
}

impl ReplyBody {
    fn new(shared: Arc<Shared>, writes: VecDeque<Bytes>, abort: bool, hang: bool) -> Self {
        Self {
            shared,
            writes,
            abort,
            hang,
            yield_next: false,
            finished: false,
        }
    }
}

impl Stream for ReplyBody {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.yield_next {
            this.yield_next = false;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if let Some(write) = this.writes.pop_front() {
            this.yield_next = true;
            return Poll::Ready(Some(Ok(write)));
        }
        if this.hang {
            // Never woken: the body ends when the client goes away.
            return Poll::Pending;
        }
        this.finished = true;
        if this.abort {
            this.abort = false;
            return Poll::Ready(Some(Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "fake model server dropped the stream",
            ))));
        }
        Poll::Ready(None)
    }
}

impl Drop for ReplyBody {
    fn drop(&mut self) {
        if !self.finished {
            self.shared.lock().disconnects += 1;
            self.shared.changed();
        }
    }
}
