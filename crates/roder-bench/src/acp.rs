//! `acp`: what speaking ACP costs an editor, in process over pipes.
//!
//! * `first_chunk_ratio`: time from sending `session/prompt` to the first
//!   `agent_message_chunk`, over the time from sending `turn/start` to the
//!   first `message_delta` event through the app server's stdio transport,
//!   for the same scripted one-answer turn on the same runtime, alternated,
//!   medians of the same run.
//! * `load_1000_steps_ms`: `session/load` of a thread of 1,000 tool steps,
//!   from the request until its response (the whole replay written and read
//!   by the client first), in a runtime that did not run the thread.

use std::sync::Arc;
use std::time::{Duration, Instant};

use roder_api::approval::ToolEffects;
use roder_api::events::RoderEvent;
use roder_api::extension::ToolProviderId;
use roder_api::policy_mode::PolicyMode;
use roder_api::tools::{
    ToolCall, ToolContributor, ToolExecutionContext, ToolExecutor, ToolRegistry, ToolResult,
    ToolSpec,
};
use roder_core::{Runtime, RuntimeConfig, StartTurnRequest};
use roder_testkit::{ScriptedEngine, ScriptedRound, final_round, tool_round};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};

use crate::coding_runtime;
use crate::figure::{median, print, sized};

fn turns() -> usize {
    sized(40, 2)
}

fn steps() -> usize {
    sized(1000, 5)
}

fn loads() -> usize {
    sized(7, 1)
}

const BOUND: Duration = Duration::from_secs(300);
const PIPE: usize = 1 << 20;

pub async fn run() -> anyhow::Result<()> {
    tokio::time::timeout(BOUND, measure())
        .await
        .map_err(|_| anyhow::anyhow!("acp bench did not finish within {BOUND:?}"))?
}

async fn measure() -> anyhow::Result<()> {
    let (acp_ms, app_ms) = first_chunks().await?;
    print(
        "acp",
        "first_chunk_ratio",
        acp_ms / app_ms,
        "ratio",
        json!({"turns": turns(), "acp_first_chunk_ms": acp_ms, "app_server_first_delta_ms": app_ms,
            "transport": "in-process pipes, one JSON message per line"}),
    );
    let load_ms = load_thread().await?;
    print(
        "acp",
        "load_1000_steps_ms",
        load_ms,
        "ms",
        json!({"steps": steps(), "loads": loads()}),
    );
    Ok(())
}

/// A tool that declares nothing but reading and does nothing.
struct Noop;

#[async_trait::async_trait]
impl ToolExecutor for Noop {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "noop".into(),
            description: "does nothing".into(),
            parameters: json!({"type": "object"}),
        }
    }

    fn effects(&self) -> ToolEffects {
        ToolEffects::READ
    }

    async fn execute(
        &self,
        _ctx: ToolExecutionContext,
        call: ToolCall,
    ) -> anyhow::Result<ToolResult> {
        Ok(ToolResult::ok(&call, "ok", Value::Null))
    }
}

struct NoopContributor;

impl ToolContributor for NoopContributor {
    fn id(&self) -> ToolProviderId {
        "bench-acp-noop".into()
    }

    fn contribute(&self, registry: &mut ToolRegistry) -> anyhow::Result<()> {
        registry.register(Arc::new(Noop))
    }
}

fn runtime(
    engine: Arc<ScriptedEngine>,
    store: &std::path::Path,
    workspace: &std::path::Path,
) -> anyhow::Result<Arc<Runtime>> {
    let mut builder = coding_runtime::builder(engine, store, workspace)?;
    builder.tool_contributor(Arc::new(NoopContributor));
    coding_runtime::runtime(
        builder,
        workspace,
        RuntimeConfig {
            policy_mode: PolicyMode::Bypass,
            ..RuntimeConfig::default()
        },
    )
}

/// A JSON-RPC client over one pipe pair.
struct Client {
    writer: tokio::io::WriteHalf<DuplexStream>,
    reader: BufReader<tokio::io::ReadHalf<DuplexStream>>,
    next_id: u64,
}

impl Client {
    fn new(stream: DuplexStream) -> Self {
        let (reader, writer) = tokio::io::split(stream);
        Self {
            writer,
            reader: BufReader::new(reader),
            next_id: 0,
        }
    }

    async fn send(&mut self, method: &str, params: Value) -> anyhow::Result<u64> {
        self.next_id += 1;
        let mut line = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}),
        )?;
        line.push(b'\n');
        self.writer.write_all(&line).await?;
        self.writer.flush().await?;
        Ok(self.next_id)
    }

    async fn next(&mut self) -> anyhow::Result<Value> {
        let mut line = String::new();
        anyhow::ensure!(
            self.reader.read_line(&mut line).await? > 0,
            "the server closed the pipe"
        );
        Ok(serde_json::from_str(&line)?)
    }

    /// Reads until the answer to `id`; returns it.
    async fn answer(&mut self, id: u64) -> anyhow::Result<Value> {
        loop {
            let message = self.next().await?;
            if message["id"] == json!(id) {
                anyhow::ensure!(message.get("error").is_none(), "error: {message}");
                return Ok(message["result"].clone());
            }
        }
    }

    async fn call(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.send(method, params).await?;
        self.answer(id).await
    }
}

/// Median ms to the first chunk over ACP and to the first delta over the
/// app server.
async fn first_chunks() -> anyhow::Result<(f64, f64)> {
    let workspace = tempfile::tempdir()?;
    let store = tempfile::tempdir()?;
    let engine = ScriptedEngine::new(Vec::new());
    let runtime = runtime(engine.clone(), store.path(), workspace.path())?;

    let (ours, theirs) = tokio::io::duplex(PIPE);
    let (server_read, server_write) = tokio::io::split(theirs);
    let acp_server = tokio::spawn(roder_acp::serve_stdio(
        runtime.clone(),
        server_read,
        server_write,
        roder_acp::AcpOptions::default(),
    ));
    let mut acp = Client::new(ours);
    acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    )
    .await?;
    let session = acp
        .call(
            "session/new",
            json!({"cwd": workspace.path(), "mcpServers": []}),
        )
        .await?;
    let session_id = session["sessionId"].clone();

    let (ours, theirs) = tokio::io::duplex(PIPE);
    let (server_read, server_write) = tokio::io::split(theirs);
    let app_server = tokio::spawn(roder_app_server::serve_stdio(
        runtime.clone(),
        server_read,
        server_write,
    ));
    let mut app = Client::new(ours);
    app.call("initialize", json!({"clientInfo": {"name": "bench"}}))
        .await?;
    let thread = app
        .call(
            "thread/start",
            json!({"workspace": workspace.path().display().to_string()}),
        )
        .await?;
    let thread_id = thread["thread"]["threadId"].clone();

    let mut over_acp = Vec::new();
    let mut over_app = Vec::new();
    for _ in 0..turns() {
        engine.push_round(final_round("hello from the bench"));
        let started = Instant::now();
        let id = acp
            .send(
                "session/prompt",
                json!({"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}),
            )
            .await?;
        let mut first = None;
        loop {
            let message = acp.next().await?;
            if first.is_none()
                && message["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            {
                first = Some(started.elapsed());
            }
            if message["id"] == json!(id) {
                break;
            }
        }
        over_acp.push(ms(first)?);

        engine.push_round(final_round("hello from the bench"));
        let started = Instant::now();
        app.send(
            "turn/start",
            json!({"threadId": thread_id, "message": "go"}),
        )
        .await?;
        let mut first = None;
        loop {
            let message = app.next().await?;
            let kind = &message["params"]["event"]["type"];
            if first.is_none() && kind == "message_delta" {
                first = Some(started.elapsed());
            }
            if kind == "turn_completed" {
                break;
            }
        }
        over_app.push(ms(first)?);
    }
    drop(acp);
    drop(app);
    let _ = acp_server.await;
    let _ = app_server.await;
    Ok((median(&mut over_acp), median(&mut over_app)))
}

fn ms(elapsed: Option<Duration>) -> anyhow::Result<f64> {
    elapsed
        .map(|elapsed| elapsed.as_secs_f64() * 1000.0)
        .ok_or_else(|| anyhow::anyhow!("the turn ended without a message"))
}

/// Median ms of `session/load` of a 1,000-step thread.
async fn load_thread() -> anyhow::Result<f64> {
    let workspace = tempfile::tempdir()?;
    let store = tempfile::tempdir()?;
    let mut rounds: Vec<ScriptedRound> = (0..steps())
        .map(|index| tool_round(&[(format!("call-{index}").as_str(), "noop", "{}")]))
        .collect();
    rounds.push(final_round("done"));
    let thread_id = {
        let runtime = runtime(ScriptedEngine::new(rounds), store.path(), workspace.path())?;
        let thread_id = runtime.create_thread(None).await?.thread_id;
        let mut events = runtime.subscribe_events();
        runtime
            .start_turn(StartTurnRequest::new(&thread_id, "go"))
            .await?;
        loop {
            let event = events.recv().await?.event;
            if let RoderEvent::TurnCompleted(_) = event {
                break;
            }
            anyhow::ensure!(!event.is_terminal(), "the turn did not complete: {event:?}");
        }
        thread_id
    };
    let mut samples = Vec::new();
    for _ in 0..loads() {
        // A runtime that never ran the thread, as a new process would be.
        let runtime = runtime(
            ScriptedEngine::new(Vec::new()),
            store.path(),
            workspace.path(),
        )?;
        let (ours, theirs) = tokio::io::duplex(PIPE);
        let (server_read, server_write) = tokio::io::split(theirs);
        let server = tokio::spawn(roder_acp::serve_stdio(
            runtime,
            server_read,
            server_write,
            roder_acp::AcpOptions::default(),
        ));
        let mut client = Client::new(ours);
        client
            .call(
                "initialize",
                json!({"protocolVersion": 1, "clientCapabilities": {}}),
            )
            .await?;
        let started = Instant::now();
        let id = client
            .send(
                "session/load",
                json!({"sessionId": thread_id, "cwd": workspace.path(), "mcpServers": []}),
            )
            .await?;
        let mut replayed = 0usize;
        loop {
            let message = client.next().await?;
            if message["id"] == json!(id) {
                break;
            }
            replayed += 1;
        }
        samples.push(started.elapsed().as_secs_f64() * 1000.0);
        anyhow::ensure!(replayed >= steps() * 3, "only {replayed} updates replayed");
        drop(client);
        let _ = server.await;
    }
    Ok(median(&mut samples))
}
