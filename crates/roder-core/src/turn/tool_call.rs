//! One tool call: parsed once, routed (where it is decided and started),
//! its panics contained, its outcome published.

use std::panic::AssertUnwindSafe;
use std::time::Instant;

use futures::FutureExt;
use roder_api::events::{FileChangePreviewReady, RoderEvent, ToolCallCompleted};
use roder_api::inference::ToolCallCompleted as ModelToolCall;
use roder_api::tools::ToolResult;

use crate::routing::{self, RoutedResult};
use crate::trace;
use crate::turn::context::{Emit, TurnContext};
use crate::turn::record::OpenCalls;
use tracing::Instrument;

/// Runs `call`, records its outcome in `open_calls` and returns its result.
/// Only a failure to write the log is an error: everything that goes wrong
/// with the call itself (bad arguments, a refused path, a panicking tool) is
/// an error *result* the model reads. `completion` says whether its
/// `ToolCallCompleted` goes out now or with the turn's next event.
pub(crate) async fn run(
    ctx: TurnContext<'_>,
    open_calls: &OpenCalls,
    call: &ModelToolCall,
    completion: Emit,
) -> anyhow::Result<ToolResult> {
    let entered = Instant::now();
    let span = trace::tool_call(&call.name, &call.id, ctx.tool_effects(&call.name));
    if ctx.runtime.config.telemetry_capture_content {
        span.record("roder.tool.arguments", trace::captured(&call.arguments));
    }
    let RoutedResult {
        result,
        local,
        stop_turn,
        started,
    } = match parse_arguments(call) {
        Ok(arguments) => {
            contained(ctx, call, arguments)
                .instrument(span.clone())
                .await
        }
        Err(message) => RoutedResult::refused(call, message, false),
    };
    trace::tool_answered(&span, &result, ctx.runtime.config.telemetry_capture_content);
    // From the call's start: an approval wait is not the tool's time.
    let duration_ms =
        u64::try_from(started.unwrap_or(entered).elapsed().as_millis()).unwrap_or(u64::MAX);
    if local && !result.is_error {
        for change in routing::file_changes(&result) {
            ctx.emit(RoderEvent::FileChangePreviewReady(FileChangePreviewReady {
                thread_id: ctx.thread_id(),
                turn_id: ctx.turn_id(),
                call_id: call.id.clone(),
                path: change.path,
                diff: change.diff,
            }))
            .await?;
        }
    }
    let completed = RoderEvent::ToolCallCompleted(ToolCallCompleted {
        thread_id: ctx.thread_id(),
        turn_id: ctx.turn_id(),
        call_id: call.id.clone(),
        tool_name: Some(result.name.clone()),
        output: Some(result.text.clone()),
        is_error: result.is_error,
        data: result.data.clone(),
        duration_ms,
    });
    match completion {
        Emit::Now => ctx.emit(completed).await?,
        Emit::Deferred => ctx.defer(completed),
    }
    open_calls.finish(&result);
    if stop_turn {
        // The person rejected the call and stopped the turn: it ends as
        // interrupted once this result is recorded.
        ctx.plan.active.cancellation.cancel();
    }
    Ok(result)
}

/// Routes the call; a panic anywhere below (the tool, its workspace, a
/// runner session) becomes an error result instead of killing the turn.
async fn contained(
    ctx: TurnContext<'_>,
    call: &ModelToolCall,
    arguments: serde_json::Value,
) -> RoutedResult {
    match AssertUnwindSafe(routing::execute(ctx, call, arguments))
        .catch_unwind()
        .await
    {
        Ok(routed) => routed,
        Err(panic) => RoutedResult::refused(
            call,
            format!(
                "tool \"{}\" failed: it panicked ({}); this is a bug in the tool, not in your call",
                call.name,
                panic_message(panic.as_ref())
            ),
            false,
        ),
    }
}

/// The call's arguments as a JSON object (empty text is `{}`), or the error
/// the model reads.
fn parse_arguments(call: &ModelToolCall) -> Result<serde_json::Value, String> {
    let raw = call.arguments.trim();
    if raw.is_empty() {
        return Ok(serde_json::json!({}));
    }
    let value: serde_json::Value = serde_json::from_str(raw).map_err(|error| {
        format!(
            "the arguments of tool \"{}\" are not valid JSON ({error}); send one JSON object",
            call.name
        )
    })?;
    if !value.is_object() {
        return Err(format!(
            "the arguments of tool \"{}\" must be a JSON object, got: {raw}",
            call.name
        ));
    }
    Ok(value)
}

/// The text of a panic payload (`panic!` with a string or a format).
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|text| text.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(arguments: &str) -> ModelToolCall {
        ModelToolCall {
            id: "c".into(),
            name: "t".into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn arguments_are_an_object_or_an_error_the_model_reads() {
        assert_eq!(parse_arguments(&call("  ")), Ok(serde_json::json!({})));
        assert_eq!(
            parse_arguments(&call(r#"{"a":1}"#)),
            Ok(serde_json::json!({"a": 1}))
        );
        let not_json = parse_arguments(&call("{oops")).err().unwrap_or_default();
        assert!(not_json.contains("not valid JSON"), "{not_json}");
        let not_object = parse_arguments(&call("[1]")).err().unwrap_or_default();
        assert!(not_object.contains("must be a JSON object"), "{not_object}");
    }

    #[test]
    fn panic_payloads_become_text() {
        let caught = std::panic::catch_unwind(|| -> u8 { panic!("boom {}", 7) });
        let Err(payload) = caught else {
            panic!("it panicked");
        };
        assert_eq!(panic_message(payload.as_ref()), "boom 7");
    }
}
