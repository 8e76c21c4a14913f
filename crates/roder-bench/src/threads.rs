//! `threads`: N threads each running a scripted turn concurrently (a fake
//! engine that asks for one `write_file` and then answers; local workspace
//! per thread; JSONL store). Reports wall time for 100 and 1,000 threads and
//! the memory each thread costs.

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use roder_api::catalog::PROVIDER_MOCK;
use roder_api::events::RoderEvent;
use roder_api::extension::{ExtensionRegistryBuilder, InferenceEngineId};
use roder_api::inference::{
    AgentInferenceRequest, CompletionMetadata, InferenceCapabilities, InferenceEngine,
    InferenceEvent, InferenceEventStream, InferenceProviderContext, InferenceTurnContext,
    MessageDelta, ModelDescriptor, ToolCallCompleted,
};
use roder_api::transcript::TranscriptItem;
use roder_core::{Runtime, RuntimeConfig, StartTurnRequest};
use roder_ext_jsonl_thread_store::store::JsonlThreadStoreFactory;
use serde_json::json;

use crate::figure::print;

/// Writes a file on the first request of a turn, answers on the next.
struct WriteThenAnswer;

#[async_trait::async_trait]
impl InferenceEngine for WriteThenAnswer {
    fn id(&self) -> InferenceEngineId {
        PROVIDER_MOCK.to_string()
    }

    fn capabilities(&self) -> InferenceCapabilities {
        InferenceCapabilities::coding_agent_default()
    }

    async fn list_models(
        &self,
        _ctx: InferenceProviderContext<'_>,
    ) -> anyhow::Result<Vec<ModelDescriptor>> {
        Ok(Vec::new())
    }

    async fn stream_turn(
        &self,
        _ctx: InferenceTurnContext<'_>,
        request: AgentInferenceRequest,
    ) -> anyhow::Result<InferenceEventStream> {
        let first = matches!(
            request.transcript.last(),
            Some(TranscriptItem::UserMessage { .. })
        );
        let mut events = Vec::new();
        if first {
            events.push(InferenceEvent::ToolCallCompleted(ToolCallCompleted {
                id: "write".to_string(),
                name: "write_file".to_string(),
                arguments: r#"{"path":"out.txt","content":"written by a benchmark thread\n"}"#
                    .to_string(),
            }));
        } else {
            events.push(InferenceEvent::MessageDelta(MessageDelta {
                text: "done".to_string(),
                phase: None,
            }));
        }
        events.push(InferenceEvent::Completed(CompletionMetadata {
            stop_reason: Some(if first { "tool_calls" } else { "stop" }.to_string()),
            provider_response_id: None,
        }));
        Ok(futures::stream::iter(events.into_iter().map(Ok)).boxed())
    }
}

/// A field of /proc/self/status in KiB.
fn status_kib(field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|value| value.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no {field} in /proc/self/status"))
}

pub async fn run() -> anyhow::Result<()> {
    // The larger run first, so the process's peak RSS is the 1,000-thread one.
    let baseline_kib = status_kib("VmRSS:")?;
    let wall_1000 = run_threads(1_000).await?;
    let peak_kib = status_kib("VmHWM:")?;
    let wall_100 = run_threads(100).await?;
    print(
        "threads",
        "wall_s_100",
        wall_100,
        "s",
        json!({ "threads": 100 }),
    );
    print(
        "threads",
        "wall_s_1000",
        wall_1000,
        "s",
        json!({ "threads": 1000 }),
    );
    print(
        "threads",
        "rss_per_thread_mib_1000",
        peak_kib.saturating_sub(baseline_kib) as f64 / 1024.0 / 1000.0,
        "MiB",
        json!({ "threads": 1000, "baseline_rss_mib": baseline_kib as f64 / 1024.0,
                "peak_rss_mib": peak_kib as f64 / 1024.0 }),
    );
    Ok(())
}

/// Runs `count` one-turn threads at once; returns the wall time in seconds.
async fn run_threads(count: usize) -> anyhow::Result<f64> {
    let root = tempfile::tempdir()?;
    let store = root.path().join("store");
    let mut builder = ExtensionRegistryBuilder::new();
    builder.inference_engine(Arc::new(WriteThenAnswer));
    builder.thread_store_factory(Arc::new(JsonlThreadStoreFactory { base_path: store }));
    builder.tool_contributor(roder_tools::builtin_coding_tools_contributor(root.path())?);
    let runtime = Arc::new(Runtime::new(builder.build()?, RuntimeConfig::default())?);
    let mut threads = Vec::with_capacity(count);
    for index in 0..count {
        let workspace = root.path().join(format!("ws-{index}"));
        tokio::fs::create_dir(&workspace).await?;
        let thread = runtime
            .create_thread(Some(workspace.display().to_string()))
            .await?;
        threads.push(thread.thread_id);
    }
    let mut events = runtime.subscribe_events();
    let started = Instant::now();
    for thread_id in &threads {
        runtime
            .start_turn(StartTurnRequest::new(thread_id, "write your file"))
            .await?;
    }
    let mut finished = 0;
    while finished < count {
        match events.recv().await?.event {
            RoderEvent::TurnCompleted(_) => finished += 1,
            RoderEvent::TurnFailed(failed) => anyhow::bail!("a turn failed: {}", failed.error),
            _ => {}
        }
    }
    let wall = started.elapsed().as_secs_f64();
    for index in 0..count {
        let written = root.path().join(format!("ws-{index}")).join("out.txt");
        anyhow::ensure!(
            tokio::fs::try_exists(&written).await?,
            "{} missing",
            written.display()
        );
    }
    Ok(wall)
}
