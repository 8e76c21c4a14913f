//! `replicas`: the real `roder app-server` binary, three replicas on one
//! PostgreSQL (a throwaway cluster, as the store's tests start), against a
//! fake Chat Completions server in this process.
//!
//! * 100 WebSocket clients spread over the replicas, each starting a
//!   thread and a scripted turn (tool calls of `read_file`, then an answer)
//!   on replica `i % 3` and following it from replica `(i + 1) % 3`, so
//!   every event crosses replicas (LISTEN/NOTIFY, then a log read). Each
//!   watcher then reads the thread's log with `thread/events` and checks it
//!   received every persisted event once. Figures: `events_per_s`
//!   (notifications to the watchers per second of the turns' wall time),
//!   `event_latency_p95_ms` (receipt minus the event's timestamp), `lost`.
//!   The same with one JSONL `roder app-server` (one process, each client
//!   starting and following its own thread) in the same run, as the
//!   baseline.
//! * `failover_s`: a turn runs a long tool on one replica, which is killed
//!   (`SIGKILL`); the time until another replica accepts a turn of the
//!   thread (lease ttl 2 s).
//! * `step_ms_1000_idle_ratio`: one client's 40-step turn on one replica,
//!   per step, with 1,000 idle WebSocket connections each following its own
//!   thread, divided by the same with none (medians: 5 runs alone, 5 with
//!   the idle connections, 5 alone again). `jsonl_step_ms_1000_idle_ratio`:
//!   the same on the JSONL process, where a step is cheaper, so a per-event
//!   cost of idle connections would show more.
//!
//! Needs the release binary (`cargo build --release -p roder-cli`) and
//! PostgreSQL binaries (`/usr/lib/postgresql/*/bin` or `$RODER_PG_BIN`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::{SinkExt, StreamExt};
use roder_ext_postgres_thread_store::test_support::TestCluster;
use roder_testkit::fake_models::{ChatStream, FakeModelServer};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::figure::{median, percentile, print, sized};

const BENCH: &str = "replicas";
const REPLICAS: usize = 3;
fn client_count() -> usize {
    sized(100, 2)
}

const TOOL_CALLS: usize = 3;
fn steps() -> usize {
    sized(40, 3)
}

fn idle_count() -> usize {
    sized(1_000, 50)
}

fn step_runs() -> usize {
    sized(5, 1)
}

const TTL_SECS: u64 = 2;
/// The whole run is bounded: a stuck client fails the bench, never hangs it.
const BOUND: Duration = Duration::from_secs(600);
const WAIT: Duration = Duration::from_secs(60);

pub async fn run() -> anyhow::Result<()> {
    tokio::time::timeout(BOUND, measure())
        .await
        .map_err(|_| anyhow::anyhow!("replicas bench did not finish within {BOUND:?}"))?
}

async fn measure() -> anyhow::Result<()> {
    let roder = crate::roder_process::binary()?;
    let model = Arc::new(FakeModelServer::start().await?);
    let workspace = tempfile::tempdir()?;
    let root = std::fs::canonicalize(workspace.path())?;
    tokio::fs::write(root.join("README.md"), "bench\n").await?;

    // The baseline: one process, the JSONL store.
    let jsonl_home = home(&model, None)?;
    let jsonl = Replica::start(&roder, jsonl_home.path(), &root, None).await?;
    let baseline = turns(&model, std::slice::from_ref(&jsonl.addr), false).await?;
    report(&baseline, "jsonl, one process", "jsonl_");
    let (alone, crowded) = step_ratio(&model, &jsonl.addr).await?;
    print_ratio("jsonl_", alone, crowded, "jsonl");
    drop(jsonl);

    let cluster = TestCluster::start_or_skip()
        .await?
        .ok_or_else(|| anyhow::anyhow!("PostgreSQL binaries are not installed"))?;
    let url = cluster.url();
    let mut homes = Vec::new();
    let mut replicas = Vec::new();
    for _ in 0..REPLICAS {
        let home = home(&model, Some(&url))?;
        replicas.push(Replica::start(&roder, home.path(), &root, Some(&url)).await?);
        homes.push(home);
    }
    let addrs: Vec<String> = replicas
        .iter()
        .map(|replica| replica.addr.clone())
        .collect();
    let shared = turns(&model, &addrs, true).await?;
    report(
        &shared,
        "postgres, 3 replicas, watched from another replica",
        "",
    );

    let failover = failover(&model, &mut replicas, &root).await?;
    print(
        BENCH,
        "failover_s",
        failover,
        "s",
        json!({"writer_lease_ttl_secs": TTL_SECS, "replicas": REPLICAS,
               "from": "SIGKILL of the replica running the turn",
               "to": "another replica accepts turn/start of the thread"}),
    );

    // The idle-connection ratio on one replica (the last, still alive).
    let survivor = replicas
        .last()
        .map(|replica| replica.addr.clone())
        .ok_or_else(|| anyhow::anyhow!("no replica left"))?;
    let (alone, crowded) = step_ratio(&model, &survivor).await?;
    print_ratio("", alone, crowded, "postgres");
    drop(replicas);
    drop(cluster);
    Ok(())
}

fn print_ratio(prefix: &str, alone: f64, crowded: f64, store: &str) {
    print(
        BENCH,
        &format!("{prefix}step_ms_1000_idle_ratio"),
        crowded / alone,
        "ratio",
        json!({"steps": steps(), "idle_connections": idle_count(), "runs": step_runs(),
               "step_ms_alone": alone, "step_ms_with_idle": crowded,
               "store": store, "target": "< 1.2"}),
    );
}

/// A `$RODER_HOME` pointing the `fake` provider at `model`.
fn home(model: &FakeModelServer, store: Option<&str>) -> anyhow::Result<tempfile::TempDir> {
    let home = tempfile::tempdir()?;
    let mut config = format!("writer_lease_ttl_secs = {TTL_SECS}\n");
    if let Some(store) = store {
        config.push_str(&format!("store = \"{store}\"\n"));
    }
    config.push_str(&format!(
        "model = \"fake/bench\"\n[providers.fake]\nkind = \"openai-chat\"\nbase_url = \"{}\"\n",
        model.openai_base_url()
    ));
    std::fs::write(home.path().join("config.toml"), config)?;
    Ok(home)
}

/// One `roder app-server --listen 127.0.0.1:0` process.
struct Replica {
    child: tokio::process::Child,
    addr: String,
}

impl Replica {
    async fn start(
        roder: &PathBuf,
        home: &Path,
        root: &Path,
        store: Option<&str>,
    ) -> anyhow::Result<Self> {
        let mut command = tokio::process::Command::new(roder);
        command
            .args(["app-server", "--listen", "127.0.0.1:0", "-C"])
            .arg(root)
            .env("RODER_HOME", home)
            .env_remove("RODER_MODEL")
            .env("RUST_LOG", "error")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        if let Some(store) = store {
            command.args(["--store", store]);
        }
        let mut child = command.spawn().context("starting roder app-server")?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(WAIT, lines.next_line())
            .await
            .map_err(|_| anyhow::anyhow!("roder app-server printed no address"))??
            .ok_or_else(|| anyhow::anyhow!("roder app-server exited before listening"))?;
        anyhow::ensure!(
            line.starts_with("ws://127.0.0.1:"),
            "unexpected first line {line:?}"
        );
        Ok(Self { child, addr: line })
    }

    fn kill(&mut self) -> anyhow::Result<()> {
        let pid = self
            .child
            .id()
            .ok_or_else(|| anyhow::anyhow!("the replica already exited"))?;
        let pid = i32::try_from(pid)?;
        // SAFETY: signalling our own child process.
        anyhow::ensure!(
            unsafe { libc::kill(pid, libc::SIGKILL) } == 0,
            "kill failed"
        );
        Ok(())
    }
}

/// What the 100 clients measured.
struct Turns {
    events: usize,
    wall_s: f64,
    lost: usize,
    latencies_ms: Vec<f64>,
}

fn report(turns: &Turns, setup: &str, prefix: &str) {
    let mut latencies = turns.latencies_ms.clone();
    let p95 = percentile(&mut latencies, 0.95);
    let p50 = median(&mut latencies);
    let context = json!({"setup": setup, "clients": client_count(), "tool_calls_per_turn": TOOL_CALLS,
        "events": turns.events, "wall_s": turns.wall_s, "latency_p50_ms": p50,
        "lost": turns.lost, "transport": "websocket 127.0.0.1"});
    print(
        BENCH,
        &format!("{prefix}events_per_s"),
        turns.events as f64 / turns.wall_s,
        "events/s",
        context.clone(),
    );
    print(
        BENCH,
        &format!("{prefix}event_latency_p95_ms"),
        p95,
        "ms",
        context.clone(),
    );
    print(
        BENCH,
        &format!("{prefix}lost"),
        turns.lost as f64,
        "events",
        context,
    );
}

/// `client_count()` scripted turns at once, client `i` on `addrs[i % n]`, watched
/// from `addrs[(i + 1) % n]` when `cross` (else from its own connection).
async fn turns(model: &FakeModelServer, addrs: &[String], cross: bool) -> anyhow::Result<Turns> {
    // One shared script: each turn takes replies until it gets an answer,
    // so every turn ends and TOOL_CALLS per turn holds on average.
    for index in 0..client_count() {
        for call in 0..TOOL_CALLS {
            let id = format!("call-{index}-{call}");
            model.push(ChatStream::tool_calls_reply(&[(
                id.as_str(),
                "read_file",
                r#"{"path":"README.md"}"#,
            )]));
        }
        model.push(ChatStream::text_reply("read it"));
    }
    let start_line = Arc::new(tokio::sync::Barrier::new(client_count()));
    let clients: Vec<_> = (0..client_count())
        .map(|index| {
            let runner = addrs[index % addrs.len()].clone();
            let watcher = cross.then(|| addrs[(index + 1) % addrs.len()].clone());
            tokio::spawn(one_client(runner, watcher, start_line.clone()))
        })
        .collect();
    let mut runs = Vec::with_capacity(client_count());
    for client in clients {
        runs.push(client.await??);
    }
    let first = runs.iter().map(|run| run.started).min();
    let last = runs.iter().map(|run| run.ended).max();
    let wall_s = match (first, last) {
        (Some(first), Some(last)) => last.duration_since(first).as_secs_f64(),
        _ => anyhow::bail!("no client ran"),
    };
    Ok(Turns {
        events: runs.iter().map(|run| run.turn_events).sum(),
        lost: runs.iter().map(|run| run.lost).sum(),
        latencies_ms: runs.into_iter().flat_map(|run| run.latencies_ms).collect(),
        wall_s,
    })
}

struct ClientRun {
    started: Instant,
    ended: Instant,
    turn_events: usize,
    latencies_ms: Vec<f64>,
    lost: usize,
}

async fn one_client(
    runner: String,
    watcher: Option<String>,
    start_line: Arc<tokio::sync::Barrier>,
) -> anyhow::Result<ClientRun> {
    let mut control = RpcClient::connect(&runner).await?;
    let thread = control.request("thread/start", json!({})).await?;
    let thread_id = thread["thread"]["threadId"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("thread/start returned no thread id"))?
        .to_string();
    let mut remote = match watcher {
        Some(addr) => {
            control
                .request("thread/unsubscribe", json!({"threadId": thread_id}))
                .await?;
            let mut watch = RpcClient::connect(&addr).await?;
            watch
                .request(
                    "thread/resume",
                    json!({"threadId": thread_id, "afterSeq": 0}),
                )
                .await?;
            Some(watch)
        }
        None => None,
    };
    start_line.wait().await;
    let watch = remote.as_mut().unwrap_or(&mut control);
    let before = watch.notified.len();
    watch.latencies_ms.clear();
    let started = Instant::now();
    // The turn starts on the runner; the watcher (maybe the same
    // connection) follows it.
    let request = json!({"threadId": thread_id, "message": "read the readme a few times"});
    match remote.as_mut() {
        Some(watch) => {
            control.request("turn/start", request).await?;
            watch.until_turn_ends().await?;
        }
        None => {
            control.request("turn/start", request).await?;
            control.until_turn_ends().await?;
        }
    }
    let ended = Instant::now();
    let watch = remote.as_mut().unwrap_or(&mut control);
    let page = watch
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
        .filter(|seq| !watch.notified.contains(seq))
        .count();
    anyhow::ensure!(
        watch.notified == persisted,
        "notifications {:?} differ from the log {persisted:?}",
        watch.notified
    );
    Ok(ClientRun {
        started,
        ended,
        turn_events: watch.notified.len() - before,
        latencies_ms: std::mem::take(&mut watch.latencies_ms),
        lost,
    })
}

/// Kills the replica running a turn mid-tool; seconds until another
/// replica accepts a turn of the thread.
async fn failover(
    model: &FakeModelServer,
    replicas: &mut [Replica],
    root: &Path,
) -> anyhow::Result<f64> {
    let (first, rest) = replicas
        .split_first_mut()
        .ok_or_else(|| anyhow::anyhow!("no replicas"))?;
    let taker = rest
        .first()
        .ok_or_else(|| anyhow::anyhow!("one replica only"))?
        .addr
        .clone();
    let mut client = RpcClient::connect(&first.addr).await?;
    let thread = client.request("thread/start", json!({})).await?;
    let thread_id = thread["thread"]["threadId"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("thread/start returned no thread id"))?
        .to_string();
    let marker = root.join("failover.started");
    // The shell writes its pid, then becomes `sleep 30`: the orphan to end.
    let cmd = format!("echo $$ > {}; exec sleep 30", marker.display());
    let arguments = json!({ "cmd": cmd }).to_string();
    model.push(ChatStream::tool_calls_reply(&[(
        "call-sleep",
        "exec_command",
        &arguments,
    )]));
    client
        .request(
            "turn/start",
            json!({"threadId": thread_id, "message": "sleep"}),
        )
        .await?;
    let deadline = Instant::now() + WAIT;
    while !std::fs::read_to_string(&marker).is_ok_and(|text| text.ends_with('\n')) {
        anyhow::ensure!(Instant::now() < deadline, "the tool never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    first.kill()?;
    let killed = Instant::now();
    let _ = first.child.wait().await;
    model.push(ChatStream::text_reply("taken over"));
    let mut other = RpcClient::connect(&taker).await?;
    loop {
        match other
            .call(
                "turn/start",
                json!({"threadId": thread_id, "message": "carry on"}),
            )
            .await?
        {
            Ok(_) => break,
            Err(error) if error["code"] == -32002 => {
                anyhow::ensure!(killed.elapsed() < WAIT, "never taken over: {error}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(error) => anyhow::bail!("turn/start failed: {error}"),
        }
    }
    let failover = killed.elapsed().as_secs_f64();
    other
        .request(
            "thread/resume",
            json!({"threadId": thread_id, "afterSeq": 0}),
        )
        .await?;
    other.until_turn_ends().await?;
    // The killed replica's tool (`sleep 30`) is orphaned; end it.
    if let Ok(pid) = std::fs::read_to_string(&marker)?.trim().parse::<i32>() {
        // SAFETY: the pid of the command this bench's replica started.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
    Ok(failover)
}

/// Median per-step milliseconds of a `steps()`-step turn on `addr`, without
/// and with `idle_count()` idle connections each following its own thread.
async fn step_ratio(model: &FakeModelServer, addr: &str) -> anyhow::Result<(f64, f64)> {
    let mut client = RpcClient::connect(addr).await?;
    let thread = client.request("thread/start", json!({})).await?;
    let thread_id = thread["thread"]["threadId"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("thread/start returned no thread id"))?
        .to_string();
    // Warm-up.
    one_turn(model, &mut client, &thread_id).await?;
    let mut alone = Vec::new();
    for _ in 0..step_runs() {
        alone.push(one_turn(model, &mut client, &thread_id).await?);
    }
    let mut idle = Vec::with_capacity(idle_count());
    for chunk in 0..idle_count() / 50 {
        let opened = futures::future::try_join_all((0..50).map(|_| async {
            let mut idle = RpcClient::connect(addr).await?;
            idle.request("thread/start", json!({})).await?;
            anyhow::Ok(idle)
        }))
        .await
        .with_context(|| format!("opening idle connections (batch {chunk})"))?;
        idle.extend(opened);
    }
    let mut crowded = Vec::new();
    for _ in 0..step_runs() {
        crowded.push(one_turn(model, &mut client, &thread_id).await?);
    }
    // Alternate once more, so drift of the machine shows in both.
    drop(idle);
    tokio::time::sleep(Duration::from_secs(1)).await;
    for _ in 0..step_runs() {
        alone.push(one_turn(model, &mut client, &thread_id).await?);
    }
    Ok((median(&mut alone), median(&mut crowded)))
}

/// One `steps()`-step turn; milliseconds per step.
async fn one_turn(
    model: &FakeModelServer,
    client: &mut RpcClient,
    thread_id: &str,
) -> anyhow::Result<f64> {
    for step in 0..steps() {
        let id = format!("step-{step}");
        model.push(ChatStream::tool_calls_reply(&[(
            id.as_str(),
            "read_file",
            r#"{"path":"README.md"}"#,
        )]));
    }
    model.push(ChatStream::text_reply("done"));
    let started = Instant::now();
    client
        .request(
            "turn/start",
            json!({"threadId": thread_id, "message": "read it 40 times"}),
        )
        .await?;
    client.until_turn_ends().await?;
    Ok(started.elapsed().as_secs_f64() * 1000.0 / steps() as f64)
}

struct RpcClient {
    socket: WebSocketStream<MaybeTlsStream<TcpStream>>,
    next_id: u64,
    /// Seqs of the persisted events notified, in order.
    notified: Vec<u64>,
    latencies_ms: Vec<f64>,
}

impl RpcClient {
    async fn connect(addr: &str) -> anyhow::Result<Self> {
        let (socket, _) = tokio_tungstenite::connect_async(format!("{addr}/")).await?;
        let mut client = Self {
            socket,
            next_id: 1,
            notified: Vec::new(),
            latencies_ms: Vec::new(),
        };
        client.request("initialize", json!({})).await?;
        Ok(client)
    }

    async fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        self.call(method, params)
            .await?
            .map_err(|error| anyhow::anyhow!("{method} failed: {error}"))
    }

    /// The result, or the error object.
    async fn call(&mut self, method: &str, params: Value) -> anyhow::Result<Result<Value, Value>> {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.socket.send(Message::text(request.to_string())).await?;
        loop {
            let message = self.next().await?;
            if message["id"] == id {
                if let Some(error) = message.get("error") {
                    return Ok(Err(error.clone()));
                }
                return Ok(Ok(message["result"].clone()));
            }
        }
    }

    async fn until_turn_ends(&mut self) -> anyhow::Result<()> {
        loop {
            let message = self.next().await?;
            match message["params"]["event"]["type"].as_str() {
                Some("turn_completed") => return Ok(()),
                Some("turn_failed") => anyhow::bail!("turn failed: {message}"),
                _ => {}
            }
        }
    }

    /// The next message; notifications of persisted events are recorded
    /// with their latency.
    async fn next(&mut self) -> anyhow::Result<Value> {
        loop {
            let frame = tokio::time::timeout(WAIT, self.socket.next())
                .await
                .map_err(|_| anyhow::anyhow!("nothing from the server within {WAIT:?}"))?
                .ok_or_else(|| anyhow::anyhow!("the server closed the connection"))??;
            let received = OffsetDateTime::now_utc();
            let Message::Text(text) = frame else { continue };
            let message: Value = serde_json::from_str(text.as_str())?;
            if message["method"] == "thread/event" {
                let params = &message["params"];
                let kind = params["event"]["type"].as_str().unwrap_or_default();
                if kind.ends_with("_delta") {
                    return Ok(message);
                }
                let emitted = params["timestamp"]
                    .as_str()
                    .ok_or_else(|| anyhow::anyhow!("notification without timestamp"))?;
                let emitted = OffsetDateTime::parse(emitted, &Rfc3339)?;
                self.latencies_ms
                    .push((received - emitted).as_seconds_f64() * 1000.0);
                self.notified.push(params["seq"].as_u64().unwrap_or(0));
            } else if message["id"].is_null() && message.get("error").is_some() {
                anyhow::bail!("the server dropped the subscriptions: {message}");
            }
            return Ok(message);
        }
    }
}
