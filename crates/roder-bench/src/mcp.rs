//! `mcp`: what the runtime adds to an MCP tool call. A scripted turn of N
//! calls of `mcp-server-time`'s `get_current_time` through the runtime (the
//! `roder-ext-mcp` tool source over stdio, JSONL store, every event
//! persisted) against N calls of the same tool made directly with an rmcp
//! client on another instance of the same server, in the same run,
//! interleaved. `overhead_per_call_ms` is the difference per call. The
//! context splits it: the tool source's executor called without a runtime,
//! and the same turn calling a tool that answers at once (the turn loop's
//! own cost, whatever the tool).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use roder_api::events::RoderEvent;
use roder_api::extension::ExtensionRegistryBuilder;
use roder_core::{Runtime, RuntimeConfig, StartTurnRequest};
use roder_ext_jsonl_thread_store::store::JsonlThreadStoreFactory;
use roder_ext_mcp::{McpServerConfig, McpToolSource, ServerStatus};
use roder_testkit::{ScriptedEngine, ScriptedRound, final_round, tool_round};
use serde_json::json;

use crate::figure::{median, print};

const CALLS: usize = 200;
const REPEATS: usize = 5;
const SERVER: &str = "mcp-server-time";
const TOOL: &str = "get_current_time";
const ARGUMENTS: &str = r#"{"timezone":"UTC"}"#;

pub async fn run() -> anyhow::Result<()> {
    let mut direct = Vec::new();
    let mut tool = Vec::new();
    let mut runtime = Vec::new();
    let mut floor = Vec::new();
    for _ in 0..REPEATS {
        direct.push(direct_calls(CALLS).await?.as_secs_f64());
        tool.push(tool_calls(CALLS).await?.as_secs_f64());
        runtime.push(through_runtime(CALLS, false).await?.as_secs_f64());
        floor.push(through_runtime(CALLS, true).await?.as_secs_f64());
    }
    let per_call_ms = |seconds: f64| seconds * 1000.0 / CALLS as f64;
    let direct = median(&mut direct);
    let tool = median(&mut tool);
    let runtime = median(&mut runtime);
    let floor = median(&mut floor);
    print(
        "mcp",
        "overhead_per_call_ms",
        per_call_ms(runtime - direct),
        "ms",
        json!({ "calls": CALLS, "repeats": REPEATS, "server": SERVER, "tool": TOOL,
            "transport": "stdio",
            "direct_rmcp_ms_per_call": per_call_ms(direct),
            "tool_source_ms_per_call": per_call_ms(tool),
            "runtime_ms_per_call": per_call_ms(runtime),
            "noop_tool_runtime_ms_per_call": per_call_ms(floor) }),
    );
    Ok(())
}

fn server_missing(error: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!(
        "cannot start `{SERVER}` ({error}); install it with `pip install mcp-server-time`"
    )
}

/// N calls with a bare rmcp client, after one warm-up call.
async fn direct_calls(calls: usize) -> anyhow::Result<Duration> {
    let transport =
        TokioChildProcess::new(tokio::process::Command::new(SERVER)).map_err(server_missing)?;
    let client = ().serve(transport).await.map_err(server_missing)?;
    let arguments: serde_json::Map<String, serde_json::Value> = serde_json::from_str(ARGUMENTS)?;
    let call = || CallToolRequestParams::new(TOOL).with_arguments(arguments.clone());
    client.call_tool(call()).await?;
    let started = Instant::now();
    for _ in 0..calls {
        let result = client.call_tool(call()).await?;
        anyhow::ensure!(result.is_error != Some(true), "{TOOL} failed: {result:?}");
    }
    let elapsed = started.elapsed();
    client.cancel().await?;
    Ok(elapsed)
}

/// N calls of the source's tool executor itself, without a runtime: what
/// `roder-ext-mcp` adds, apart from the turn loop.
async fn tool_calls(calls: usize) -> anyhow::Result<Duration> {
    use roder_api::tools::{ToolCall, ToolExecutionContext, ToolExecutor as _, ToolWorkspace};
    let source = McpToolSource::start(
        vec![McpServerConfig::stdio("time", SERVER, &[])],
        std::path::Path::new("."),
    )
    .await?;
    let tool = source
        .tools()
        .iter()
        .find(|tool| tool.server_tool_name() == TOOL)
        .ok_or_else(|| server_missing(format!("no tool {TOOL}")))?
        .clone();
    let call = ToolCall {
        id: "call".into(),
        name: format!("mcp__time__{TOOL}"),
        arguments: serde_json::from_str(ARGUMENTS)?,
    };
    let context = ToolExecutionContext::for_workspace(ToolWorkspace::None);
    tool.execute(context.clone(), call.clone()).await?;
    let started = Instant::now();
    for _ in 0..calls {
        let result = tool.execute(context.clone(), call.clone()).await?;
        anyhow::ensure!(!result.is_error, "{TOOL} failed: {}", result.text);
    }
    Ok(started.elapsed())
}

/// A tool that answers at once: the turn loop's own cost per call.
struct Noop;

#[async_trait::async_trait]
impl roder_api::tools::ToolExecutor for Noop {
    fn spec(&self) -> roder_api::tools::ToolSpec {
        roder_api::tools::ToolSpec {
            name: "noop".into(),
            description: "Answers at once.".into(),
            parameters: json!({"type": "object"}),
        }
    }

    async fn execute(
        &self,
        _ctx: roder_api::tools::ToolExecutionContext,
        call: roder_api::tools::ToolCall,
    ) -> anyhow::Result<roder_api::tools::ToolResult> {
        Ok(roder_api::tools::ToolResult::ok(
            &call,
            "ok",
            serde_json::Value::Null,
        ))
    }
}

struct NoopContributor;

impl roder_api::tools::ToolContributor for NoopContributor {
    fn id(&self) -> String {
        "noop".into()
    }

    fn contribute(&self, registry: &mut roder_api::tools::ToolRegistry) -> anyhow::Result<()> {
        registry.register(Arc::new(Noop))
    }
}

/// A scripted turn of N calls through the runtime. The server is started
/// (and one call made) before the clock starts, as a configured server is
/// before a turn. With `noop`, the calls go to a tool that answers at once
/// instead (the server still runs, idle), which is the turn loop's floor.
async fn through_runtime(calls: usize, noop: bool) -> anyhow::Result<Duration> {
    let workspace = tempfile::tempdir()?;
    let store = tempfile::tempdir()?;
    let source = McpToolSource::start(
        vec![McpServerConfig::stdio("time", SERVER, &[])],
        workspace.path(),
    )
    .await?;
    if let Some((_, ServerStatus::Failed { error, .. })) = source.statuses().first() {
        return Err(server_missing(error));
    }
    let name = if noop {
        "noop".to_string()
    } else {
        format!("mcp__time__{TOOL}")
    };
    let mut rounds: Vec<ScriptedRound> = (0..=calls)
        .map(|index| {
            let id = format!("call-{index}");
            tool_round(&[(id.as_str(), name.as_str(), ARGUMENTS)])
        })
        .collect();
    rounds.push(final_round("done"));
    let mut builder = ExtensionRegistryBuilder::new();
    builder.inference_engine(ScriptedEngine::new(rounds));
    builder.thread_store_factory(Arc::new(JsonlThreadStoreFactory {
        base_path: store.path().to_path_buf(),
    }));
    builder.tool_contributor(roder_tools::builtin_coding_tools_contributor(
        workspace.path(),
    )?);
    builder.tool_contributor(Arc::new(source));
    builder.tool_contributor(Arc::new(NoopContributor));
    let runtime = Arc::new(Runtime::new(
        builder.build()?,
        RuntimeConfig {
            workspace: Some(workspace.path().display().to_string()),
            ..RuntimeConfig::default()
        },
    )?);
    let thread_id = runtime.create_thread(None).await?.thread_id;
    let mut events = runtime.subscribe_events();
    runtime
        .start_turn(StartTurnRequest::new(
            &thread_id,
            "what time is it, many times",
        ))
        .await?;
    let mut errors = 0;
    let mut completed = 0;
    let mut started = None;
    loop {
        let envelope = events.recv().await?;
        match envelope.event {
            RoderEvent::ToolCallCompleted(call) => {
                if call.is_error {
                    errors += 1;
                }
                completed += 1;
                // The first call is the warm-up: the clock starts after it.
                if completed == 1 {
                    started = Some(Instant::now());
                }
            }
            RoderEvent::TurnCompleted(_) => break,
            RoderEvent::TurnFailed(failed) => anyhow::bail!("turn failed: {}", failed.error),
            _ => {}
        }
    }
    let elapsed = started.map(|started| started.elapsed()).unwrap_or_default();
    anyhow::ensure!(errors == 0, "{errors} MCP calls failed");
    anyhow::ensure!(completed == calls + 1, "{completed} calls completed");
    Ok(elapsed)
}
