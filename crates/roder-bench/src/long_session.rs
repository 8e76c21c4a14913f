//! `long-session`: one scripted turn of 2,000 tool calls, each returning
//! 8 KiB, against a fake model whose context window is 128k tokens (bytes / 4
//! of the request's JSON) and which refuses every request over it. The
//! runtime has no `auto_compact_token_limit`: the threshold comes from the
//! window the engine lists. Figures: whether it completes, the largest
//! request, refusals, compactions, and `step_cost_ratio_end_to_start` (tokens
//! sent per step over the last 100 steps / the first 100; a step's cost
//! includes the summary requests made before it).
//!
//! Then `history_first_page_ms`: the first page (100 events) of a
//! 100,000-event thread in the JSONL store, read by a fresh runtime; and
//! `history_last_page_ms`: its last page, read from the store.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use roder_api::events::{EventEnvelope, RoderEvent, TranscriptItemAppended};
use roder_api::extension::{ExtensionRegistryBuilder, InferenceEngineId, ToolProviderId};
use roder_api::inference::{
    AgentInferenceRequest, CompletionMetadata, ContextOverflow, InferenceCapabilities,
    InferenceEngine, InferenceEvent, InferenceEventStream, InferenceProviderContext,
    InferenceTurnContext, MessageDelta, ModelDescriptor, TokenUsage, ToolCallCompleted,
};
use roder_api::thread::ThreadStoreFactory;
use roder_api::tools::{
    ToolCall, ToolContributor, ToolExecutionContext, ToolExecutor, ToolRegistry, ToolResult,
    ToolSpec,
};
use roder_api::transcript::TranscriptItem;
use roder_core::{Runtime, RuntimeConfig, SUMMARY_INSTRUCTIONS, StartTurnRequest};
use roder_ext_jsonl_thread_store::store::JsonlThreadStoreFactory;
use serde_json::json;
use time::OffsetDateTime;

use crate::figure::{median, print, sized};

fn calls() -> usize {
    sized(2_000, 20)
}

const OUTPUT_BYTES: usize = 8 * 1024;
const WINDOW_TOKENS: u64 = 128_000;
fn edge_steps() -> usize {
    sized(100, 3)
}

fn history_events() -> u64 {
    sized(100_000, 300)
}

const PAGE_ITEMS: usize = 100;

pub async fn run() -> anyhow::Result<()> {
    session().await?;
    history().await
}

fn tokens(request: &AgentInferenceRequest) -> u64 {
    serde_json::to_string(request).map_or(u64::MAX, |json| (json.len() / 4) as u64)
}

/// The fake model: refuses requests over the window, summarizes when asked,
/// else calls `blob` until `calls()` calls were made, then answers.
#[derive(Default)]
struct WindowModel {
    calls: AtomicUsize,
    refused: AtomicUsize,
    summaries: AtomicUsize,
    /// Tokens of each turn request, with the summary requests before it.
    steps: Mutex<Vec<u64>>,
    pending_summary_tokens: Mutex<u64>,
    largest: Mutex<u64>,
}

#[async_trait::async_trait]
impl InferenceEngine for WindowModel {
    fn id(&self) -> InferenceEngineId {
        "mock".to_string()
    }

    fn capabilities(&self) -> InferenceCapabilities {
        InferenceCapabilities::coding_agent_default()
    }

    async fn list_models(
        &self,
        _ctx: InferenceProviderContext<'_>,
    ) -> anyhow::Result<Vec<ModelDescriptor>> {
        Ok(vec![ModelDescriptor {
            id: "mock".to_string(),
            display_name: None,
            context_window: Some(WINDOW_TOKENS),
        }])
    }

    async fn stream_turn(
        &self,
        _ctx: InferenceTurnContext<'_>,
        request: AgentInferenceRequest,
    ) -> anyhow::Result<InferenceEventStream> {
        let size = tokens(&request);
        {
            let mut largest = lock(&self.largest);
            *largest = (*largest).max(size);
        }
        if size > WINDOW_TOKENS {
            self.refused.fetch_add(1, Ordering::SeqCst);
            return Err(ContextOverflow {
                message: format!("{size} tokens is over the {WINDOW_TOKENS}-token window"),
            }
            .into());
        }
        let usage = InferenceEvent::Usage(TokenUsage {
            input_tokens: size,
            output_tokens: 20,
            ..TokenUsage::default()
        });
        let event = if request.instructions == SUMMARY_INSTRUCTIONS {
            self.summaries.fetch_add(1, Ordering::SeqCst);
            *lock(&self.pending_summary_tokens) += size;
            text(&"The agent read blob outputs one after another; nothing failed. ".repeat(8))
        } else {
            let before = std::mem::take(&mut *lock(&self.pending_summary_tokens));
            lock(&self.steps).push(size + before);
            let done = self.calls.fetch_add(1, Ordering::SeqCst);
            if done < calls() {
                InferenceEvent::ToolCallCompleted(ToolCallCompleted {
                    id: format!("call-{done}"),
                    name: "blob".to_string(),
                    arguments: format!(r#"{{"index":{done}}}"#),
                })
            } else {
                text("read every blob")
            }
        };
        let completed = InferenceEvent::Completed(CompletionMetadata {
            stop_reason: Some("stop".to_string()),
            provider_response_id: None,
        });
        Ok(futures::stream::iter([Ok(usage), Ok(event), Ok(completed)]).boxed())
    }
}

fn text(text: &str) -> InferenceEvent {
    InferenceEvent::MessageDelta(MessageDelta {
        text: text.to_string(),
        phase: None,
    })
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A tool returning 8 KiB of text.
struct Blob;

#[async_trait::async_trait]
impl ToolExecutor for Blob {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "blob".to_string(),
            description: "Returns 8 KiB of text.".to_string(),
            parameters: json!({"type": "object", "properties": {"index": {"type": "integer"}}}),
        }
    }

    async fn execute(
        &self,
        _ctx: ToolExecutionContext,
        call: ToolCall,
    ) -> anyhow::Result<ToolResult> {
        let line = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_\n";
        let body = line.repeat(OUTPUT_BYTES / line.len());
        Ok(ToolResult::ok(&call, body, serde_json::Value::Null))
    }
}

struct BlobTools;

impl ToolContributor for BlobTools {
    fn id(&self) -> ToolProviderId {
        "bench-blob".to_string()
    }

    fn contribute(&self, registry: &mut ToolRegistry) -> anyhow::Result<()> {
        registry.register(Arc::new(Blob))
    }
}

async fn session() -> anyhow::Result<()> {
    let workspace = tempfile::tempdir()?;
    let store = tempfile::tempdir()?;
    let model = Arc::new(WindowModel::default());
    let mut builder = ExtensionRegistryBuilder::new();
    builder.inference_engine(model.clone());
    builder.thread_store_factory(Arc::new(JsonlThreadStoreFactory {
        base_path: store.path().to_path_buf(),
    }));
    builder.tool_contributor(Arc::new(BlobTools));
    let runtime = Arc::new(Runtime::new(
        builder.build()?,
        RuntimeConfig {
            workspace: Some(workspace.path().display().to_string()),
            ..RuntimeConfig::default()
        },
    )?);
    let thread_id = runtime.create_thread(None).await?.thread_id;
    let mut events = runtime.subscribe_events();
    let started = Instant::now();
    runtime
        .start_turn(StartTurnRequest::new(&thread_id, "call blob 2,000 times"))
        .await?;
    let mut compactions = 0usize;
    let mut completed = false;
    loop {
        let envelope = events.recv().await?;
        if envelope.thread_id != thread_id {
            continue;
        }
        match envelope.event {
            RoderEvent::ContextCompacted(_) => compactions += 1,
            RoderEvent::TurnCompleted(_) => {
                completed = true;
                break;
            }
            RoderEvent::TurnFailed(failed) => {
                eprintln!("long-session: the turn failed: {}", failed.error);
                break;
            }
            other if other.is_terminal() => break,
            _ => {}
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let steps = lock(&model.steps).clone();
    let edge = edge_steps().min(steps.len() / 2).max(1);
    let mean = |slice: &[u64]| slice.iter().sum::<u64>() as f64 / slice.len().max(1) as f64;
    let first = mean(steps.get(..edge).unwrap_or_default());
    let last = mean(
        steps
            .get(steps.len().saturating_sub(edge)..)
            .unwrap_or_default(),
    );
    let largest = *lock(&model.largest);
    let refused = model.refused.load(Ordering::SeqCst);
    let context = json!({
        "calls": calls(), "output_bytes": OUTPUT_BYTES, "window_tokens": WINDOW_TOKENS,
        "steps": steps.len(), "completed": completed, "compactions": compactions,
        "summary_requests": model.summaries.load(Ordering::SeqCst),
        "refused_requests": refused, "largest_request_tokens": largest,
        "first_steps_mean_tokens": first, "last_steps_mean_tokens": last,
        "seconds": seconds,
    });
    print(
        "long-session",
        "completed",
        if completed { 1.0 } else { 0.0 },
        "bool",
        context.clone(),
    );
    print(
        "long-session",
        "largest_request_tokens",
        largest as f64,
        "tokens",
        context.clone(),
    );
    print(
        "long-session",
        "refused_requests",
        refused as f64,
        "count",
        context.clone(),
    );
    print(
        "long-session",
        "step_cost_ratio_end_to_start",
        if first > 0.0 { last / first } else { 0.0 },
        "ratio",
        context,
    );
    anyhow::ensure!(completed, "the long session did not complete");
    anyhow::ensure!(
        largest <= WINDOW_TOKENS && refused == 0,
        "a request was over the window"
    );
    Ok(())
}

async fn history() -> anyhow::Result<()> {
    let workspace = tempfile::tempdir()?;
    let dir = tempfile::tempdir()?;
    let factory = Arc::new(JsonlThreadStoreFactory {
        base_path: dir.path().to_path_buf(),
    });
    let thread_id = {
        let mut builder = ExtensionRegistryBuilder::new();
        builder.inference_engine(Arc::new(WindowModel::default()));
        builder.thread_store_factory(factory.clone());
        let runtime = Runtime::new(
            builder.build()?,
            RuntimeConfig {
                workspace: Some(workspace.path().display().to_string()),
                ..RuntimeConfig::default()
            },
        )?;
        runtime.create_thread(None).await?.thread_id
    };
    let store = factory.open()?;
    let output = "x".repeat(200);
    let mut seq = 2u64;
    while seq <= history_events() {
        let end = (seq + 999).min(history_events());
        let batch: Vec<EventEnvelope> = (seq..=end)
            .map(|seq| EventEnvelope {
                seq,
                timestamp: OffsetDateTime::now_utc(),
                thread_id: thread_id.clone(),
                turn_id: Some("bench".to_string()),
                event: RoderEvent::TranscriptItemAppended(TranscriptItemAppended {
                    thread_id: thread_id.clone(),
                    turn_id: "bench".to_string(),
                    item: TranscriptItem::ToolResult {
                        id: format!("call-{seq}"),
                        name: "blob".to_string(),
                        output: output.clone(),
                        is_error: false,
                    },
                }),
            })
            .collect();
        store.append_events(&thread_id, &batch).await?;
        seq = end + 1;
    }
    let mut samples = Vec::new();
    let mut cold = 0.0;
    for attempt in 0..7 {
        // A fresh runtime each time: nothing of the thread is cached.
        let mut builder = ExtensionRegistryBuilder::new();
        builder.inference_engine(Arc::new(WindowModel::default()));
        builder.thread_store_factory(factory.clone());
        let runtime = Runtime::new(builder.build()?, RuntimeConfig::default())?;
        let started = Instant::now();
        let page = runtime
            .read_thread_history(&thread_id, None, PAGE_ITEMS, 1 << 20)
            .await?;
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        anyhow::ensure!(
            page.events.len() == PAGE_ITEMS && page.next_cursor.is_some(),
            "the first page should hold {PAGE_ITEMS} events and a cursor"
        );
        if attempt == 0 {
            cold = ms;
        }
        samples.push(ms);
    }
    // The last page, straight from the store: a binary search finds where
    // it starts, so it costs what the first one does.
    let mut last_samples = Vec::new();
    for _ in 0..7 {
        let started = Instant::now();
        let page = store
            .load_events_page(
                &thread_id,
                history_events() - PAGE_ITEMS as u64,
                PAGE_ITEMS,
                1 << 20,
            )
            .await?;
        last_samples.push(started.elapsed().as_secs_f64() * 1000.0);
        anyhow::ensure!(
            page.events.len() == PAGE_ITEMS && !page.more,
            "the last page should hold the last {PAGE_ITEMS} events"
        );
    }
    let started = Instant::now();
    let all = store.load_events(&thread_id, 0).await?;
    let whole_ms = started.elapsed().as_secs_f64() * 1000.0;
    print(
        "long-session",
        "history_first_page_ms",
        median(&mut samples),
        "ms",
        json!({ "events": all.len(), "page_items": PAGE_ITEMS, "first_attempt_ms": cold,
            "whole_log_load_ms": whole_ms, "store": "jsonl" }),
    );
    print(
        "long-session",
        "history_last_page_ms",
        median(&mut last_samples),
        "ms",
        json!({ "events": all.len(), "page_items": PAGE_ITEMS, "whole_log_load_ms": whole_ms,
            "store": "jsonl", "read_by": "ThreadStore::load_events_page" }),
    );
    Ok(())
}
