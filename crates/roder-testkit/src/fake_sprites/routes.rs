//! Routing, the auth/logging/fault gate, and the sprite lifecycle calls.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use serde_json::{Value, json};

use super::state::{FakeSprite, Shared};
use super::{FakeRoute, RecordedRequest, checkpoint, exec, fs, policy};

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/sprites", post(create_sprite).get(list_sprites))
        .route("/v1/sprites/{name}", get(get_sprite).delete(delete_sprite))
        .route(
            "/v1/sprites/{name}/exec",
            post(exec::run).get(exec::sessions),
        )
        .route("/v1/sprites/{name}/exec/{id}/kill", post(exec::kill))
        .route("/v1/sprites/{name}/fs/read", get(fs::read))
        .route("/v1/sprites/{name}/fs/write", put(fs::write))
        .route("/v1/sprites/{name}/checkpoint", post(checkpoint::create))
        .route("/v1/sprites/{name}/checkpoints", get(checkpoint::list))
        .route(
            "/v1/sprites/{name}/policy/network",
            get(policy::get).post(policy::set),
        )
        .fallback(|| async { json_error(StatusCode::NOT_FOUND, "no such route") })
        .layer(middleware::from_fn_with_state(Arc::clone(&shared), gate))
        .with_state(shared)
}

/// Logs the request, checks the token, then applies any injected fault.
async fn gate(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let route = classify(request.method(), request.uri().path());
    let expected = format!("Bearer {}", shared.token);
    let authorized = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        == Some(expected.as_str());
    let fault = {
        let mut inner = shared.lock();
        inner.log.push(RecordedRequest {
            method: request.method().to_string(),
            path: request.uri().path().to_string(),
            query: request.uri().query().unwrap_or_default().to_string(),
            route,
            authorized,
        });
        if authorized {
            inner.take_fault(route)
        } else {
            None
        }
    };
    if !authorized {
        return json_error(StatusCode::UNAUTHORIZED, "missing or invalid bearer token");
    }
    if let Some((status, retry_after)) = fault {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = json_error(status, "injected fault");
        if let Some(seconds) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        return response;
    }
    if supervised(route) && take_not_ready(&shared, request.uri().path()) {
        return not_ready();
    }
    next.run(request).await
}

/// Routes the live service serves through the sprite's process supervisor,
/// behind the middleware that answers 503 while it starts.
fn supervised(route: FakeRoute) -> bool {
    matches!(
        route,
        FakeRoute::Exec
            | FakeRoute::ExecSessions
            | FakeRoute::KillExec
            | FakeRoute::FsRead
            | FakeRoute::FsWrite
    )
}

/// Uses up one request of the sprite's not-ready window, if it has one left.
fn take_not_ready(shared: &Shared, path: &str) -> bool {
    let Some(name) = path.split('/').filter(|p| !p.is_empty()).nth(2) else {
        return false;
    };
    let mut inner = shared.lock();
    match inner.sprites.get_mut(name) {
        Some(sprite) if sprite.not_ready > 0 => {
            sprite.not_ready -= 1;
            true
        }
        _ => false,
    }
}

/// The supervisor middleware's answer: plain text, as Go's `http.Error` writes it.
fn not_ready() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "Process not ready\n",
    )
        .into_response()
}

fn classify(method: &Method, path: &str) -> FakeRoute {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let m = method.clone();
    match parts.as_slice() {
        ["v1", "sprites"] if m == Method::POST => FakeRoute::CreateSprite,
        ["v1", "sprites"] if m == Method::GET => FakeRoute::ListSprites,
        ["v1", "sprites", _] if m == Method::GET => FakeRoute::GetSprite,
        ["v1", "sprites", _] if m == Method::DELETE => FakeRoute::DeleteSprite,
        ["v1", "sprites", _, "exec"] if m == Method::POST => FakeRoute::Exec,
        ["v1", "sprites", _, "exec"] if m == Method::GET => FakeRoute::ExecSessions,
        ["v1", "sprites", _, "exec", _, "kill"] if m == Method::POST => FakeRoute::KillExec,
        ["v1", "sprites", _, "fs", "read"] if m == Method::GET => FakeRoute::FsRead,
        ["v1", "sprites", _, "fs", "write"] if m == Method::PUT => FakeRoute::FsWrite,
        ["v1", "sprites", _, "checkpoint"] if m == Method::POST => FakeRoute::Checkpoint,
        ["v1", "sprites", _, "checkpoints"] if m == Method::GET => FakeRoute::ListCheckpoints,
        ["v1", "sprites", _, "policy", "network"] if m == Method::GET => {
            FakeRoute::GetNetworkPolicy
        }
        ["v1", "sprites", _, "policy", "network"] if m == Method::POST => {
            FakeRoute::SetNetworkPolicy
        }
        _ => FakeRoute::Other,
    }
}

/// `{"error": message}` with `status`, the API's error shape.
pub(crate) fn json_error(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(json!({ "error": message }))).into_response()
}

/// The decoded `key=value` pairs of a raw query string, repeats kept.
pub(crate) fn query_pairs(query: &str) -> Vec<(String, String)> {
    format!("/?{query}")
        .parse::<Uri>()
        .ok()
        .and_then(|uri| Query::<Vec<(String, String)>>::try_from_uri(&uri).ok())
        .map(|Query(pairs)| pairs)
        .unwrap_or_default()
}

/// The first value of `key`, if any.
pub(crate) fn first<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn sprite_not_found(name: &str) -> Response {
    json_error(StatusCode::NOT_FOUND, &format!("sprite {name} not found"))
}

/// The 404 to answer when sprite `name` does not exist.
pub(crate) fn missing_sprite(shared: &Shared, name: &str) -> Option<Response> {
    let exists = shared.lock().sprites.contains_key(name);
    (!exists).then(|| sprite_not_found(name))
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

async fn create_sprite(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let parsed: Value = match serde_json::from_slice(&body) {
        Ok(value) => value,
        Err(err) => {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({ "errors": [format!("invalid JSON body: {err}")] })),
            )
                .into_response();
        }
    };
    let Some(name) = parsed.get("name").and_then(Value::as_str) else {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({ "errors": ["name is required"] })),
        )
            .into_response();
    };
    if !valid_name(name) {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({ "errors": [format!("name {name:?} is invalid")] })),
        )
            .into_response();
    }
    if shared.lock().sprites.contains_key(name) {
        return name_taken(name);
    }
    let root = shared.sprite_root(name);
    if let Err(err) = tokio::fs::create_dir_all(root.join("home/sprite")).await {
        return json_error(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string());
    }
    let mut inner = shared.lock();
    if inner.sprites.contains_key(name) {
        return name_taken(name);
    }
    let mut sprite = FakeSprite::new(name);
    sprite.not_ready = inner.not_ready_window;
    let body = sprite.to_json();
    inner.sprites.insert(name.to_string(), sprite);
    inner.creates += 1;
    (StatusCode::CREATED, axum::Json(body)).into_response()
}

/// 409, as the live service answers a create for a name that exists.
fn name_taken(name: &str) -> Response {
    json_error(
        StatusCode::CONFLICT,
        &format!("sprite name {name:?} already exists"),
    )
}

async fn list_sprites(
    State(shared): State<Arc<Shared>>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Response {
    let prefix = first(&pairs, "prefix").unwrap_or_default();
    let after = first(&pairs, "continuation_token").unwrap_or_default();
    let max = match first(&pairs, "max_results").map(str::parse::<usize>) {
        None => 50,
        Some(Ok(n)) if (1..=50).contains(&n) => n,
        Some(_) => {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({ "errors": ["max_results must be 1 to 50"] })),
            )
                .into_response();
        }
    };
    let inner = shared.lock();
    let matching: Vec<&FakeSprite> = inner
        .sprites
        .values()
        .filter(|s| s.name.starts_with(prefix) && s.name.as_str() > after)
        .collect();
    let has_more = matching.len() > max;
    let page: Vec<Value> = matching
        .iter()
        .take(max)
        .map(|s| json!({ "name": s.name, "org_slug": "fake-org", "updated_at": s.updated_at }))
        .collect();
    let next = has_more
        .then(|| matching.get(max - 1).map(|s| s.name.clone()))
        .flatten();
    axum::Json(json!({
        "sprites": page,
        "has_more": has_more,
        "next_continuation_token": next,
    }))
    .into_response()
}

async fn get_sprite(State(shared): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    match shared.lock().sprites.get(&name) {
        Some(sprite) => axum::Json(sprite.to_json()).into_response(),
        None => sprite_not_found(&name),
    }
}

async fn delete_sprite(State(shared): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    let removed = {
        let mut inner = shared.lock();
        let removed = inner.sprites.remove(&name);
        if removed.is_some() {
            inner.deletes += 1;
        }
        removed
    };
    let Some(sprite) = removed else {
        return sprite_not_found(&name);
    };
    sprite.abort_all();
    // The directory may still be some killed process's cwd; removal is best effort.
    let _ = tokio::fs::remove_dir_all(shared.sprite_root(&name)).await;
    StatusCode::NO_CONTENT.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_every_route() {
        let cases = [
            (Method::POST, "/v1/sprites", FakeRoute::CreateSprite),
            (Method::GET, "/v1/sprites", FakeRoute::ListSprites),
            (Method::GET, "/v1/sprites/a", FakeRoute::GetSprite),
            (Method::DELETE, "/v1/sprites/a", FakeRoute::DeleteSprite),
            (Method::POST, "/v1/sprites/a/exec", FakeRoute::Exec),
            (Method::GET, "/v1/sprites/a/exec", FakeRoute::ExecSessions),
            (
                Method::POST,
                "/v1/sprites/a/exec/12/kill",
                FakeRoute::KillExec,
            ),
            (Method::GET, "/v1/sprites/a/fs/read", FakeRoute::FsRead),
            (Method::PUT, "/v1/sprites/a/fs/write", FakeRoute::FsWrite),
            (
                Method::POST,
                "/v1/sprites/a/checkpoint",
                FakeRoute::Checkpoint,
            ),
            (
                Method::GET,
                "/v1/sprites/a/checkpoints",
                FakeRoute::ListCheckpoints,
            ),
            (
                Method::GET,
                "/v1/sprites/a/policy/network",
                FakeRoute::GetNetworkPolicy,
            ),
            (
                Method::POST,
                "/v1/sprites/a/policy/network",
                FakeRoute::SetNetworkPolicy,
            ),
            (
                Method::PUT,
                "/v1/sprites/a/policy/network",
                FakeRoute::Other,
            ),
            (Method::GET, "/v2/x", FakeRoute::Other),
        ];
        for (method, path, route) in cases {
            assert_eq!(classify(&method, path), route, "{method} {path}");
        }
    }

    #[test]
    fn query_pairs_keep_repeats_and_decode() {
        let pairs = query_pairs("cmd=echo&cmd=a%20b&env=K%3DV&dir=%2Fw");
        assert_eq!(
            pairs,
            vec![
                ("cmd".to_string(), "echo".to_string()),
                ("cmd".to_string(), "a b".to_string()),
                ("env".to_string(), "K=V".to_string()),
                ("dir".to_string(), "/w".to_string()),
            ]
        );
        assert!(query_pairs("").is_empty());
    }
}
