//! The rounds of a turn: one model request, then the tool calls it asks for,
//! until the model answers without calling a tool.

use roder_api::events::{
    CompactionTrigger, IncompleteAnswer, InferenceStarted, RoderEvent, ToolCallRequested,
    UsageUpdated,
};
use roder_api::inference::{AgentInferenceRequest, ContextOverflow, TokenUsage};
use roder_api::stop_reason::StopReason;
use roder_api::tools::ToolSpec;
use roder_api::transcript::TranscriptItem;

use crate::policy;
use crate::turn::compaction::{self, CompactionInput, Limits};
use crate::turn::context::{Emit, TurnContext};
use crate::turn::gauge::Gauge;
use crate::turn::model::{self, ModelResponse, PhasedText};
use crate::turn::record::OpenCalls;
use crate::turn::tool_call;

/// How a turn that was not stopped ended.
pub(crate) struct TurnSuccess {
    pub final_message: Option<String>,
    pub usage: TokenUsage,
    pub stop_reason: Option<StopReason>,
    pub incomplete: Option<IncompleteAnswer>,
}

pub(crate) async fn run_rounds(
    ctx: TurnContext<'_>,
    open_calls: &OpenCalls,
) -> anyhow::Result<TurnSuccess> {
    let mut usage = TokenUsage::default();
    let tools = policy::offered_tools(ctx.runtime, ctx.plan);
    let limits = Limits::resolve(
        ctx.runtime.config.auto_compact_token_limit,
        &ctx.plan.engine,
        &ctx.plan.model,
        &ctx.runtime.config.reliability,
    )
    .await;
    let mut gauge = Gauge::for_tools(&tools);
    let mut round = 0u32;
    loop {
        round = round.saturating_add(1);
        ctx.emit(RoderEvent::InferenceStarted(InferenceStarted {
            thread_id: ctx.thread_id(),
            turn_id: ctx.turn_id(),
            round,
        }))
        .await?;
        let response = request_fitting(ctx, &tools, &limits, &mut gauge, &mut usage).await?;
        // This response's events go out with the next one emitted (the first
        // tool call's start, or the turn's end).
        record_usage(ctx, &mut usage, &response.usage, Emit::Deferred).await?;
        let last = response.tool_calls.is_empty() || response.cut_off_call.is_some();
        for reasoning in response.reasoning_transcript() {
            ctx.defer_append(reasoning);
        }
        if last {
            // The answer is stored once, in `TurnCompleted`; only the
            // commentary before it becomes transcript messages here.
            let (commentary, answer) = response.split_answer();
            append_messages(ctx, commentary);
            return Ok(finished(&response, answer, usage));
        }
        append_messages(ctx, response.messages.iter().collect());
        run_tool_calls(ctx, open_calls, &response).await?;
    }
}

/// The next request, built from the transcript the log cursor keeps in
/// step with every append (this turn's included), tool outputs capped.
async fn next_request(ctx: TurnContext<'_>, tools: &[ToolSpec]) -> (AgentInferenceRequest, u64) {
    let (mut transcript, last_seq) = {
        let cursor = ctx.plan.thread.log.lock().await;
        (cursor.transcript.clone(), cursor.next_seq.saturating_sub(1))
    };
    compaction::cap_tool_outputs(&mut transcript, ctx.runtime.config.tool_output_cap_bytes);
    let request = AgentInferenceRequest {
        model: ctx.plan.model.clone(),
        instructions: ctx.plan.instructions.clone(),
        developer_context: ctx.plan.developer_context.clone(),
        transcript,
        tools: tools.to_vec(),
        parallel_tool_calls: ctx.plan.parallel_tool_calls,
        reasoning: ctx.plan.reasoning,
        hosted_web_search: ctx.runtime.config.hosted_web_search.clone(),
    };
    (request, last_seq)
}

/// One model request that fits: compacts first when the request would cross
/// the threshold (sized by `gauge`), and compacts and retries once when the
/// provider refuses it as too long.
async fn request_fitting(
    ctx: TurnContext<'_>,
    tools: &[ToolSpec],
    limits: &Limits,
    gauge: &mut Gauge,
    usage: &mut TokenUsage,
) -> anyhow::Result<ModelResponse> {
    let (estimate, response) = send_fitting(ctx, tools, limits, gauge, usage).await?;
    gauge.answered_estimate(estimate, &response.usage);
    Ok(response)
}

/// [`request_fitting`]'s work; returns the estimate of the request that was
/// answered. Requests are moved to the engine, not copied: the copy of a
/// turn's tools and transcript is a large part of a step's cost.
async fn send_fitting(
    ctx: TurnContext<'_>,
    tools: &[ToolSpec],
    limits: &Limits,
    gauge: &mut Gauge,
    usage: &mut TokenUsage,
) -> anyhow::Result<(u64, ModelResponse)> {
    let (mut request, last_seq) = next_request(ctx, tools).await;
    if let Some(threshold) = limits.threshold
        && gauge.size(&request) > threshold
    {
        let compacted = compact_in_turn(
            ctx,
            request.clone(),
            last_seq,
            gauge.in_estimate(threshold),
            CompactionTrigger::Auto,
            usage,
        )
        .await;
        match compacted {
            Ok(()) => {
                gauge.compacted();
                (request, _) = next_request(ctx, tools).await;
            }
            Err(error) => {
                if ctx.cancellation().is_cancelled() {
                    return Err(error);
                }
                let estimate = gauge.size(&request);
                if let Some(window) = limits.window
                    && estimate > window
                {
                    return Err(error.context(format!(
                        "the next request (about {estimate} tokens) is over the model's context \
                         window ({window} tokens) and compaction failed"
                    )));
                }
                tracing::warn!(
                    thread_id = ctx.plan.thread_id(),
                    "compaction failed; sending the request as it is: {error:#}"
                );
            }
        }
    }
    let refused = gauge.estimate(&request);
    let first = model::request(ctx, request).await;
    let overflow = match &first {
        Err(error) => error.downcast_ref::<ContextOverflow>().cloned(),
        Ok(_) => None,
    };
    let Some(overflow) = overflow else {
        return first.map(|response| (refused, response));
    };
    // The refused request again (nothing was appended since): compaction
    // summarises it.
    let (request, last_seq) = next_request(ctx, tools).await;
    // Aim under what the provider refused (in the estimate's units, as
    // compaction measures).
    let threshold = limits
        .threshold
        .map_or(refused, |threshold| {
            gauge.in_estimate(threshold).min(refused)
        })
        .saturating_mul(3)
        / 4;
    compact_in_turn(
        ctx,
        request,
        last_seq,
        threshold,
        CompactionTrigger::Overflow,
        usage,
    )
    .await
    .map_err(|error| {
        error.context(format!(
            "the provider refused the request as too long ({}) and compaction failed",
            overflow.message
        ))
    })?;
    gauge.compacted();
    let (request, _) = next_request(ctx, tools).await;
    let estimate = gauge.estimate(&request);
    let response = model::request(ctx, request).await.map_err(|error| {
        if error.downcast_ref::<ContextOverflow>().is_some() {
            error.context("the request is still too long after compacting the thread once")
        } else {
            error
        }
    })?;
    Ok((estimate, response))
}

/// Compacts the thread inside the turn: one `ContextCompacted` event once the
/// new transcript is complete, nothing when it fails. The summary requests'
/// usage counts as the turn's.
async fn compact_in_turn(
    ctx: TurnContext<'_>,
    request: AgentInferenceRequest,
    last_seq: u64,
    threshold: u64,
    trigger: CompactionTrigger,
    usage: &mut TokenUsage,
) -> anyhow::Result<()> {
    let input = CompactionInput {
        engine: ctx.plan.engine.as_ref(),
        context: roder_api::inference::InferenceTurnContext {
            thread_id: ctx.plan.thread_id(),
            turn_id: &ctx.plan.turn_id,
            reliability: &ctx.runtime.config.reliability,
            cancellation: ctx.cancellation(),
            traceparent: None,
        },
        request,
        threshold,
        request_budget: threshold,
        trigger,
        last_seq,
        turn_id: Some(ctx.turn_id()),
    };
    let compaction = compaction::compact(input).await?;
    record_usage(ctx, usage, &compaction.usage, Emit::Now).await?;
    let recorded = ctx
        .runtime
        .bus
        .emit(
            &ctx.plan.thread,
            Some(&ctx.plan.turn_id),
            RoderEvent::ContextCompacted(compaction.event),
        )
        .await?;
    crate::reopen::remember_compaction(ctx.runtime.store.as_ref(), &ctx.plan.thread, recorded.seq)
        .await;
    Ok(())
}

/// Adds one request's usage to the turn's and records it as an event.
async fn record_usage(
    ctx: TurnContext<'_>,
    usage: &mut TokenUsage,
    request_usage: &TokenUsage,
    emit: Emit,
) -> anyhow::Result<()> {
    if *request_usage == TokenUsage::default() {
        return Ok(());
    }
    usage.add(request_usage);
    ctx.plan.add_usage(request_usage);
    let event = RoderEvent::UsageUpdated(UsageUpdated {
        thread_id: ctx.thread_id(),
        turn_id: ctx.turn_id(),
        usage: request_usage.clone(),
        turn_total: usage.clone(),
    });
    match emit {
        Emit::Now => ctx.emit(event).await,
        Emit::Deferred => {
            ctx.defer(event);
            Ok(())
        }
    }
}

/// Appends each phase's text as a transcript message ([deferred]).
///
/// [deferred]: TurnContext::defer
fn append_messages(ctx: TurnContext<'_>, messages: Vec<&PhasedText>) {
    for message in messages {
        if !message.text.is_empty() {
            ctx.defer_append(TranscriptItem::AssistantMessage {
                text: message.text.clone(),
            });
        }
    }
}

/// The turn's outcome from its last response. A tool call cut off
/// mid-arguments is not run: the answer is incomplete, and so is one the
/// output limit or a refusal ended.
fn finished(response: &ModelResponse, answer: Option<String>, usage: TokenUsage) -> TurnSuccess {
    let incomplete = match (&response.cut_off_call, &response.stop_reason) {
        (Some(call), _) => Some(IncompleteAnswer::ToolCallTruncated {
            call_id: call.call_id.clone(),
            tool_name: call.tool_name.clone(),
        }),
        (None, Some(StopReason::MaxOutputTokens)) => Some(IncompleteAnswer::MaxOutputTokens),
        (None, Some(StopReason::Refusal)) => Some(IncompleteAnswer::Refusal),
        (None, Some(StopReason::ContentFilter)) => Some(IncompleteAnswer::ContentFilter),
        (None, Some(StopReason::Incomplete)) => Some(IncompleteAnswer::Unspecified),
        (None, _) => None,
    };
    TurnSuccess {
        final_message: answer,
        usage,
        stop_reason: response.stop_reason.clone(),
        incomplete,
    }
}

/// Announces the response's tool calls, runs them (in parallel when the
/// model allows it) and appends their results in the order they were asked.
async fn run_tool_calls(
    ctx: TurnContext<'_>,
    open_calls: &OpenCalls,
    response: &ModelResponse,
) -> anyhow::Result<()> {
    // Announced with the first call's start, in one append.
    for call in &response.tool_calls {
        open_calls.open(&call.id, &call.name);
        ctx.defer_append(TranscriptItem::ToolCall {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        });
        ctx.defer(RoderEvent::ToolCallRequested(ToolCallRequested {
            thread_id: ctx.thread_id(),
            turn_id: ctx.turn_id(),
            call_id: call.id.clone(),
            tool_name: call.name.clone(),
            arguments: call.arguments.clone(),
            effects: ctx.tool_effects(&call.name),
        }));
    }
    let results = if ctx.plan.parallel_tool_calls && response.tool_calls.len() > 1 {
        // Each completion goes out as it happens: a client watches them.
        futures::future::join_all(
            response
                .tool_calls
                .iter()
                .map(|call| tool_call::run(ctx, open_calls, call, Emit::Now)),
        )
        .await
    } else {
        // One at a time: a completion goes out with what follows it (the
        // next call's start, or the results and the next round's start).
        let mut results = Vec::with_capacity(response.tool_calls.len());
        for call in &response.tool_calls {
            results.push(tool_call::run(ctx, open_calls, call, Emit::Deferred).await);
        }
        results
    };
    for result in results {
        let result = result?;
        ctx.defer_append(TranscriptItem::ToolResult {
            id: result.id.clone(),
            name: result.name.clone(),
            output: result.text,
            is_error: result.is_error,
        });
        open_calls.answered(&result.id);
    }
    Ok(())
}
