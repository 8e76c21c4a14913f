//! `mcp`: what the runtime adds to an MCP tool call. One `mcp-server-time`
//! process, started once, serves both sides, so what is compared is the
//! path to it and not two processes (separate instances of the Python server
//! differ by up to 2x from one another). Each sample, on that one
//! connection: a block of direct calls of `get_current_time` with the bare
//! rmcp peer, then a scripted turn making the same number of calls through
//! the runtime (the `roder-ext-mcp` tool source, JSONL store, every event
//! persisted; a new thread each sample, so the transcript stays the size of
//! one block), then the same turn calling a tool that answers at once (the
//! turn loop's own cost); every other sample in the reverse order. `overhead_per_call_ms` is the median over samples
//! of (runtime - direct) per call, paired within a sample. The context also
//! has the tool source's executor called without a runtime.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use roder_api::events::RoderEvent;
use roder_api::tools::{ToolCall, ToolExecutionContext, ToolExecutor as _, ToolWorkspace};
use roder_core::{Runtime, RuntimeConfig, StartTurnRequest};
use roder_ext_mcp::{McpServerConfig, McpTool, McpToolSource, ServerStatus};
use roder_testkit::{ScriptedEngine, ScriptedRound, final_round, tool_round};
use serde_json::json;

use crate::coding_runtime;
use crate::figure::{median, print, sized};

/// Calls per block.
fn calls() -> usize {
    sized(30, 2)
}

fn samples() -> usize {
    sized(30, 2)
}

const SERVER: &str = "mcp-server-time";
const TOOL: &str = "get_current_time";
const ARGUMENTS: &str = r#"{"timezone":"UTC"}"#;
const NOOP: &str = "noop";

pub async fn run() -> anyhow::Result<()> {
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
    let tool = source
        .tools()
        .iter()
        .find(|tool| tool.server_tool_name() == TOOL)
        .ok_or_else(|| server_missing(format!("no tool {TOOL}")))?
        .clone();
    let mcp_name = roder_api::tools::ToolExecutor::spec(tool.as_ref()).name;
    // Every turn of every sample, in order: an MCP turn then a no-op turn,
    // each a warm-up call, calls() timed calls and a final answer.
    let mut rounds: Vec<ScriptedRound> = Vec::new();
    for _ in 0..samples() {
        for name in [mcp_name.as_str(), NOOP] {
            rounds.extend((0..=calls()).map(|index| {
                let id = format!("call-{index}");
                tool_round(&[(id.as_str(), name, ARGUMENTS)])
            }));
            rounds.push(final_round("done"));
        }
    }
    let mut builder =
        coding_runtime::builder(ScriptedEngine::new(rounds), store.path(), workspace.path())?;
    builder.tool_contributor(Arc::new(source));
    builder.tool_contributor(Arc::new(NoopContributor));
    let runtime = coding_runtime::runtime(builder, workspace.path(), RuntimeConfig::default())?;

    let per_call_ms = |elapsed: Duration| elapsed.as_secs_f64() * 1000.0 / calls() as f64;
    let (mut direct, mut executor, mut through, mut floor, mut overhead) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for sample in 0..samples() {
        // Odd samples run their blocks in reverse order, so a drift of the
        // server's speed within a run weighs on both sides alike.
        let (direct_ms, executor_ms, through_ms, floor_ms);
        if sample % 2 == 0 {
            direct_ms = per_call_ms(direct_calls(&tool).await?);
            executor_ms = per_call_ms(executor_calls(&tool).await?);
            through_ms = per_call_ms(turn(&runtime).await?);
            floor_ms = per_call_ms(turn(&runtime).await?);
        } else {
            through_ms = per_call_ms(turn(&runtime).await?);
            floor_ms = per_call_ms(turn(&runtime).await?);
            executor_ms = per_call_ms(executor_calls(&tool).await?);
            direct_ms = per_call_ms(direct_calls(&tool).await?);
        }
        overhead.push(through_ms - direct_ms);
        direct.push(direct_ms);
        executor.push(executor_ms);
        through.push(through_ms);
        floor.push(floor_ms);
    }
    print(
        "mcp",
        "overhead_per_call_ms",
        median(&mut overhead),
        "ms",
        json!({ "calls_per_sample": calls(), "samples": samples(), "server": SERVER, "tool": TOOL,
            "transport": "stdio", "same_server_process": true,
            "direct_rmcp_ms_per_call": median(&mut direct),
            "tool_source_ms_per_call": median(&mut executor),
            "runtime_ms_per_call": median(&mut through),
            "noop_tool_runtime_ms_per_call": median(&mut floor) }),
    );
    Ok(())
}

fn server_missing(error: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!(
        "cannot start `{SERVER}` ({error}); install it with `pip install mcp-server-time`"
    )
}

/// calls() bare rmcp calls on the tool source's own connection, after one
/// warm-up call.
async fn direct_calls(tool: &McpTool) -> anyhow::Result<Duration> {
    let peer = tool.connection().peer().await?;
    let arguments: serde_json::Map<String, serde_json::Value> = serde_json::from_str(ARGUMENTS)?;
    let call = || CallToolRequestParams::new(TOOL).with_arguments(arguments.clone());
    peer.call_tool(call()).await?;
    let started = Instant::now();
    for _ in 0..calls() {
        let result = peer.call_tool(call()).await?;
        anyhow::ensure!(result.is_error != Some(true), "{TOOL} failed: {result:?}");
    }
    Ok(started.elapsed())
}

/// calls() calls of the source's tool executor itself, without a runtime:
/// what `roder-ext-mcp` adds, apart from the turn loop.
async fn executor_calls(tool: &McpTool) -> anyhow::Result<Duration> {
    let call = ToolCall {
        id: "call".into(),
        name: format!("mcp__time__{TOOL}"),
        arguments: serde_json::from_str(ARGUMENTS)?,
    };
    let context = ToolExecutionContext::for_workspace(ToolWorkspace::None);
    tool.execute(context.clone(), call.clone()).await?;
    let started = Instant::now();
    for _ in 0..calls() {
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
            name: NOOP.into(),
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

/// The next scripted turn, on a new thread: calls() + 1 tool calls, timed
/// from the first call's completion (the warm-up) to the last's.
async fn turn(runtime: &Arc<Runtime>) -> anyhow::Result<Duration> {
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
    let mut last = None;
    loop {
        let envelope = events.recv().await?;
        if envelope.thread_id != thread_id {
            continue;
        }
        match envelope.event {
            RoderEvent::ToolCallCompleted(call) => {
                if call.is_error {
                    errors += 1;
                }
                completed += 1;
                let now = Instant::now();
                started.get_or_insert(now);
                last = Some(now);
            }
            RoderEvent::TurnCompleted(_) => break,
            RoderEvent::TurnFailed(failed) => anyhow::bail!("turn failed: {}", failed.error),
            _ => {}
        }
    }
    anyhow::ensure!(errors == 0, "{errors} calls failed");
    anyhow::ensure!(completed == calls() + 1, "{completed} calls completed");
    Ok(match (started, last) {
        (Some(started), Some(last)) => last - started,
        _ => Duration::ZERO,
    })
}
