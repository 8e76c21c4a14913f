//! `app-server`: 100 concurrent WebSocket clients on 127.0.0.1, each
//! starting a thread and a scripted turn of a few tool calls through
//! `roder-app-server`. Every client then reads its thread's log with
//! `thread/events` and checks it received every event as a notification.
//!
//! Figures: `events_per_s` (notifications delivered to all clients per
//! second of the turns' wall time) and `event_latency_p95_ms` (notification
//! receive time minus the event's timestamp, over every event).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use roder_app_server::{WsServerConfig, bind_ws};
use roder_core::RuntimeConfig;
use roder_testkit::ToolLoopEngine;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::coding_runtime;
use crate::figure::{median, percentile, print, sized};

fn client_count() -> usize {
    sized(100, 2)
}

const TOOL_CALLS: usize = 3;
/// The whole run is bounded: a stuck client fails the bench, never hangs it.
const BOUND: Duration = Duration::from_secs(120);

pub async fn run() -> anyhow::Result<()> {
    tokio::time::timeout(BOUND, measure())
        .await
        .map_err(|_| anyhow::anyhow!("app-server bench did not finish within {BOUND:?}"))?
}

async fn measure() -> anyhow::Result<()> {
    let workspace = tempfile::tempdir()?;
    let store = tempfile::tempdir()?;
    tokio::fs::write(workspace.path().join("README.md"), "bench\n").await?;
    let engine = Arc::new(ToolLoopEngine::new(
        "read_file",
        r#"{"path":"README.md"}"#,
        TOOL_CALLS,
        "read it",
    ));
    let builder = coding_runtime::builder(engine, store.path(), workspace.path())?;
    let runtime = coding_runtime::runtime(builder, workspace.path(), RuntimeConfig::default())?;
    // Loopback only (the default listen address).
    let server = bind_ws(runtime, WsServerConfig::default()).await?;
    let addr = server.local_addr();
    anyhow::ensure!(addr.ip().is_loopback(), "the bench must stay on loopback");
    let server = tokio::spawn(server.serve());

    let start_line = Arc::new(tokio::sync::Barrier::new(client_count()));
    let clients: Vec<_> = (0..client_count())
        .map(|_| tokio::spawn(one_client(addr, start_line.clone())))
        .collect();
    let mut runs = Vec::with_capacity(client_count());
    for client in clients {
        runs.push(client.await??);
    }
    server.abort();

    let first_start = runs.iter().map(|run| run.started).min();
    let last_end = runs.iter().map(|run| run.ended).max();
    let wall = match (first_start, last_end) {
        (Some(start), Some(end)) => end.duration_since(start).as_secs_f64(),
        _ => anyhow::bail!("no client ran"),
    };
    let events: usize = runs.iter().map(|run| run.turn_events).sum();
    let lost: usize = runs.iter().map(|run| run.lost).sum();
    anyhow::ensure!(lost == 0, "{lost} events were persisted but never notified");
    let mut latencies: Vec<f64> = runs.into_iter().flat_map(|run| run.latencies_ms).collect();
    let p95 = percentile(&mut latencies, 0.95);
    let max = latencies.last().copied().unwrap_or(0.0);
    let p50 = median(&mut latencies);
    let context = json!({
        "clients": client_count(), "tool_calls_per_turn": TOOL_CALLS, "events": events,
        "lost": lost, "wall_s": wall, "latency_p50_ms": p50, "latency_max_ms": max,
        "transport": "websocket 127.0.0.1",
    });
    print(
        "app-server",
        "events_per_s",
        events as f64 / wall,
        "events/s",
        context.clone(),
    );
    print("app-server", "event_latency_p95_ms", p95, "ms", context);
    Ok(())
}

struct ClientRun {
    started: Instant,
    ended: Instant,
    /// Notifications received during the turn.
    turn_events: usize,
    latencies_ms: Vec<f64>,
    /// Persisted events that never arrived as notifications.
    lost: usize,
}

async fn one_client(
    addr: SocketAddr,
    start_line: Arc<tokio::sync::Barrier>,
) -> anyhow::Result<ClientRun> {
    let mut client = RpcClient::connect(addr).await?;
    client.request("initialize", json!({})).await?;
    let thread = client.request("thread/start", json!({})).await?;
    let thread_id = thread["thread"]["threadId"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("thread/start returned no thread id"))?
        .to_string();
    let before_turn = client.notified.len();
    client.latencies_ms.clear();
    start_line.wait().await;

    let started = Instant::now();
    client
        .request(
            "turn/start",
            json!({"threadId": thread_id, "message": "read the readme a few times"}),
        )
        .await?;
    client.until_turn_ends().await?;
    let ended = Instant::now();

    let page = client
        .request(
            "thread/events",
            json!({"threadId": thread_id, "cursor": 0, "limit": 5000}),
        )
        .await?;
    let persisted: Vec<u64> = page["events"]
        .as_array()
        .map(|events| events.iter().filter_map(|e| e["seq"].as_u64()).collect())
        .unwrap_or_default();
    let lost = persisted
        .iter()
        .filter(|seq| !client.notified.contains(seq))
        .count();
    anyhow::ensure!(
        client.notified == persisted,
        "notifications {:?} differ from the log {persisted:?}",
        client.notified
    );
    Ok(ClientRun {
        started,
        ended,
        turn_events: client.notified.len() - before_turn,
        latencies_ms: client.latencies_ms,
        lost,
    })
}

/// A JSON-RPC client that records each notification's seq and latency
/// (also used by the `web` bench as the baseline of the page's latency).
pub(crate) struct RpcClient {
    socket: WebSocketStream<MaybeTlsStream<TcpStream>>,
    next_id: u64,
    /// Seqs of the stored events' `thread/event` notifications received,
    /// in order (streamed deltas left out).
    pub(crate) notified: Vec<u64>,
    pub(crate) latencies_ms: Vec<f64>,
}

impl RpcClient {
    /// Connects to `ws://addr/` (nothing sent yet).
    pub(crate) async fn connect(addr: SocketAddr) -> anyhow::Result<Self> {
        let (socket, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/")).await?;
        Ok(Self {
            socket,
            next_id: 1,
            notified: Vec::new(),
            latencies_ms: Vec::new(),
        })
    }

    pub(crate) async fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.socket.send(Message::text(request.to_string())).await?;
        loop {
            let message = self.next().await?;
            if message["id"] == id {
                if let Some(error) = message.get("error") {
                    anyhow::bail!("{method} failed: {error}");
                }
                return Ok(message["result"].clone());
            }
        }
    }

    pub(crate) async fn until_turn_ends(&mut self) -> anyhow::Result<()> {
        loop {
            let message = self.next().await?;
            match message["params"]["event"]["type"].as_str() {
                Some("turn_completed") => return Ok(()),
                Some("turn_failed") => anyhow::bail!("turn failed: {message}"),
                _ => {}
            }
        }
    }

    /// The next message; notifications are recorded with their latency.
    async fn next(&mut self) -> anyhow::Result<Value> {
        loop {
            let frame = self
                .socket
                .next()
                .await
                .ok_or_else(|| anyhow::anyhow!("the server closed the connection"))??;
            let received = OffsetDateTime::now_utc();
            let Message::Text(text) = frame else { continue };
            let message: Value = serde_json::from_str(text.as_str())?;
            if message["method"] == "thread/event" {
                let params = &message["params"];
                let emitted = params["timestamp"]
                    .as_str()
                    .ok_or_else(|| anyhow::anyhow!("notification without timestamp"))?;
                let emitted = OffsetDateTime::parse(emitted, &Rfc3339)?;
                self.latencies_ms
                    .push((received - emitted).as_seconds_f64() * 1000.0);
                // Streamed deltas repeat the seq of the stored event
                // before them by design: only stored events are compared
                // with the log.
                let transient = matches!(
                    params["event"]["type"].as_str(),
                    Some("message_delta" | "reasoning_delta")
                );
                if !transient {
                    self.notified.push(params["seq"].as_u64().unwrap_or(0));
                }
            }
            return Ok(message);
        }
    }
}
