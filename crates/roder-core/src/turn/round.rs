//! The rounds of a turn: one model request, then the tool calls it asks for,
//! until the model answers without calling a tool.

use std::time::Instant;

use futures::StreamExt;
use roder_api::events::{
    InferenceStarted, MessageDeltaEvent, ReasoningDeltaEvent, RoderEvent, ToolCallCompleted,
    ToolCallRequested, ToolCallStarted, TranscriptItemAppended, UsageUpdated,
};
use roder_api::inference::{
    AgentInferenceRequest, InferenceEvent, InferenceTurnContext, TokenUsage,
    ToolCallCompleted as ModelToolCall,
};
use roder_api::transcript::TranscriptItem;

use crate::policy;
use crate::routing::{self, RoutedResult};
use crate::runtime::Runtime;
use crate::turn::plan::TurnPlan;
use crate::turn::record::OpenCalls;

pub(crate) struct TurnSuccess {
    pub final_message: Option<String>,
    pub usage: TokenUsage,
}

/// What one model request produced.
#[derive(Default)]
struct ModelResponse {
    text: String,
    reasoning: String,
    tool_calls: Vec<ModelToolCall>,
    usage: TokenUsage,
}

pub(crate) async fn run_rounds(
    runtime: &Runtime,
    plan: &TurnPlan,
    open_calls: &OpenCalls,
) -> anyhow::Result<TurnSuccess> {
    let mut transcript = plan.transcript.clone();
    let mut usage = TokenUsage::default();
    let tools = policy::offered_tools(runtime, plan);
    let mut round = 0u32;
    loop {
        round = round.saturating_add(1);
        emit(
            runtime,
            plan,
            RoderEvent::InferenceStarted(InferenceStarted {
                thread_id: plan.thread_id().to_string(),
                turn_id: plan.turn_id.clone(),
                round,
            }),
        )
        .await?;
        let request = AgentInferenceRequest {
            model: plan.model.clone(),
            instructions: plan.instructions.clone(),
            developer_context: plan.developer_context.clone(),
            transcript: transcript.clone(),
            tools: tools.clone(),
            parallel_tool_calls: plan.parallel_tool_calls,
            reasoning: plan.reasoning,
            hosted_web_search: runtime.config.hosted_web_search.clone(),
        };
        let response = request_model(runtime, plan, request).await?;
        if response.usage != TokenUsage::default() {
            usage.add(&response.usage);
            emit(
                runtime,
                plan,
                RoderEvent::UsageUpdated(UsageUpdated {
                    thread_id: plan.thread_id().to_string(),
                    turn_id: plan.turn_id.clone(),
                    usage: response.usage.clone(),
                    turn_total: usage.clone(),
                }),
            )
            .await?;
        }
        if !response.reasoning.is_empty() {
            append(
                runtime,
                plan,
                &mut transcript,
                TranscriptItem::Reasoning {
                    text: response.reasoning,
                },
            )
            .await?;
        }
        if !response.text.is_empty() {
            append(
                runtime,
                plan,
                &mut transcript,
                TranscriptItem::AssistantMessage {
                    text: response.text.clone(),
                },
            )
            .await?;
        }
        if response.tool_calls.is_empty() {
            return Ok(TurnSuccess {
                final_message: (!response.text.is_empty()).then_some(response.text),
                usage,
            });
        }
        for call in &response.tool_calls {
            open_calls.open(&call.id, &call.name);
            append(
                runtime,
                plan,
                &mut transcript,
                TranscriptItem::ToolCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                },
            )
            .await?;
            emit(
                runtime,
                plan,
                RoderEvent::ToolCallRequested(ToolCallRequested {
                    thread_id: plan.thread_id().to_string(),
                    turn_id: plan.turn_id.clone(),
                    call_id: call.id.clone(),
                    tool_name: call.name.clone(),
                    arguments: call.arguments.clone(),
                }),
            )
            .await?;
        }
        let results = if plan.parallel_tool_calls {
            futures::future::join_all(
                response
                    .tool_calls
                    .iter()
                    .map(|call| run_tool_call(runtime, plan, call)),
            )
            .await
        } else {
            let mut results = Vec::with_capacity(response.tool_calls.len());
            for call in &response.tool_calls {
                results.push(run_tool_call(runtime, plan, call).await);
            }
            results
        };
        for result in results {
            let result = result?;
            append(
                runtime,
                plan,
                &mut transcript,
                TranscriptItem::ToolResult {
                    id: result.id.clone(),
                    name: result.name.clone(),
                    output: result.text.clone(),
                    is_error: result.is_error,
                },
            )
            .await?;
            open_calls.close(&result.id);
        }
    }
}

/// Streams one model response, publishing deltas as they arrive.
async fn request_model(
    runtime: &Runtime,
    plan: &TurnPlan,
    request: AgentInferenceRequest,
) -> anyhow::Result<ModelResponse> {
    let ctx = InferenceTurnContext {
        thread_id: plan.thread_id(),
        turn_id: &plan.turn_id,
        reliability: &runtime.config.reliability,
        cancellation: &plan.active.cancellation,
    };
    let cancellation = &plan.active.cancellation;
    let mut stream = cancellable(cancellation, plan.engine.stream_turn(ctx, request)).await?;
    let mut response = ModelResponse::default();
    let mut completed = false;
    while let Some(event) = cancellable(cancellation, async { Ok(stream.next().await) }).await? {
        match event? {
            InferenceEvent::MessageDelta(delta) => {
                response.text.push_str(&delta.text);
                emit(
                    runtime,
                    plan,
                    RoderEvent::MessageDelta(MessageDeltaEvent {
                        thread_id: plan.thread_id().to_string(),
                        turn_id: plan.turn_id.clone(),
                        text: delta.text,
                        phase: delta.phase,
                    }),
                )
                .await?;
            }
            InferenceEvent::ReasoningDelta(delta) => {
                response.reasoning.push_str(&delta.text);
                emit(
                    runtime,
                    plan,
                    RoderEvent::ReasoningDelta(ReasoningDeltaEvent {
                        thread_id: plan.thread_id().to_string(),
                        turn_id: plan.turn_id.clone(),
                        text: delta.text,
                    }),
                )
                .await?;
            }
            // Fragments are for engines that assemble calls; the runtime acts
            // on whole calls only.
            InferenceEvent::ToolCallArgumentsDelta(_) => {}
            InferenceEvent::ToolCallCompleted(call) => response.tool_calls.push(call),
            InferenceEvent::Usage(usage) => response.usage.add(&usage),
            InferenceEvent::Completed(_) => {
                completed = true;
                break;
            }
            InferenceEvent::Failed(failure) => {
                anyhow::bail!("the model request failed: {}", failure.message)
            }
        }
    }
    if !completed {
        anyhow::bail!("the model's response stream ended before it completed");
    }
    Ok(response)
}

/// Runs one tool call and publishes its start and outcome.
async fn run_tool_call(
    runtime: &Runtime,
    plan: &TurnPlan,
    call: &ModelToolCall,
) -> anyhow::Result<roder_api::tools::ToolResult> {
    emit(
        runtime,
        plan,
        RoderEvent::ToolCallStarted(ToolCallStarted {
            thread_id: plan.thread_id().to_string(),
            turn_id: plan.turn_id.clone(),
            call_id: call.id.clone(),
            tool_name: call.name.clone(),
        }),
    )
    .await?;
    let started = Instant::now();
    let RoutedResult { result, local } = routing::execute(runtime, plan, call).await;
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    if local && !result.is_error {
        for change in routing::file_changes(&result) {
            emit(
                runtime,
                plan,
                RoderEvent::FileChangePreviewReady(roder_api::events::FileChangePreviewReady {
                    thread_id: plan.thread_id().to_string(),
                    turn_id: plan.turn_id.clone(),
                    call_id: call.id.clone(),
                    path: change.path,
                    diff: change.diff,
                }),
            )
            .await?;
        }
    }
    emit(
        runtime,
        plan,
        RoderEvent::ToolCallCompleted(ToolCallCompleted {
            thread_id: plan.thread_id().to_string(),
            turn_id: plan.turn_id.clone(),
            call_id: call.id.clone(),
            tool_name: Some(result.name.clone()),
            output: Some(result.text.clone()),
            is_error: result.is_error,
            data: result.data.clone(),
            duration_ms,
        }),
    )
    .await?;
    Ok(result)
}

/// Numbers, persists and publishes one event of the turn.
pub(crate) async fn emit(
    runtime: &Runtime,
    plan: &TurnPlan,
    event: RoderEvent,
) -> anyhow::Result<()> {
    runtime
        .bus
        .emit(&plan.thread, Some(&plan.turn_id), event)
        .await
        .map(|_| ())
}

async fn append(
    runtime: &Runtime,
    plan: &TurnPlan,
    transcript: &mut Vec<TranscriptItem>,
    item: TranscriptItem,
) -> anyhow::Result<()> {
    transcript.push(item.clone());
    emit(
        runtime,
        plan,
        RoderEvent::TranscriptItemAppended(TranscriptItemAppended {
            thread_id: plan.thread_id().to_string(),
            turn_id: plan.turn_id.clone(),
            item,
        }),
    )
    .await
}

/// Runs `work` unless the turn is cancelled first: a model that stops
/// streaming must not hold an interrupted turn for its grace period.
pub(crate) async fn cancellable<T>(
    cancellation: &tokio_util::sync::CancellationToken,
    work: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    tokio::select! {
        biased;
        _ = cancellation.cancelled() => anyhow::bail!("the turn was cancelled"),
        result = work => result,
    }
}
