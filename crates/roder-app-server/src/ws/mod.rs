//! The WebSocket transport: one JSON-RPC message per text frame on `/`,
//! plus `/healthz` and `/readyz`, and the web page (`web/`) at `/` (a
//! request without `Upgrade: websocket`), `/threads/ID` and `/assets/`.
//!
//! It listens on loopback unless given a token: [`bind_ws`] refuses any
//! other address without one, and with a token every upgrade must present
//! it (see `auth`).

pub(crate) mod auth;
mod listen;

use axum::serve::ListenerExt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::Context as _;
use axum::Router;
use axum::extract::ws::{
    Message, WebSocket, WebSocketUpgrade, rejection::WebSocketUpgradeRejection,
};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::{SinkExt, StreamExt};
use roder_core::Runtime;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use crate::connection::{Connection, ConnectionLimits, Fanout};
use crate::follow::SharedFollowSource;
use crate::protocol::ServerMessage;
use crate::web;

pub use listen::{ListenAddressError, resolve_listen_address};

/// How [`bind_ws`] listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WsServerConfig {
    /// Port 0 picks a free one; read it back with [`WsServer::local_addr`].
    pub listen: SocketAddr,
    /// Bearer token every connection must present. Required unless `listen`
    /// is a loopback address.
    pub token: Option<String>,
    pub max_message_bytes: usize,
    pub client_queue: usize,
}

impl Default for WsServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            token: None,
            max_message_bytes: ConnectionLimits::DEFAULT_MAX_MESSAGE_BYTES,
            client_queue: ConnectionLimits::DEFAULT_CLIENT_QUEUE,
        }
    }
}

/// A bound listener, ready to serve.
pub struct WsServer {
    listener: TcpListener,
    local_addr: SocketAddr,
    router: Router,
    state: Arc<ServerState>,
}

struct ServerState {
    runtime: Arc<Runtime>,
    /// Routes events to the connections following their thread.
    fanout: Arc<Fanout>,
    token: Option<String>,
    limits: ConnectionLimits,
    connections: AtomicUsize,
    /// Becomes true when the server shuts down: sessions close, `/readyz`
    /// answers 503.
    closing: watch::Sender<bool>,
}

/// Binds the listener. Refuses a non-loopback address without a token, an
/// empty token and limits of zero, before binding anything.
pub async fn bind_ws(runtime: Arc<Runtime>, config: WsServerConfig) -> anyhow::Result<WsServer> {
    bind_ws_following(runtime, config, None).await
}

/// [`bind_ws`] for one of many replicas on a shared store: `follow` brings
/// the events of threads other processes write (see
/// [`ThreadFollowSource`](crate::ThreadFollowSource)), so a client follows a
/// thread live whichever replica runs its turn.
pub async fn bind_ws_following(
    runtime: Arc<Runtime>,
    config: WsServerConfig,
    follow: Option<SharedFollowSource>,
) -> anyhow::Result<WsServer> {
    if config
        .token
        .as_deref()
        .is_some_and(|token| token.trim().is_empty())
    {
        anyhow::bail!("the WebSocket token is empty; set a non-empty token or none");
    }
    if !config.listen.ip().is_loopback() && config.token.is_none() {
        anyhow::bail!(
            "refusing to listen on {} without a token: anyone who can reach it could run commands; \
             give a token (--token-env NAME) or listen on a loopback address such as 127.0.0.1",
            config.listen
        );
    }
    let limits = ConnectionLimits {
        max_message_bytes: config.max_message_bytes,
        client_queue: config.client_queue,
        ..ConnectionLimits::default()
    };
    limits.validate()?;
    let listener = TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("could not listen on {}", config.listen))?;
    let local_addr = listener.local_addr()?;
    let state = Arc::new(ServerState {
        fanout: Fanout::start(&runtime, follow),
        runtime,
        token: config.token,
        limits,
        connections: AtomicUsize::new(0),
        closing: watch::Sender::new(false),
    });
    let router = Router::new()
        .route("/", get(root))
        .route("/threads/{thread_id}", get(thread_page))
        .route("/assets/{name}", get(asset))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(state.clone());
    Ok(WsServer {
        listener,
        local_addr,
        router,
        state,
    })
}

impl WsServer {
    /// The address actually bound (with the port picked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Serves until the listener fails.
    pub async fn serve(self) -> anyhow::Result<()> {
        axum::serve(self.listener.tap_io(no_delay), self.router)
            .await
            .context("WebSocket server failed")
    }

    /// Serves until `shutdown` completes, then closes every WebSocket
    /// session (requests already running still finish; turns go on in the
    /// runtime) and returns.
    pub async fn serve_with_shutdown<F>(self, shutdown: F) -> anyhow::Result<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let state = self.state;
        let signal = async move {
            shutdown.await;
            state.closing.send_replace(true);
        };
        axum::serve(self.listener.tap_io(no_delay), self.router)
            .with_graceful_shutdown(signal)
            .await
            .context("WebSocket server failed")
    }
}

async fn healthz() -> impl IntoResponse {
    axum::Json(json!({ "status": "ok" }))
}

/// Ready once bound (the runtime is built before the listener exists) and
/// until shutdown begins.
async fn readyz(State(state): State<Arc<ServerState>>) -> Response {
    let connections = state.connections.load(Ordering::SeqCst);
    if *state.closing.borrow() {
        let body = json!({ "status": "shutting_down", "connections": connections });
        return (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response();
    }
    axum::Json(json!({ "status": "ready", "connections": connections })).into_response()
}

/// `/`: the WebSocket for clients that ask to upgrade, the page otherwise.
async fn root(
    state: State<Arc<ServerState>>,
    headers: HeaderMap,
    upgrade_request: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    if web::wants_websocket(&headers) {
        return upgrade(state, headers, upgrade_request).await;
    }
    web::serve(web::Asset::Page, &headers, state.token.is_some())
}

async fn thread_page(State(state): State<Arc<ServerState>>, headers: HeaderMap) -> Response {
    web::serve(web::Asset::Page, &headers, state.token.is_some())
}

async fn asset(
    State(state): State<Arc<ServerState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    match web::Asset::named(&name) {
        Some(asset) => web::serve(asset, &headers, state.token.is_some()),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn upgrade(
    State(state): State<Arc<ServerState>>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    // Authentication comes first: nothing else is looked at without it.
    if let Err(refusal) = auth::check(&headers, state.token.as_deref()) {
        tracing::warn!(?refusal, "refused a WebSocket connection");
        return refusal.into_response();
    }
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade,
        Err(rejection) => return rejection.into_response(),
    };
    // Frames up to 4x the limit are read and answered with -32007; larger
    // ones are never buffered and close the connection (1009).
    let hard_limit = state.limits.max_message_bytes.saturating_mul(4);
    // The page offers `roder.v1` (with its token beside it); a browser
    // drops a connection whose offered subprotocols get no answer.
    upgrade
        .protocols([auth::SUBPROTOCOL])
        .max_message_size(hard_limit)
        .max_frame_size(hard_limit)
        .on_upgrade(move |socket| session(state, socket))
}

async fn session(state: Arc<ServerState>, socket: WebSocket) {
    state.connections.fetch_add(1, Ordering::SeqCst);
    let (connection, queue) =
        Connection::open(state.runtime.clone(), state.fanout.clone(), state.limits);
    let (sink, mut stream) = socket.split();
    let writer = tokio::spawn(write_frames(sink, queue));
    let mut closing = state.closing.subscribe();
    loop {
        let frame = tokio::select! {
            frame = stream.next() => frame,
            _ = closing.wait_for(|closing| *closing) => break,
        };
        let Some(frame) = frame else { break };
        match frame {
            Ok(Message::Text(text)) => connection.receive(text.as_str()).await,
            Ok(Message::Binary(bytes)) => match std::str::from_utf8(&bytes) {
                Ok(text) => connection.receive(text).await,
                Err(error) => connection.reject_unreadable(error).await,
            },
            Ok(Message::Close(_)) => break,
            Ok(Message::Ping(_) | Message::Pong(_)) => {}
            Err(error) => {
                tracing::debug!(%error, "WebSocket connection ended");
                break;
            }
        }
        if writer.is_finished() {
            break;
        }
    }
    // The client is gone: stop its notifications. Requests still running
    // finish on their own; turns go on in the runtime.
    drop(connection);
    writer.abort();
    state.connections.fetch_sub(1, Ordering::SeqCst);
}

async fn write_frames(
    mut sink: futures::stream::SplitSink<WebSocket, Message>,
    mut queue: mpsc::Receiver<ServerMessage>,
) {
    while let Some(message) = queue.recv().await {
        if feed(&mut sink, &message).await.is_err() {
            return;
        }
        while let Ok(next) = queue.try_recv() {
            if feed(&mut sink, &next).await.is_err() {
                return;
            }
        }
        if sink.flush().await.is_err() {
            return;
        }
    }
    let _ = sink.close().await;
}

async fn feed(
    sink: &mut futures::stream::SplitSink<WebSocket, Message>,
    message: &ServerMessage,
) -> Result<(), axum::Error> {
    let text = serde_json::to_string(message).map_err(axum::Error::new)?;
    sink.feed(Message::Text(text.into())).await
}

/// Small frames (SSE chunks, notifications) go out at once: without
/// `TCP_NODELAY`, Nagle's algorithm meets the peer's delayed ACK and adds
/// ~40 ms to every exchange.
fn no_delay(stream: &mut tokio::net::TcpStream) {
    let _ = stream.set_nodelay(true);
}
