//! The Sprites REST API over HTTP: one method per call the provider makes.
//!
//! Wire details follow `SPRITES_API.md`; the README says which of them are
//! documented and which are assumed. Every request carries the bearer token;
//! no request or error message ever includes it.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use reqwest::header::{CONTENT_TYPE, HeaderMap};
use reqwest::{Client, RequestBuilder, Response, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::checkpoint::{CheckpointCreated, CheckpointStream};
use crate::error::SpritesError;
use crate::exec_frames::{ExecCollector, decode_json_body};
use crate::retry::{RetryDecision, RetryPolicy, retry_after, says_not_ready};

/// Bound on every call except exec (which runs as long as its command and
/// is bounded by the caller's `timeout_ms`). It only guards against hangs.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);
/// Longest error body quoted back to the user.
const MAX_ERROR_TEXT: usize = 500;

/// The API token. Its `Debug` never prints the value.
#[derive(Clone)]
pub(crate) struct ApiToken(String);

impl ApiToken {
    /// `None` for an empty or blank token, which counts as missing.
    pub(crate) fn new(value: String) -> Option<Self> {
        let trimmed = value.trim();
        (!trimmed.is_empty()).then(|| Self(trimmed.to_string()))
    }
}

impl fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiToken(<redacted>)")
    }
}

/// The fields of a sprite object this provider reads.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct SpriteInfo {
    pub name: String,
    #[serde(default)]
    pub url: Option<String>,
}

/// One command to run: argv (program first), cwd and extra environment.
#[derive(Debug, Clone)]
pub(crate) struct ExecCall {
    pub argv: Vec<String>,
    pub dir: String,
    pub env: Vec<(String, String)>,
}

/// Whether a request may be sent again after a transient failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Repeat {
    /// Safe to repeat: retried on 5xx, 429 and refused connections (and on
    /// 503 "Process not ready", like every request).
    Idempotent,
    /// Sent again only when the sprite refused it as not ready, which means
    /// nothing ran.
    Once,
}

/// A client bound to one base URL and token.
#[derive(Clone)]
pub(crate) struct SpritesClient {
    http: Client,
    base_url: String,
    token: ApiToken,
    retry: RetryPolicy,
}

impl fmt::Debug for SpritesClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpritesClient")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl SpritesClient {
    pub(crate) fn new(http: Client, base_url: String, token: ApiToken, retry: RetryPolicy) -> Self {
        Self {
            http,
            base_url,
            token,
            retry,
        }
    }

    /// `GET /v1/sprites/{name}`; `None` on 404.
    pub(crate) async fn get_sprite(&self, name: &str) -> Result<Option<SpriteInfo>, SpritesError> {
        let action = format!("looking up sprite \"{name}\"");
        let url = self.sprite_url(name, "");
        let response = self
            .send(&action, Repeat::Idempotent, || {
                self.http.get(&url).timeout(REQUEST_TIMEOUT)
            })
            .await?;
        if response.status() == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let response = self.check(&action, response).await?;
        read_json(&action, response).await.map(Some)
    }

    /// `POST /v1/sprites`; sent once (a repeat could create a second
    /// sprite). A name that exists gives [`SpritesError::NameTaken`]: 409
    /// live, or a 400 that says so (older docs).
    pub(crate) async fn create_sprite(&self, name: &str) -> Result<SpriteInfo, SpritesError> {
        let action = format!("creating sprite \"{name}\"");
        let url = format!("{}/v1/sprites", self.base_url);
        let body = json!({ "name": name });
        let response = self
            .send(&action, Repeat::Once, || {
                self.http.post(&url).timeout(REQUEST_TIMEOUT).json(&body)
            })
            .await?;
        let status = response.status();
        if status == StatusCode::CONFLICT || status == StatusCode::BAD_REQUEST {
            let text = error_text(response).await;
            let parsed: Option<Value> = serde_json::from_str(&text).ok();
            let message = error_message(parsed.as_ref(), &text);
            let lower = message.to_ascii_lowercase();
            if status == StatusCode::CONFLICT
                || lower.contains("already")
                || lower.contains("exists")
            {
                return Err(SpritesError::NameTaken {
                    name: name.to_string(),
                    status: status.as_u16(),
                    message,
                });
            }
            return Err(SpritesError::Api {
                status: status.as_u16(),
                action,
                message,
            });
        }
        let response = self.check(&action, response).await?;
        read_json(&action, response).await
    }

    /// `DELETE /v1/sprites/{name}`; `false` when it was already gone.
    pub(crate) async fn delete_sprite(&self, name: &str) -> Result<bool, SpritesError> {
        let action = format!("deleting sprite \"{name}\"");
        let url = self.sprite_url(name, "");
        let response = self
            .send(&action, Repeat::Idempotent, || {
                self.http.delete(&url).timeout(REQUEST_TIMEOUT)
            })
            .await?;
        if response.status() == StatusCode::NOT_FOUND {
            return Ok(false);
        }
        self.check(&action, response).await.map(|_| true)
    }

    /// HTTP exec: `POST /v1/sprites/{name}/exec?cmd=…&path=…&dir=…&env=…`.
    ///
    /// Output lands in `sink` as it streams, so a caller that stops waiting
    /// (deadline, cancellation) still has what arrived. Dropping the future
    /// aborts the request, and the server then SIGKILLs the command's
    /// process group. `repeat` is [`Repeat::Once`] unless the command is
    /// safe to run twice; a "not ready" 503 is retried either way.
    pub(crate) async fn exec(
        &self,
        name: &str,
        call: &ExecCall,
        repeat: Repeat,
        sink: &mut ExecCollector,
    ) -> Result<(), SpritesError> {
        let action = format!("running a command in sprite \"{name}\"");
        let mut query: Vec<(&str, &str)> =
            call.argv.iter().map(|arg| ("cmd", arg.as_str())).collect();
        if let Some(program) = call.argv.first() {
            query.push(("path", program));
        }
        query.push(("dir", &call.dir));
        let env: Vec<String> = call.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        query.extend(env.iter().map(|pair| ("env", pair.as_str())));
        let url = self.sprite_url(name, "/exec");
        let response = self
            .send(&action, repeat, || {
                self.http
                    .post(&url)
                    .query(&query)
                    .header(CONTENT_TYPE, "application/octet-stream")
                    .body(Vec::new())
            })
            .await?;
        if response.status() == StatusCode::NOT_FOUND {
            return Err(SpritesError::SpriteNotFound {
                name: name.to_string(),
                action,
            });
        }
        let response = self.check(&action, response).await?;
        if is_json(&response) {
            let body = response
                .bytes()
                .await
                .map_err(|err| transport(&action, &err))?;
            let output = decode_json_body(&body).map_err(|err| SpritesError::Protocol {
                action: action.clone(),
                detail: format!("invalid JSON exec body: {err}"),
            })?;
            sink.set_json(output);
            return Ok(());
        }
        let mut body = response.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|err| transport(&action, &err))?;
            sink.push_frames(&chunk);
        }
        Ok(())
    }

    /// `GET /v1/sprites/{name}/fs/read?path=&workingDir=`: the raw bytes.
    pub(crate) async fn read_file(
        &self,
        name: &str,
        path: &str,
        working_dir: &str,
    ) -> Result<Vec<u8>, SpritesError> {
        let action = format!("reading {path} in sprite \"{name}\"");
        let url = self.sprite_url(name, "/fs/read");
        let response = self
            .send(&action, Repeat::Idempotent, || {
                self.http
                    .get(&url)
                    .query(&[("path", path), ("workingDir", working_dir)])
                    .timeout(REQUEST_TIMEOUT)
            })
            .await?;
        if response.status() == StatusCode::NOT_FOUND {
            return Err(self.not_found(name, path, &action, response).await);
        }
        let response = self.check(&action, response).await?;
        let body = response
            .bytes()
            .await
            .map_err(|err| transport(&action, &err))?;
        Ok(body.to_vec())
    }

    /// `PUT /v1/sprites/{name}/fs/write?path=&workingDir=&mkdir=true&mkdirParents=true`.
    ///
    /// Both directory flags are sent: the docs name `mkdir`, the official SDKs
    /// send `mkdirParents`, and a server ignores the one it does not know.
    /// Retried like a `GET`: it replaces the whole file, so sending it again
    /// leaves the same result.
    pub(crate) async fn write_file(
        &self,
        name: &str,
        path: &str,
        working_dir: &str,
        contents: Vec<u8>,
    ) -> Result<(), SpritesError> {
        let action = format!("writing {path} in sprite \"{name}\"");
        let url = self.sprite_url(name, "/fs/write");
        let contents = Bytes::from(contents);
        let response = self
            .send(&action, Repeat::Idempotent, || {
                self.http
                    .put(&url)
                    .query(&[
                        ("path", path),
                        ("workingDir", working_dir),
                        ("mkdir", "true"),
                        ("mkdirParents", "true"),
                    ])
                    .header(CONTENT_TYPE, "application/octet-stream")
                    .timeout(REQUEST_TIMEOUT)
                    .body(contents.clone())
            })
            .await?;
        if response.status() == StatusCode::NOT_FOUND {
            return Err(self.not_found(name, path, &action, response).await);
        }
        self.check(&action, response).await.map(|_| ())
    }

    /// `POST /v1/sprites/{name}/checkpoint`, reading its NDJSON stream.
    pub(crate) async fn checkpoint(
        &self,
        name: &str,
        comment: &str,
    ) -> Result<CheckpointCreated, SpritesError> {
        let action = format!("checkpointing sprite \"{name}\"");
        let url = self.sprite_url(name, "/checkpoint");
        let body = json!({ "comment": comment });
        let response = self
            .send(&action, Repeat::Once, || {
                self.http.post(&url).timeout(REQUEST_TIMEOUT).json(&body)
            })
            .await?;
        if response.status() == StatusCode::NOT_FOUND {
            return Err(SpritesError::SpriteNotFound {
                name: name.to_string(),
                action,
            });
        }
        let response = self.check(&action, response).await?;
        let failed = |message: String| SpritesError::Checkpoint {
            name: name.to_string(),
            message,
        };
        let mut stream = CheckpointStream::default();
        let mut body = response.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|err| transport(&action, &err))?;
            stream.push(&chunk).map_err(failed)?;
        }
        stream.finish().map_err(failed)
    }

    /// `POST /v1/sprites/{name}/policy/network` with `policy`
    /// (`{"rules": [...]}`). Any 2xx is success: the docs show 200 with the
    /// rules echoed back, the Go SDK expects 204. It replaces the whole
    /// policy, so it is retried like a `GET`.
    pub(crate) async fn set_network_policy(
        &self,
        name: &str,
        policy: &Value,
    ) -> Result<(), SpritesError> {
        let action = format!("setting the network policy of sprite \"{name}\"");
        let url = self.sprite_url(name, "/policy/network");
        let response = self
            .send(&action, Repeat::Idempotent, || {
                self.http.post(&url).timeout(REQUEST_TIMEOUT).json(policy)
            })
            .await?;
        self.check(&action, response).await.map(|_| ())
    }

    fn sprite_url(&self, name: &str, suffix: &str) -> String {
        format!("{}/v1/sprites/{name}{suffix}", self.base_url)
    }

    /// Sends a request, repeating it within the policy's bounds: any request
    /// the sprite refused with 503 "Process not ready" (nothing ran), and an
    /// idempotent one on other 5xx, 429 and refused connections. Returns the
    /// last response, whatever its status, for the caller to map; a "not
    /// ready" that outlasts the bound is [`SpritesError::NotReady`].
    async fn send(
        &self,
        action: &str,
        repeat: Repeat,
        build: impl Fn() -> RequestBuilder,
    ) -> Result<Response, SpritesError> {
        let mut transient = 0u32;
        let mut starting = 0u32;
        let mut waited = Duration::ZERO;
        loop {
            let response = match build().bearer_auth(&self.token.0).send().await {
                Ok(response) => response,
                Err(err)
                    if err.is_connect()
                        && repeat == Repeat::Idempotent
                        && transient < self.retry.max_retries =>
                {
                    tokio::time::sleep(self.retry.backoff(transient)).await;
                    transient += 1;
                    continue;
                }
                Err(err) => return Err(self.send_error(action, &err)),
            };
            let status = response.status();
            if status != StatusCode::SERVICE_UNAVAILABLE {
                if repeat == Repeat::Once {
                    return Ok(response);
                }
                match self.retry.decide(transient, status, response.headers()) {
                    RetryDecision::Stop => return Ok(response),
                    RetryDecision::RetryAfter(wait) => {
                        drop(response);
                        tokio::time::sleep(wait).await;
                        transient += 1;
                        continue;
                    }
                }
            }
            // A 503: the body says whether the supervisor is still starting.
            let headers = response.headers().clone();
            let text = error_text(response).await;
            if says_not_ready(&text) {
                if starting < self.retry.not_ready_retries {
                    // A server's own `Retry-After` wins when it is within bounds.
                    let wait = retry_after(&headers)
                        .filter(|wait| *wait <= self.retry.max_retry_after)
                        .unwrap_or_else(|| self.retry.backoff(starting));
                    tokio::time::sleep(wait).await;
                    waited = waited.saturating_add(wait);
                    starting += 1;
                    continue;
                }
                return Err(SpritesError::NotReady {
                    action: action.to_string(),
                    attempts: starting + 1,
                    waited_s: waited.as_secs(),
                });
            }
            if repeat == Repeat::Idempotent
                && let RetryDecision::RetryAfter(wait) =
                    self.retry.decide(transient, status, &headers)
            {
                tokio::time::sleep(wait).await;
                transient += 1;
                continue;
            }
            return Err(status_error(action, status, &headers, &text));
        }
    }

    fn send_error(&self, action: &str, err: &reqwest::Error) -> SpritesError {
        if err.is_connect() {
            SpritesError::Unreachable {
                base_url: self.base_url.clone(),
                action: action.to_string(),
                detail: error_chain(err),
            }
        } else {
            transport(action, err)
        }
    }

    /// Passes success through; turns any other status into an error.
    async fn check(&self, action: &str, response: Response) -> Result<Response, SpritesError> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let headers = response.headers().clone();
        let text = error_text(response).await;
        Err(status_error(action, status, &headers, &text))
    }

    /// A 404 from the fs API: a missing file (`ENOENT`), or a missing sprite.
    async fn not_found(
        &self,
        name: &str,
        path: &str,
        action: &str,
        response: Response,
    ) -> SpritesError {
        let text = error_text(response).await;
        let body: Option<Value> = serde_json::from_str(&text).ok();
        let code = body
            .as_ref()
            .and_then(|b| b.get("code"))
            .and_then(Value::as_str);
        let message = error_message(body.as_ref(), &text);
        if code == Some("ENOENT") || message.to_ascii_lowercase().contains("no such file") {
            SpritesError::NoSuchFile {
                name: name.to_string(),
                path: path.to_string(),
            }
        } else if message.to_ascii_lowercase().contains("sprite") {
            SpritesError::SpriteNotFound {
                name: name.to_string(),
                action: action.to_string(),
            }
        } else {
            // The API documents 404 on fs/read as "file does not exist".
            SpritesError::NoSuchFile {
                name: name.to_string(),
                path: path.to_string(),
            }
        }
    }
}

/// Most bytes of an error body read: enough for any message, and a body
/// that never ends (a misbehaving proxy) cannot hang the call.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// The start of an error response's body, as text (lossy).
async fn error_text(response: Response) -> String {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(Ok(chunk)) = stream.next().await {
        let room = MAX_ERROR_BODY.saturating_sub(body.len());
        body.extend_from_slice(chunk.get(..room.min(chunk.len())).unwrap_or_default());
        if body.len() >= MAX_ERROR_BODY {
            break;
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// The error for a non-success `status` whose body was `text`.
fn status_error(action: &str, status: StatusCode, headers: &HeaderMap, text: &str) -> SpritesError {
    let body: Option<Value> = serde_json::from_str(text).ok();
    let message = error_message(body.as_ref(), text);
    let action = action.to_string();
    match status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => SpritesError::Auth {
            status: status.as_u16(),
            action,
            message,
        },
        StatusCode::TOO_MANY_REQUESTS => SpritesError::RateLimited {
            action,
            message,
            retry_after: retry_after(headers).or_else(|| {
                body.as_ref()
                    .and_then(|b| b.get("retry_after_seconds"))
                    .and_then(Value::as_u64)
                    .map(Duration::from_secs)
            }),
        },
        _ => SpritesError::Api {
            status: status.as_u16(),
            action,
            message,
        },
    }
}

fn is_json(response: &Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"))
}

async fn read_json<T: serde::de::DeserializeOwned>(
    action: &str,
    response: Response,
) -> Result<T, SpritesError> {
    let body = response
        .bytes()
        .await
        .map_err(|err| transport(action, &err))?;
    serde_json::from_slice(&body).map_err(|err| SpritesError::Protocol {
        action: action.to_string(),
        detail: format!(
            "invalid JSON body ({err}): {}",
            clip(&String::from_utf8_lossy(&body))
        ),
    })
}

fn transport(action: &str, err: &reqwest::Error) -> SpritesError {
    SpritesError::Transport {
        action: action.to_string(),
        detail: error_chain(err),
    }
}

/// The error and its sources on one line: reqwest's top-level message alone
/// ("error sending request") does not say what went wrong.
fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The most useful message in an error body: `error`, then `message`, then
/// the validation list `errors`, else the raw text.
fn error_message(body: Option<&Value>, text: &str) -> String {
    if let Some(body) = body {
        for key in ["error", "message"] {
            if let Some(message) = body.get(key).and_then(Value::as_str) {
                return message.to_string();
            }
        }
        if let Some(errors) = body.get("errors").and_then(Value::as_array) {
            return errors
                .iter()
                .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_string))
                .collect::<Vec<_>>()
                .join("; ");
        }
    }
    if text.trim().is_empty() {
        "(empty response body)".to_string()
    } else {
        clip(text.trim())
    }
}

fn clip(text: &str) -> String {
    match text.char_indices().nth(MAX_ERROR_TEXT) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn error_bodies_of_any_bytes_give_a_bounded_message(body in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let text = String::from_utf8_lossy(&body);
            let parsed: Option<Value> = serde_json::from_str(&text).ok();
            let message = error_message(parsed.as_ref(), &text);
            prop_assert!(!message.is_empty());
            if parsed.is_none() {
                prop_assert!(message.chars().count() <= MAX_ERROR_TEXT + 1);
            }
            let status = status_error("x", StatusCode::BAD_GATEWAY, &HeaderMap::new(), &text);
            prop_assert!(status.to_string().contains("HTTP 502"));
        }
    }

    #[test]
    fn tokens_never_print() {
        let token = ApiToken::new("secret-value".into()).unwrap();
        assert!(!format!("{token:?}").contains("secret"));
        assert!(ApiToken::new("  ".into()).is_none());
    }

    #[test]
    fn error_messages_prefer_structured_fields() {
        let body = json!({"error": "sprite_creation_rate_limited", "message": "slow down"});
        assert_eq!(
            error_message(Some(&body), ""),
            "sprite_creation_rate_limited"
        );
        let body = json!({"errors": ["name is required", "bad"]});
        assert_eq!(error_message(Some(&body), ""), "name is required; bad");
        assert_eq!(error_message(None, "  oops "), "oops");
        assert_eq!(error_message(None, ""), "(empty response body)");
        assert_eq!(clip(&"x".repeat(600)).chars().count(), MAX_ERROR_TEXT + 1);
    }
}
