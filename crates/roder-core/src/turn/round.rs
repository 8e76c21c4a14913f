//! The rounds of a turn: one model request, then the tool calls it asks for,
//! until the model answers without calling a tool.

use roder_api::events::{
    IncompleteAnswer, InferenceStarted, RoderEvent, ToolCallRequested, UsageUpdated,
};
use roder_api::inference::{AgentInferenceRequest, TokenUsage};
use roder_api::stop_reason::StopReason;
use roder_api::transcript::TranscriptItem;

use crate::policy;
use crate::turn::context::TurnContext;
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
    let mut round = 0u32;
    loop {
        round = round.saturating_add(1);
        ctx.emit(RoderEvent::InferenceStarted(InferenceStarted {
            thread_id: ctx.thread_id(),
            turn_id: ctx.turn_id(),
            round,
        }))
        .await?;
        // The log cursor keeps the transcript in step with every append,
        // this turn's included.
        let transcript = ctx.plan.thread.log.lock().await.transcript.clone();
        let request = AgentInferenceRequest {
            model: ctx.plan.model.clone(),
            instructions: ctx.plan.instructions.clone(),
            developer_context: ctx.plan.developer_context.clone(),
            transcript,
            tools: tools.clone(),
            parallel_tool_calls: ctx.plan.parallel_tool_calls,
            reasoning: ctx.plan.reasoning,
            hosted_web_search: ctx.runtime.config.hosted_web_search.clone(),
        };
        let response = model::request(ctx, request).await?;
        if response.usage != TokenUsage::default() {
            usage.add(&response.usage);
            ctx.plan.add_usage(&response.usage);
            ctx.emit(RoderEvent::UsageUpdated(UsageUpdated {
                thread_id: ctx.thread_id(),
                turn_id: ctx.turn_id(),
                usage: response.usage.clone(),
                turn_total: usage.clone(),
            }))
            .await?;
        }
        let last = response.tool_calls.is_empty() || response.cut_off_call.is_some();
        for reasoning in response.reasoning_transcript() {
            ctx.append(reasoning).await?;
        }
        if last {
            // The answer is stored once, in `TurnCompleted`; only the
            // commentary before it becomes transcript messages here.
            let (commentary, answer) = response.split_answer();
            append_messages(ctx, commentary).await?;
            return Ok(finished(&response, answer, usage));
        }
        append_messages(ctx, response.messages.iter().collect()).await?;
        run_tool_calls(ctx, open_calls, &response).await?;
    }
}

/// Appends each phase's text as a transcript message.
async fn append_messages(ctx: TurnContext<'_>, messages: Vec<&PhasedText>) -> anyhow::Result<()> {
    for message in messages {
        if !message.text.is_empty() {
            ctx.append(TranscriptItem::AssistantMessage {
                text: message.text.clone(),
            })
            .await?;
        }
    }
    Ok(())
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
    for call in &response.tool_calls {
        open_calls.open(&call.id, &call.name);
        ctx.append(TranscriptItem::ToolCall {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        })
        .await?;
        ctx.emit(RoderEvent::ToolCallRequested(ToolCallRequested {
            thread_id: ctx.thread_id(),
            turn_id: ctx.turn_id(),
            call_id: call.id.clone(),
            tool_name: call.name.clone(),
            arguments: call.arguments.clone(),
        }))
        .await?;
    }
    let results = if ctx.plan.parallel_tool_calls {
        futures::future::join_all(
            response
                .tool_calls
                .iter()
                .map(|call| tool_call::run(ctx, open_calls, call)),
        )
        .await
    } else {
        let mut results = Vec::with_capacity(response.tool_calls.len());
        for call in &response.tool_calls {
            results.push(tool_call::run(ctx, open_calls, call).await);
        }
        results
    };
    for result in results {
        let result = result?;
        ctx.append(TranscriptItem::ToolResult {
            id: result.id.clone(),
            name: result.name.clone(),
            output: result.text,
            is_error: result.is_error,
        })
        .await?;
        open_calls.answered(&result.id);
    }
    Ok(())
}
