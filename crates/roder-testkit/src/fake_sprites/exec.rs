//! HTTP exec, exec session listing and kill.
//!
//! Exec starts a real host process in the sprite's mapped directory and
//! streams its output as frames (`0x01` stdout, `0x02` stderr, then `0x03`
//! and the exit code), each frame its own flushed chunk. Like the real
//! service, the process does not die when the client goes away: it runs on
//! until it exits or is killed through the kill call (or the sprite or the
//! fake server goes away).

use std::os::unix::process::ExitStatusExt;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use futures::channel::mpsc;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::sync::{oneshot, watch};

use super::routes::{first, json_error, missing_sprite};
use super::state::{ExecSession, Shared, host_path, now_rfc3339, sprite_path};

const STDOUT: u8 = 0x01;
const STDERR: u8 = 0x02;
const EXIT: u8 = 0x03;
const SIGNALS: &[&str] = &["INT", "TERM", "HUP", "KILL", "QUIT", "USR1", "USR2"];

type FrameSender = mpsc::UnboundedSender<Result<Bytes, std::io::Error>>;

fn frame(stream: u8, payload: &[u8]) -> Result<Bytes, std::io::Error> {
    let mut bytes = Vec::with_capacity(payload.len() + 1);
    bytes.push(stream);
    bytes.extend_from_slice(payload);
    Ok(Bytes::from(bytes))
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
    let argv: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| k == "cmd")
        .map(|(_, v)| v.clone())
        .collect();
    let Some(argv0) = argv.first().cloned() else {
        return json_error(StatusCode::BAD_REQUEST, "cmd is required");
    };
    let program = first(&pairs, "path").unwrap_or(&argv0).to_string();
    let dir = sprite_path("/", first(&pairs, "dir").unwrap_or("/home/sprite"));
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
        .arg0(&argv0)
        .args(&argv[1..])
        .current_dir(&host_dir)
        .stdin(if stdin.is_some() {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        })
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    if !env.is_empty() {
        command.env_clear().envs(env);
    }

    let (tx, rx) = mpsc::unbounded();
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
            let (kill_tx, kill_rx) = oneshot::channel();
            let (exit_tx, exit_rx) = watch::channel(None);
            {
                let mut inner = shared.lock();
                if let Some(sprite) = inner.sprites.get_mut(&name) {
                    sprite.status = "running";
                    sprite.sessions.insert(
                        id,
                        ExecSession {
                            id,
                            command: argv.join(" "),
                            workdir: dir.clone(),
                            created: now_rfc3339(),
                            kill: Some(kill_tx),
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
                kill_rx,
                exit_tx,
            ));
        }
    }

    if shared.lock().exec_json {
        return json_body(rx).await;
    }
    let mut response = Body::from_stream(rx).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/octet-stream"),
    );
    response
}

/// Waits for the process (or a kill), forwarding output as frames; records
/// the exit before sending the exit frame, so a client that has read the
/// exit frame sees the session inactive.
async fn supervise(
    shared: Arc<Shared>,
    name: String,
    mut child: Child,
    stdin: Option<Bytes>,
    tx: FrameSender,
    kill: oneshot::Receiver<()>,
    exited: watch::Sender<Option<i32>>,
) {
    let stdin_pipe = child.stdin.take();
    let feed = async move {
        if let (Some(data), Some(mut pipe)) = (stdin, stdin_pipe) {
            let _ = pipe.write_all(&data).await;
        }
    };
    let out = pump(child.stdout.take(), STDOUT, tx.clone());
    let err = pump(child.stderr.take(), STDERR, tx.clone());
    let wait = async {
        tokio::select! {
            status = child.wait() => status,
            // Killed, or the kill handle was dropped with its sprite.
            _ = kill => {
                let _ = child.start_kill();
                child.wait().await
            }
        }
    };
    let ((), (), (), status) = tokio::join!(feed, out, err, wait);
    let code = match status {
        Ok(status) => status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or_default()),
        Err(_) => 1,
    };
    let _ = exited.send(Some(code));
    {
        let mut inner = shared.lock();
        if let Some(sprite) = inner.sprites.get_mut(&name)
            && sprite.sessions.values().all(|s| !s.is_active())
        {
            sprite.status = "warm";
        }
    }
    shared.bump();
    let _ = tx.unbounded_send(frame(EXIT, &[(code & 0xff) as u8]));
}

async fn pump(pipe: Option<impl AsyncRead + Unpin>, stream: u8, tx: FrameSender) {
    let Some(mut pipe) = pipe else { return };
    let mut buffer = vec![0u8; 8192];
    loop {
        match pipe.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            // Keep draining after the client left, so the process never blocks on a full pipe.
            Ok(n) => {
                let _ = tx.unbounded_send(frame(stream, &buffer[..n]));
            }
        }
    }
}

/// The `application/json` form: the whole run, buffered.
async fn json_body(mut rx: mpsc::UnboundedReceiver<Result<Bytes, std::io::Error>>) -> Response {
    let (mut stdout, mut stderr, mut code) = (Vec::new(), Vec::new(), None);
    while let Some(Ok(bytes)) = rx.next().await {
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

/// `GET /v1/sprites/{name}/exec`: every session, running or exited.
pub(crate) async fn sessions(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
) -> Response {
    let inner = shared.lock();
    match inner.sprites.get(&name) {
        Some(sprite) => {
            let sessions: Vec<_> = sprite.sessions.values().map(ExecSession::to_json).collect();
            axum::Json(json!({ "sessions": sessions })).into_response()
        }
        None => json_error(StatusCode::NOT_FOUND, &format!("sprite {name} not found")),
    }
}

/// `POST /v1/sprites/{name}/exec/{id}/kill?signal=TERM&timeout=10s`.
///
/// Any signal kills the process outright (SIGKILL); the NDJSON answer ends
/// with `complete` once it has exited. 410 if it had already exited.
pub(crate) async fn kill(
    State(shared): State<Arc<Shared>>,
    Path((name, id)): Path<(String, String)>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Response {
    let signal = first(&pairs, "signal").unwrap_or("TERM").to_string();
    if !SIGNALS.contains(&signal.as_str()) {
        return json_error(StatusCode::BAD_REQUEST, &format!("unknown signal {signal}"));
    }
    let (handle, mut exited) = {
        let mut inner = shared.lock();
        let Some(sprite) = inner.sprites.get_mut(&name) else {
            return json_error(StatusCode::NOT_FOUND, &format!("sprite {name} not found"));
        };
        let Some(session) = id
            .parse::<u32>()
            .ok()
            .and_then(|id| sprite.sessions.get_mut(&id))
        else {
            return json_error(
                StatusCode::NOT_FOUND,
                &format!("exec session {id} not found"),
            );
        };
        if !session.is_active() {
            return json_error(StatusCode::GONE, "process already exited");
        }
        (session.kill.take(), session.exited.clone())
    };
    if let Some(handle) = handle {
        let _ = handle.send(());
    }
    // The supervisor records the exit before dropping its sender, so an
    // error here still leaves the final value readable.
    let code = exited
        .wait_for(Option::is_some)
        .await
        .map(|code| *code)
        .ok()
        .flatten();
    let code = code.or(*exited.borrow());
    let lines = [
        json!({ "type": "signal", "message": format!("sent {signal}"), "signal": signal, "pid": id }),
        json!({ "type": "killed", "message": format!("process {id} killed") }),
        json!({ "type": "complete", "exit_code": code }),
    ];
    let body: String = lines.iter().map(|line| format!("{line}\n")).collect();
    let mut response = body.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/x-ndjson"),
    );
    response
}
