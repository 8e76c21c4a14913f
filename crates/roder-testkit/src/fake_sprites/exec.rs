//! HTTP exec, and the exec session calls as the live service answers them
//! for HTTP execs.
//!
//! Exec starts a real host process in the sprite's mapped directory and
//! streams its output as frames (`0x01` stdout, `0x02` stderr, then `0x03`
//! and the exit code), each frame its own flushed chunk. It follows the live
//! server (superfly/sprites-go `server/api/exec_http.go`, `exec.go`):
//!
//! * the child gets exactly the `env` parameters as its environment, and an
//!   **empty** one without them (no `PATH`, no `HOME`); `dir` defaults to
//!   `/home/sprite`;
//! * the command leads its own process group, and when the request ends
//!   before the command does (the client aborted it), the whole group is
//!   SIGKILLed: that is how an HTTP exec is cancelled;
//! * an exit by signal reports 255, other codes are clamped to 0-255;
//! * `tty`, `id`, `detachable` and `cc` are refused with 400 (they belong to
//!   the WebSocket form);
//! * `GET /exec` lists tmux sessions only, so an HTTP exec never appears
//!   there, and `POST /exec/{id}/kill` cannot reach one (404).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::channel::mpsc;
use futures::{Stream, StreamExt};
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::sync::{Notify, watch};

use super::routes::{first, json_error, missing_sprite};
use super::state::{ExecSession, Shared, host_path, sprite_path};

const STDOUT: u8 = 0x01;
const STDERR: u8 = 0x02;
const EXIT: u8 = 0x03;
/// What the live server reports for a command killed by a signal.
const KILLED_BY_SIGNAL: u8 = 255;
/// Query parameters of the WebSocket form that HTTP exec refuses.
const WEBSOCKET_ONLY: &[&str] = &["tty", "id", "detachable", "cc"];
/// Where a command runs when the request names no `dir`.
const DEFAULT_DIR: &str = "/home/sprite";

type Frame = Result<Bytes, std::io::Error>;
type FrameSender = mpsc::UnboundedSender<Frame>;

fn frame(stream: u8, payload: &[u8]) -> Frame {
    let mut bytes = Vec::with_capacity(payload.len() + 1);
    bytes.push(stream);
    bytes.extend_from_slice(payload);
    Ok(Bytes::from(bytes))
}

/// The response body of one exec. Dropped before its last frame was taken
/// (hyper drops it when the client goes away), it notifies `abort`, and the
/// supervisor kills the command's process group.
struct ExecBody {
    frames: mpsc::UnboundedReceiver<Frame>,
    abort: Option<Arc<Notify>>,
    ended: bool,
}

impl Stream for ExecBody {
    type Item = Frame;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Frame>> {
        let this = self.get_mut();
        let next = Pin::new(&mut this.frames).poll_next(cx);
        if let Poll::Ready(None) = next {
            this.ended = true;
        }
        next
    }
}

impl Drop for ExecBody {
    fn drop(&mut self) {
        if !self.ended
            && let Some(abort) = &self.abort
        {
            // `notify_one` keeps a permit, so a supervisor not yet waiting still sees it.
            abort.notify_one();
        }
    }
}

/// `POST /v1/sprites/{name}/exec?cmd=…&path=…&dir=…&env=…&stdin=true`.
pub(crate) async fn run(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
    Query(pairs): Query<Vec<(String, String)>>,
    body: Bytes,
) -> Response {
    if let Some(response) = missing_sprite(&shared, &name) {
        return response;
    }
    if let Some(key) = WEBSOCKET_ONLY
        .iter()
        .find(|key| first(&pairs, key).is_some())
    {
        return json_error(
            StatusCode::BAD_REQUEST,
            &format!("{key} is not supported by HTTP exec; use the WebSocket exec"),
        );
    }
    let argv: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| k == "cmd")
        .map(|(_, v)| v.clone())
        .collect();
    let Some((argv0, args)) = argv.split_first() else {
        return json_error(StatusCode::BAD_REQUEST, "cmd is required");
    };
    let program = first(&pairs, "path").unwrap_or(argv0).to_string();
    let dir = sprite_path("/", first(&pairs, "dir").unwrap_or(DEFAULT_DIR));
    let mut env = Vec::new();
    for (_, pair) in pairs.iter().filter(|(k, _)| k == "env") {
        match pair.split_once('=') {
            Some((key, value)) if !key.is_empty() => env.push((key.to_string(), value.to_string())),
            _ => {
                return json_error(
                    StatusCode::BAD_REQUEST,
                    &format!("env {pair:?} is not KEY=VALUE"),
                );
            }
        }
    }
    let stdin = (first(&pairs, "stdin") == Some("true")).then_some(body);
    let host_dir = host_path(&shared.sprite_root(&name), &dir);
    let is_dir = tokio::fs::metadata(&host_dir)
        .await
        .map(|m| m.is_dir())
        .unwrap_or(false);
    if !is_dir {
        return json_error(
            StatusCode::BAD_REQUEST,
            &format!("chdir {dir}: no such file or directory"),
        );
    }

    let mut command = Command::new(&program);
    command
        .arg0(argv0)
        .args(args)
        .current_dir(&host_dir)
        // Exactly the requested environment: none at all without `env`.
        .env_clear()
        .envs(env)
        .process_group(0)
        .stdin(if stdin.is_some() {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        })
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);

    let (tx, rx) = mpsc::unbounded();
    let mut abort = None;
    match command.spawn() {
        Err(err) => {
            let code: u8 = if err.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            let _ = tx.unbounded_send(frame(
                STDERR,
                format!("exec: {program}: {err}\n").as_bytes(),
            ));
            let _ = tx.unbounded_send(frame(EXIT, &[code]));
        }
        Ok(child) => {
            let id = child.id().unwrap_or_default();
            let notify = Arc::new(Notify::new());
            let (exit_tx, exit_rx) = watch::channel(None);
            {
                let mut inner = shared.lock();
                if let Some(sprite) = inner.sprites.get_mut(&name) {
                    sprite.status = "running";
                    sprite.sessions.insert(
                        id,
                        ExecSession {
                            abort: Arc::clone(&notify),
                            exited: exit_rx,
                        },
                    );
                }
            }
            shared.bump();
            tokio::spawn(supervise(
                Arc::clone(&shared),
                name.clone(),
                child,
                stdin,
                tx,
                Arc::clone(&notify),
                exit_tx,
            ));
            abort = Some(notify);
        }
    }

    let body = ExecBody {
        frames: rx,
        abort,
        ended: false,
    };
    if shared.lock().exec_json {
        return json_body(body).await;
    }
    let mut response = Body::from_stream(body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/octet-stream"),
    );
    response
}

/// Waits for the process and everything holding its output pipes,
/// forwarding output as frames; on `abort` it SIGKILLs the process group
/// first. Records the exit before sending the exit frame, so a client that
/// has read the exit frame sees the command gone.
async fn supervise(
    shared: Arc<Shared>,
    name: String,
    mut child: Child,
    stdin: Option<Bytes>,
    tx: FrameSender,
    abort: Arc<Notify>,
    exited: watch::Sender<Option<i32>>,
) {
    let group = child.id();
    let stdin_pipe = child.stdin.take();
    let feed = async move {
        if let (Some(data), Some(mut pipe)) = (stdin, stdin_pipe) {
            let _ = pipe.write_all(&data).await;
        }
    };
    let out = pump(child.stdout.take(), STDOUT, tx.clone());
    let err = pump(child.stderr.take(), STDERR, tx.clone());
    let work = async {
        let ((), (), (), status) = tokio::join!(feed, out, err, child.wait());
        status
    };
    tokio::pin!(work);
    let status = tokio::select! {
        status = &mut work => status,
        () = abort.notified() => {
            if let Some(group) = group {
                kill_group(group).await;
            }
            work.await
        }
    };
    let code = match status {
        Ok(status) => status
            .code()
            .map_or(KILLED_BY_SIGNAL, |code| code.clamp(0, 255) as u8),
        Err(_) => 1,
    };
    let _ = exited.send(Some(i32::from(code)));
    {
        let mut inner = shared.lock();
        if let Some(sprite) = inner.sprites.get_mut(&name)
            && sprite.sessions.values().all(|s| !s.is_active())
        {
            sprite.status = "warm";
        }
    }
    shared.bump();
    let _ = tx.unbounded_send(frame(EXIT, &[code]));
}

/// SIGKILLs process group `group`, as the live server does when an exec's
/// request ends. testkit has no libc binding, so this runs `kill(1)`, which
/// takes a negative pid as a group.
async fn kill_group(group: u32) {
    let _ = Command::new("kill")
        .args(["-s", "KILL", "--", &format!("-{group}")])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .await;
}

async fn pump(pipe: Option<impl AsyncRead + Unpin>, stream: u8, tx: FrameSender) {
    let Some(mut pipe) = pipe else { return };
    let mut buffer = vec![0u8; 8192];
    loop {
        match pipe.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            // Keep draining after the client left, so the process never blocks on a full pipe.
            Ok(n) => {
                let _ = tx.unbounded_send(frame(stream, buffer.get(..n).unwrap_or_default()));
            }
        }
    }
}

/// The `application/json` form: the whole run, buffered.
async fn json_body(mut body: ExecBody) -> Response {
    let (mut stdout, mut stderr, mut code) = (Vec::new(), Vec::new(), None);
    while let Some(Ok(bytes)) = body.next().await {
        match bytes.split_first() {
            Some((&STDOUT, payload)) => stdout.extend_from_slice(payload),
            Some((&STDERR, payload)) => stderr.extend_from_slice(payload),
            Some((&EXIT, payload)) => code = payload.first().copied(),
            _ => {}
        }
    }
    axum::Json(json!({
        "exit_code": code,
        "stdout": String::from_utf8_lossy(&stdout),
        "stderr": String::from_utf8_lossy(&stderr),
    }))
    .into_response()
}

/// `GET /v1/sprites/{name}/exec`: the sprite's tmux sessions. HTTP execs are
/// not among them, and the fake runs no others, so the list is empty.
pub(crate) async fn sessions(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
) -> Response {
    if let Some(response) = missing_sprite(&shared, &name) {
        return response;
    }
    axum::Json(json!({ "sessions": [] })).into_response()
}

/// `POST /v1/sprites/{name}/exec/{id}/kill`: there are no sessions to kill
/// (see [`sessions`]), so any id is unknown.
pub(crate) async fn kill(
    State(shared): State<Arc<Shared>>,
    Path((name, id)): Path<(String, String)>,
) -> Response {
    if let Some(response) = missing_sprite(&shared, &name) {
        return response;
    }
    json_error(
        StatusCode::NOT_FOUND,
        &format!("exec session {id} not found"),
    )
}
