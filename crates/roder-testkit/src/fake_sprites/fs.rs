//! `fs/read` and `fs/write` against the sprite's host directory.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::routes::{first, missing_sprite};
use super::state::{Shared, host_path, sprite_path};

/// The documented error body: `{"error", "code", "path"}`.
fn fs_error(status: StatusCode, code: &str, message: &str, path: &str) -> Response {
    (
        status,
        axum::Json(json!({ "error": message, "code": code, "path": path })),
    )
        .into_response()
}

fn io_error(err: &std::io::Error, path: &str) -> Response {
    match err.kind() {
        std::io::ErrorKind::NotFound => fs_error(
            StatusCode::NOT_FOUND,
            "ENOENT",
            "no such file or directory",
            path,
        ),
        std::io::ErrorKind::PermissionDenied => {
            fs_error(StatusCode::FORBIDDEN, "EACCES", "permission denied", path)
        }
        _ => fs_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "EIO",
            &err.to_string(),
            path,
        ),
    }
}

/// The resolved sprite path from `path` and `workingDir` (default `/`);
/// `None` without a `path`.
fn target(pairs: &[(String, String)]) -> Option<String> {
    let path = first(pairs, "path").filter(|p| !p.is_empty())?;
    Some(sprite_path(first(pairs, "workingDir").unwrap_or("/"), path))
}

fn path_required() -> Response {
    fs_error(StatusCode::BAD_REQUEST, "EINVAL", "path is required", "")
}

/// `GET /v1/sprites/{name}/fs/read?path=&workingDir=`: raw bytes.
pub(crate) async fn read(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Response {
    if let Some(response) = missing_sprite(&shared, &name) {
        return response;
    }
    let Some(path) = target(&pairs) else {
        return path_required();
    };
    let host = host_path(&shared.sprite_root(&name), &path);
    match tokio::fs::metadata(&host).await {
        Ok(meta) if meta.is_dir() => {
            return fs_error(StatusCode::BAD_REQUEST, "EISDIR", "is a directory", &path);
        }
        Ok(_) => {}
        Err(err) => return io_error(&err, &path),
    }
    match tokio::fs::read(&host).await {
        Ok(bytes) => ([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response(),
        Err(err) => io_error(&err, &path),
    }
}

/// `PUT /v1/sprites/{name}/fs/write?path=&workingDir=&mode=0644&mkdir=true`.
/// Accepts both `mkdir` (the docs) and `mkdirParents` (the SDKs).
pub(crate) async fn write(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
    Query(pairs): Query<Vec<(String, String)>>,
    body: Bytes,
) -> Response {
    if let Some(response) = missing_sprite(&shared, &name) {
        return response;
    }
    let Some(path) = target(&pairs) else {
        return path_required();
    };
    let mode_text = first(&pairs, "mode").unwrap_or("0644");
    let Ok(mode) = u32::from_str_radix(mode_text, 8) else {
        return fs_error(
            StatusCode::BAD_REQUEST,
            "EINVAL",
            "mode must be octal",
            &path,
        );
    };
    let mkdir = ["mkdir", "mkdirParents"]
        .iter()
        .any(|key| first(&pairs, key) == Some("true"));
    let host = host_path(&shared.sprite_root(&name), &path);
    if mkdir
        && let Some(parent) = host.parent()
        && let Err(err) = tokio::fs::create_dir_all(parent).await
    {
        return io_error(&err, &path);
    }
    if let Ok(meta) = tokio::fs::metadata(&host).await
        && meta.is_dir()
    {
        return fs_error(StatusCode::BAD_REQUEST, "EISDIR", "is a directory", &path);
    }
    if let Err(err) = tokio::fs::write(&host, &body).await {
        return io_error(&err, &path);
    }
    if let Err(err) = tokio::fs::set_permissions(&host, std::fs::Permissions::from_mode(mode)).await
    {
        return io_error(&err, &path);
    }
    axum::Json(json!({ "path": path, "size": body.len(), "mode": format!("{mode:04o}") }))
        .into_response()
}
