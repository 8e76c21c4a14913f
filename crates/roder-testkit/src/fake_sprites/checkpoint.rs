//! Checkpoints: an NDJSON progress stream, ids `v1`, `v2`, … per sprite.
//!
//! The fake records checkpoints but copies no files; restoring is not
//! implemented.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::routes::json_error;
use super::state::{FakeCheckpoint, Shared, now_rfc3339};

/// `POST /v1/sprites/{name}/checkpoint` with an optional `{"comment"}` body.
pub(crate) async fn create(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    let comment = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("comment").and_then(Value::as_str).map(str::to_string));
    let time = now_rfc3339();
    let lines: Vec<Value> = {
        let mut inner = shared.lock();
        let in_band_error = inner.checkpoint_error.take();
        let Some(sprite) = inner.sprites.get_mut(&name) else {
            return json_error(StatusCode::NOT_FOUND, &format!("sprite {name} not found"));
        };
        let mut lines =
            vec![json!({ "type": "info", "data": "Creating checkpoint", "time": time })];
        match in_band_error {
            Some(error) => lines.push(json!({ "type": "error", "error": error, "time": time })),
            None => {
                let id = format!("v{}", sprite.checkpoints.len() + 1);
                sprite.checkpoints.push(FakeCheckpoint {
                    id: id.clone(),
                    comment,
                    created_at: time.clone(),
                });
                lines.push(json!({ "type": "info", "data": "Flushing filesystem", "time": time }));
                lines.push(json!({
                    "type": "complete",
                    "data": format!("Checkpoint {id} created"),
                    "time": time,
                }));
            }
        }
        lines
    };
    // One line per chunk, like a server reporting progress as it goes.
    let chunks: Vec<Result<Bytes, std::io::Error>> = lines
        .iter()
        .map(|line| Ok(Bytes::from(format!("{line}\n"))))
        .collect();
    let mut response = Body::from_stream(futures::stream::iter(chunks)).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/x-ndjson"),
    );
    response
}

/// `GET /v1/sprites/{name}/checkpoints`.
pub(crate) async fn list(State(shared): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    let inner = shared.lock();
    match inner.sprites.get(&name) {
        Some(sprite) => {
            let list: Vec<Value> = sprite
                .checkpoints
                .iter()
                .rev()
                .map(|c| json!({ "id": c.id, "create_time": c.created_at, "comment": c.comment }))
                .collect();
            axum::Json(list).into_response()
        }
        None => json_error(StatusCode::NOT_FOUND, &format!("sprite {name} not found")),
    }
}
