//! The runtime's [`TraceContext`]: W3C `traceparent`s of `tracing` spans
//! recorded by the OpenTelemetry layer.

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use roder_api::telemetry::{TraceContext, valid_traceparent};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Reads and sets span contexts through `tracing-opentelemetry`.
#[derive(Debug, Default)]
pub struct OtelTraceContext;

impl TraceContext for OtelTraceContext {
    fn traceparent(&self, span: &tracing::Span) -> Option<String> {
        let context = span.context();
        let span_context = context.span().span_context().clone();
        span_context.is_valid().then(|| {
            format!(
                "00-{}-{}-{:02x}",
                span_context.trace_id(),
                span_context.span_id(),
                span_context.trace_flags().to_u8()
            )
        })
    }

    fn set_parent(&self, span: &tracing::Span, traceparent: &str) -> bool {
        if !valid_traceparent(traceparent) {
            return false;
        }
        let carrier = HashMap::from([("traceparent".to_string(), traceparent.to_string())]);
        let parent = TraceContextPropagator::new().extract(&carrier);
        if !parent.span().span_context().is_valid() {
            return false;
        }
        span.set_parent(parent).is_ok()
    }
}
