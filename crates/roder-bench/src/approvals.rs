//! `approvals`: what deciding a call costs.
//!
//! * `rule_overhead_ms`: a turn of N calls each allowed by an allow rule
//!   (`exec:true`, mode `default`, an approver attached so the rule is what
//!   decides) minus the same turn under `bypass`, per call, same run. The
//!   tool declares `execute` and does nothing, so the figure is the rule's
//!   cost, not a process spawn's.
//! * `ask_roundtrip_overhead_ms`: the same turn through the app server over
//!   a WebSocket, every call asked and answered at once by the client, minus
//!   the turn under `bypass` on the same connection, per call, minus one
//!   bare JSON-RPC round trip (`runners/list`) on that connection: what an
//!   ask costs beyond the round trip it cannot avoid.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use roder_api::approval::{CallScope, ToolEffects};
use roder_api::events::RoderEvent;
use roder_api::extension::ToolProviderId;
use roder_api::policy_mode::PolicyMode;
use roder_api::tools::{
    ToolCall, ToolContributor, ToolExecutionContext, ToolExecutor, ToolRegistry, ToolResult,
    ToolSpec,
};
use roder_app_server::{WsServerConfig, bind_ws};
use roder_core::{ApprovalsConfig, Runtime, RuntimeConfig, StartTurnRequest, TurnOptions};
use roder_testkit::{ScriptedEngine, ScriptedRound, final_round, tool_round};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::coding_runtime;
use crate::figure::{median, print, sized};

fn calls() -> usize {
    sized(200, 3)
}

fn repeats() -> usize {
    sized(7, 1)
}

const BOUND: Duration = Duration::from_secs(300);

pub async fn run() -> anyhow::Result<()> {
    tokio::time::timeout(BOUND, measure())
        .await
        .map_err(|_| anyhow::anyhow!("approvals bench did not finish within {BOUND:?}"))?
}

async fn measure() -> anyhow::Result<()> {
    let mut by_rule = Vec::new();
    let mut bypass = Vec::new();
    for _ in 0..repeats() {
        by_rule.push(in_process(Some(PolicyMode::Default)).await?);
        bypass.push(in_process(Some(PolicyMode::Bypass)).await?);
    }
    let per_call = |seconds: f64| seconds * 1000.0 / calls() as f64;
    let by_rule = per_call(median(&mut by_rule));
    let bypass = per_call(median(&mut bypass));
    print(
        "approvals",
        "rule_overhead_ms",
        by_rule - bypass,
        "ms",
        json!({"calls": calls(), "repeats": repeats(), "rule": "exec:true",
            "by_rule_ms_per_call": by_rule, "bypass_ms_per_call": bypass}),
    );

    let (asked, bypassed, round_trip) = over_websocket().await?;
    let overhead = asked - bypassed - round_trip;
    print(
        "approvals",
        "ask_roundtrip_overhead_ms",
        overhead,
        "ms",
        json!({"calls": calls(), "repeats": repeats(), "transport": "websocket 127.0.0.1",
            "asked_ms_per_call": asked, "bypass_ms_per_call": bypassed,
            "bare_round_trip_ms": round_trip}),
    );
    Ok(())
}

/// A tool that declares it runs a command and does nothing.
struct NoopCommand;

#[async_trait::async_trait]
impl ToolExecutor for NoopCommand {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "noop_command".into(),
            description: "does nothing".into(),
            parameters: json!({"type": "object"}),
        }
    }

    fn effects(&self) -> ToolEffects {
        ToolEffects::EXECUTE
    }

    fn call_scope(&self, arguments: &Value) -> Result<CallScope, String> {
        Ok(CallScope::command(
            arguments["cmd"].as_str().unwrap_or_default(),
        ))
    }

    async fn execute(
        &self,
        _ctx: ToolExecutionContext,
        call: ToolCall,
    ) -> anyhow::Result<ToolResult> {
        Ok(ToolResult::ok(&call, "ok", Value::Null))
    }
}

struct Noop;

impl ToolContributor for Noop {
    fn id(&self) -> ToolProviderId {
        "bench-noop".into()
    }

    fn contribute(&self, registry: &mut ToolRegistry) -> anyhow::Result<()> {
        registry.register(Arc::new(NoopCommand))
    }
}

fn rounds() -> Vec<ScriptedRound> {
    let mut rounds: Vec<ScriptedRound> = (0..calls())
        .map(|index| {
            let id = format!("call-{index}");
            tool_round(&[(id.as_str(), "noop_command", r#"{"cmd":"true"}"#)])
        })
        .collect();
    rounds.push(final_round("done"));
    rounds
}

fn runtime(
    engine: Arc<ScriptedEngine>,
    store: &std::path::Path,
    workspace: &std::path::Path,
) -> anyhow::Result<Arc<Runtime>> {
    let mut builder = coding_runtime::builder(engine, store, workspace)?;
    builder.tool_contributor(Arc::new(Noop));
    coding_runtime::runtime(
        builder,
        workspace,
        RuntimeConfig {
            approvals: ApprovalsConfig {
                rules: roder_api::approval::ApprovalRules {
                    allow: vec!["exec:true".parse()?],
                    deny: Vec::new(),
                },
                ..ApprovalsConfig::default()
            },
            ..RuntimeConfig::default()
        },
    )
}

/// Seconds for one turn of `calls()` calls under `mode`, in-process, with an
/// approver attached (it is never asked: the rule or the mode decides).
async fn in_process(mode: Option<PolicyMode>) -> anyhow::Result<f64> {
    let workspace = tempfile::tempdir()?;
    let store = tempfile::tempdir()?;
    let runtime = runtime(
        ScriptedEngine::new(rounds()),
        store.path(),
        workspace.path(),
    )?;
    let thread_id = runtime.create_thread(None).await?.thread_id;
    let _approver = runtime.attach_approver(&thread_id);
    let mut events = runtime.subscribe_events();
    let started = Instant::now();
    runtime
        .start_turn_with(
            StartTurnRequest::new(&thread_id, "go"),
            TurnOptions {
                policy_mode: mode,
                ..TurnOptions::default()
            },
        )
        .await?;
    loop {
        let envelope = events.recv().await?;
        match envelope.event {
            RoderEvent::ApprovalRequested(_) => anyhow::bail!("a rule-allowed call asked"),
            RoderEvent::TurnCompleted(_) => break,
            event if event.is_terminal() => anyhow::bail!("the turn did not complete: {event:?}"),
            _ => {}
        }
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Per-call ms of an asked turn and of a `bypass` turn over one WebSocket
/// connection, and that connection's bare round trip in ms.
async fn over_websocket() -> anyhow::Result<(f64, f64, f64)> {
    let workspace = tempfile::tempdir()?;
    let store = tempfile::tempdir()?;
    let engine = ScriptedEngine::new(Vec::new());
    let runtime = runtime(engine.clone(), store.path(), workspace.path())?;
    let server = bind_ws(runtime, WsServerConfig::default()).await?;
    let addr = server.local_addr();
    anyhow::ensure!(addr.ip().is_loopback(), "the bench must stay on loopback");
    let server = tokio::spawn(server.serve());
    let (mut socket, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/")).await?;
    let mut next_id = 0u64;
    let mut call = async |socket: &mut Socket, method: &str, params: Value| {
        next_id += 1;
        request(socket, next_id, method, params).await
    };
    call(
        &mut socket,
        "initialize",
        json!({"capabilities": {"approvals": true}}),
    )
    .await?;
    // A mode with no rule for `cmd: ask`: every call asks.
    let thread = call(
        &mut socket,
        "thread/start",
        json!({"policyMode": "default"}),
    )
    .await?;
    let thread_id = thread["thread"]["threadId"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("thread/start returned no thread id"))?
        .to_string();
    let mut asked = Vec::new();
    let mut bypassed = Vec::new();
    let mut round_trips = Vec::new();
    for _ in 0..repeats() {
        for mode in ["default", "bypass"] {
            for index in 0..calls() {
                let id = format!("call-{index}");
                engine.push_round(tool_round(&[(
                    id.as_str(),
                    "noop_command",
                    r#"{"cmd":"ask"}"#,
                )]));
            }
            engine.push_round(final_round("done"));
            let started = Instant::now();
            call(
                &mut socket,
                "turn/start",
                json!({"threadId": thread_id, "message": "go", "policyMode": mode}),
            )
            .await?;
            let answered = answer_until_done(&mut socket).await?;
            let seconds = started.elapsed().as_secs_f64();
            if mode == "default" {
                anyhow::ensure!(answered == calls(), "{answered} asks for {} calls", calls());
                asked.push(seconds);
            } else {
                anyhow::ensure!(answered == 0, "bypass asked {answered} times");
                bypassed.push(seconds);
            }
        }
        for _ in 0..calls() {
            let started = Instant::now();
            call(&mut socket, "runners/list", json!({})).await?;
            round_trips.push(started.elapsed().as_secs_f64() * 1000.0);
        }
    }
    server.abort();
    let per_call = |seconds: f64| seconds * 1000.0 / calls() as f64;
    Ok((
        per_call(median(&mut asked)),
        per_call(median(&mut bypassed)),
        median(&mut round_trips),
    ))
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn request(
    socket: &mut Socket,
    id: u64,
    method: &str,
    params: Value,
) -> anyhow::Result<Value> {
    let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    socket.send(Message::text(message.to_string())).await?;
    loop {
        let message = next(socket).await?;
        if message["id"] == id && message.get("method").is_none() {
            if let Some(error) = message.get("error") {
                anyhow::bail!("{method} failed: {error}");
            }
            return Ok(message["result"].clone());
        }
    }
}

/// Answers every `approval/request` with `allow_once` at once until the
/// turn completes; returns how many were answered.
async fn answer_until_done(socket: &mut Socket) -> anyhow::Result<usize> {
    let mut answered = 0;
    loop {
        let message = next(socket).await?;
        if message["method"] == "approval/request" {
            let answer = json!({"jsonrpc": "2.0", "id": message["id"],
                "result": {"decision": "allow_once"}});
            socket.send(Message::text(answer.to_string())).await?;
            answered += 1;
            continue;
        }
        match message["params"]["event"]["type"].as_str() {
            Some("turn_completed") => return Ok(answered),
            Some("turn_failed" | "turn_interrupted") => anyhow::bail!("turn ended: {message}"),
            _ => {}
        }
    }
}

async fn next(socket: &mut Socket) -> anyhow::Result<Value> {
    loop {
        let frame = socket
            .next()
            .await
            .ok_or_else(|| anyhow::anyhow!("the server closed the connection"))??;
        if let Message::Text(text) = frame {
            return Ok(serde_json::from_str(text.as_str())?);
        }
    }
}
