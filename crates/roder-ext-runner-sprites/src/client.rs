//! The Sprites REST API over HTTP: one method per call the provider makes.
//!
//! Wire details follow `SPRITES_API.md`; the README says which of them are
//! documented and which are assumed. Every request carries the bearer token;
//! no request or error message ever includes it.

use std::fmt;
use std::time::Duration;

use futures::StreamExt;
use reqwest::header::CONTENT_TYPE;
use reqwest::{Client, RequestBuilder, Response, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::checkpoint::{CheckpointCreated, CheckpointStream};
use crate::error::SpritesError;
use crate::exec_frames::{ExecCollector, decode_json_body};
use crate::ndjson::LineBuffer;
use crate::retry::{RetryDecision, RetryPolicy, retry_after};

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

/// An entry of `GET /v1/sprites/{name}/exec`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ExecSessionInfo {
    pub id: Value,
    #[serde(default)]
    pub command: Value,
    #[serde(default)]
    pub workdir: Option<String>,
    #[serde(default)]
    pub is_active: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct ExecSessionList {
    #[serde(default)]
    sessions: Vec<ExecSessionInfo>,
}

/// How a kill request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KillOutcome {
    /// The server reported the process killed or exited.
    Killed,
    /// 410: the process had already exited.
    AlreadyExited,
    /// The event stream reported an error.
    Failed(String),
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
            .send_idempotent(&action, || self.http.get(&url).timeout(REQUEST_TIMEOUT))
            .await?;
        if response.status() == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let response = self.check(&action, response).await?;
        read_json(&action, response).await.map(Some)
    }

    /// `POST /v1/sprites`; sent once (a repeat could create a second sprite).
    pub(crate) async fn create_sprite(&self, name: &str) -> Result<SpriteInfo, SpritesError> {
        let action = format!("creating sprite \"{name}\"");
        let url = format!("{}/v1/sprites", self.base_url);
        let request = self
            .http
            .post(&url)
            .timeout(REQUEST_TIMEOUT)
            .json(&json!({ "name": name }));
        let response = self.send_once(&action, request).await?;
        let response = self.check(&action, response).await?;
        read_json(&action, response).await
    }

    /// `DELETE /v1/sprites/{name}`; `false` when it was already gone.
    pub(crate) async fn delete_sprite(&self, name: &str) -> Result<bool, SpritesError> {
        let action = format!("deleting sprite \"{name}\"");
        let url = self.sprite_url(name, "");
        let response = self
            .send_idempotent(&action, || self.http.delete(&url).timeout(REQUEST_TIMEOUT))
            .await?;
        if response.status() == StatusCode::NOT_FOUND {
            return Ok(false);
        }
        self.check(&action, response).await.map(|_| true)
    }

    /// HTTP exec: `POST /v1/sprites/{name}/exec?cmd=…&path=…&dir=…&env=…`.
    ///
    /// Output lands in `sink` as it streams, so a caller that stops waiting
    /// (deadline, cancellation) still has what arrived. Never retried: the
    /// command may already have run.
    pub(crate) async fn exec(
        &self,
        name: &str,
        call: &ExecCall,
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
        let request = self
            .http
            .post(self.sprite_url(name, "/exec"))
            .query(&query)
            .header(CONTENT_TYPE, "application/octet-stream")
            .body(Vec::new());
        let response = self.send_once(&action, request).await?;
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

    /// `GET /v1/sprites/{name}/exec`: the sprite's exec sessions.
    pub(crate) async fn exec_sessions(
        &self,
        name: &str,
    ) -> Result<Vec<ExecSessionInfo>, SpritesError> {
        let action = format!("listing exec sessions of sprite \"{name}\"");
        let url = self.sprite_url(name, "/exec");
        let response = self
            .send_idempotent(&action, || self.http.get(&url).timeout(REQUEST_TIMEOUT))
            .await?;
        let response = self.check(&action, response).await?;
        let list: ExecSessionList = read_json(&action, response).await?;
        Ok(list.sessions)
    }

    /// `POST /v1/sprites/{name}/exec/{id}/kill?signal=TERM&timeout=…`, reading
    /// the NDJSON event stream to its end.
    pub(crate) async fn kill_exec_session(
        &self,
        name: &str,
        id: &str,
        grace: Duration,
    ) -> Result<KillOutcome, SpritesError> {
        let action = format!("killing exec session {id} of sprite \"{name}\"");
        let grace = format!("{}s", grace.as_secs().max(1));
        let request = self
            .http
            .post(self.sprite_url(name, &format!("/exec/{id}/kill")))
            .query(&[("signal", "TERM"), ("timeout", grace.as_str())])
            .timeout(REQUEST_TIMEOUT);
        let response = self.send_once(&action, request).await?;
        if response.status() == StatusCode::GONE {
            return Ok(KillOutcome::AlreadyExited);
        }
        let response = self.check(&action, response).await?;
        let mut lines = LineBuffer::default();
        let mut events = Vec::new();
        let mut body = response.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|err| transport(&action, &err))?;
            events.extend(lines.push(&chunk));
        }
        events.extend(lines.finish());
        for line in events {
            let Ok(event) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if event.get("type").and_then(Value::as_str) == Some("error") {
                let message = event
                    .get("message")
                    .or_else(|| event.get("error"))
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                    .unwrap_or(line);
                return Ok(KillOutcome::Failed(message));
            }
        }
        Ok(KillOutcome::Killed)
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
            .send_idempotent(&action, || {
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
    pub(crate) async fn write_file(
        &self,
        name: &str,
        path: &str,
        working_dir: &str,
        contents: Vec<u8>,
    ) -> Result<(), SpritesError> {
        let action = format!("writing {path} in sprite \"{name}\"");
        let request = self
            .http
            .put(self.sprite_url(name, "/fs/write"))
            .query(&[
                ("path", path),
                ("workingDir", working_dir),
                ("mkdir", "true"),
                ("mkdirParents", "true"),
            ])
            .header(CONTENT_TYPE, "application/octet-stream")
            .timeout(REQUEST_TIMEOUT)
            .body(contents);
        let response = self.send_once(&action, request).await?;
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
        let request = self
            .http
            .post(self.sprite_url(name, "/checkpoint"))
            .timeout(REQUEST_TIMEOUT)
            .json(&json!({ "comment": comment }));
        let response = self.send_once(&action, request).await?;
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

    fn sprite_url(&self, name: &str, suffix: &str) -> String {
        format!("{}/v1/sprites/{name}{suffix}", self.base_url)
    }

    /// Sends a request that is safe to repeat, retrying 5xx, 429 and refused
    /// connections within the policy's bounds. Returns the last response,
    /// whatever its status; the caller maps errors.
    async fn send_idempotent(
        &self,
        action: &str,
        build: impl Fn() -> RequestBuilder,
    ) -> Result<Response, SpritesError> {
        let mut attempt = 0u32;
        loop {
            match build().bearer_auth(&self.token.0).send().await {
                Ok(response) => {
                    match self
                        .retry
                        .decide(attempt, response.status(), response.headers())
                    {
                        RetryDecision::Stop => return Ok(response),
                        RetryDecision::RetryAfter(wait) => {
                            drop(response);
                            tokio::time::sleep(wait).await;
                        }
                    }
                }
                Err(err) if err.is_connect() && attempt < self.retry.max_retries => {
                    tokio::time::sleep(self.retry.backoff(attempt)).await;
                }
                Err(err) => return Err(self.send_error(action, &err)),
            }
            attempt += 1;
        }
    }

    /// Sends a request exactly once.
    async fn send_once(
        &self,
        action: &str,
        request: RequestBuilder,
    ) -> Result<Response, SpritesError> {
        request
            .bearer_auth(&self.token.0)
            .send()
            .await
            .map_err(|err| self.send_error(action, &err))
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
        let header_wait = retry_after(response.headers());
        let text = response.text().await.unwrap_or_default();
        let body: Option<Value> = serde_json::from_str(&text).ok();
        let message = error_message(body.as_ref(), &text);
        let action = action.to_string();
        Err(match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => SpritesError::Auth {
                status: status.as_u16(),
                action,
                message,
            },
            StatusCode::TOO_MANY_REQUESTS => SpritesError::RateLimited {
                action,
                message,
                retry_after: header_wait.or_else(|| {
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
        })
    }

    /// A 404 from the fs API: a missing file (`ENOENT`), or a missing sprite.
    async fn not_found(
        &self,
        name: &str,
        path: &str,
        action: &str,
        response: Response,
    ) -> SpritesError {
        let text = response.text().await.unwrap_or_default();
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
