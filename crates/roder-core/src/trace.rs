//! The spans of a turn, their names and attributes, in one place.
//!
//! Every span is a `tracing` span with target `roder::trace` at INFO level:
//! with no subscriber interested (telemetry off) creating one costs a cached
//! interest check. An installed OpenTelemetry layer (the CLI's) exports them
//! as one trace per turn: the turn, each model call (GenAI semantic
//! conventions), each tool call, provisioning, lease and approval waits and
//! compaction beneath it. Failures set `otel.status_code`. Prompts and
//! outputs are recorded only with `RuntimeConfig::telemetry_capture_content`.

use std::time::Duration;

use roder_api::approval::ToolEffects;
use roder_api::tools::ToolResult;
use tracing::Span;
use tracing::field::Empty;

use crate::runtime::Runtime;

/// The largest text recorded in a span when content capture is on.
const CAPTURED_BYTES: usize = 4 * 1024;

pub(crate) fn turn(thread_id: &str, turn_id: &str, provider: &str, model: &str) -> Span {
    tracing::info_span!(
        target: "roder::trace",
        "turn",
        otel.name = "turn",
        otel.status_code = Empty,
        otel.status_description = Empty,
        roder.thread.id = thread_id,
        roder.turn.id = turn_id,
        gen_ai.system = provider,
        gen_ai.request.model = model,
        roder.turn.outcome = Empty,
    )
}

pub(crate) fn model_call(provider: &str, model: &str) -> Span {
    tracing::info_span!(
        target: "roder::trace",
        "chat",
        otel.name = format!("chat {model}"),
        otel.kind = "client",
        otel.status_code = Empty,
        otel.status_description = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.system = provider,
        gen_ai.request.model = model,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.response.finish_reasons = Empty,
        roder.time_to_first_token_ms = Empty,
        gen_ai.prompt = Empty,
        gen_ai.completion = Empty,
    )
}

pub(crate) fn tool_call(name: &str, call_id: &str, effects: Option<ToolEffects>) -> Span {
    tracing::info_span!(
        target: "roder::trace",
        "execute_tool",
        otel.name = format!("execute_tool {name}"),
        otel.status_code = Empty,
        otel.status_description = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = name,
        gen_ai.tool.call.id = call_id,
        roder.tool.effects = effects.map(|effects| effects.to_string()).unwrap_or_default(),
        roder.tool.exit_code = Empty,
        roder.tool.approved_by = Empty,
        roder.runs_on = Empty,
        roder.runner.provider = Empty,
        roder.runner.session_id = Empty,
        roder.tool.arguments = Empty,
        roder.tool.output = Empty,
    )
}

/// A wait or a step of the runtime's own: `runner.provision`,
/// `runner.lease_wait`, `approval.wait`, `compaction`.
pub(crate) fn step(name: &'static str) -> Span {
    tracing::info_span!(
        target: "roder::trace",
        "step",
        otel.name = name,
        otel.status_code = Empty,
        otel.status_description = Empty,
        roder.detail = Empty,
    )
}

/// Marks `span` failed with `message`.
pub(crate) fn failed(span: &Span, message: &str) {
    span.record("otel.status_code", "ERROR");
    span.record("otel.status_description", message);
}

/// Records what a model call returned.
pub(crate) fn model_answered(
    span: &Span,
    usage: &roder_api::inference::TokenUsage,
    finish_reason: Option<&str>,
    first_token: Option<Duration>,
) {
    span.record("gen_ai.usage.input_tokens", usage.input_tokens);
    span.record("gen_ai.usage.output_tokens", usage.output_tokens);
    if let Some(reason) = finish_reason {
        span.record("gen_ai.response.finish_reasons", reason);
    }
    if let Some(first) = first_token {
        span.record("roder.time_to_first_token_ms", first.as_secs_f64() * 1000.0);
    }
}

/// Records a tool call's outcome (and, with capture on, its output).
pub(crate) fn tool_answered(span: &Span, result: &ToolResult, capture: bool) {
    if let Some(code) = result.data.get("exit_code").and_then(|code| code.as_i64()) {
        span.record("roder.tool.exit_code", code);
    }
    if result.is_error {
        failed(span, first_line(&result.text));
    }
    if capture {
        span.record("roder.tool.output", captured(&result.text));
    }
}

/// `text` cut to what a span carries, on a character boundary.
pub(crate) fn captured(text: &str) -> &str {
    let mut end = text.len().min(CAPTURED_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or_default()
}

fn first_line(text: &str) -> &str {
    captured(text.lines().next().unwrap_or_default())
}

/// The `traceparent` of the current span, when the runtime is traced.
pub(crate) fn traceparent(runtime: &Runtime) -> Option<String> {
    runtime
        .trace_context
        .as_ref()
        .and_then(|context| context.traceparent(&Span::current()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captured_text_is_cut_on_a_character_boundary() {
        let long = "é".repeat(CAPTURED_BYTES);
        let cut = captured(&long);
        assert!(cut.len() <= CAPTURED_BYTES);
        assert!(cut.chars().all(|c| c == 'é'));
        assert_eq!(first_line("one\ntwo"), "one");
    }
}
