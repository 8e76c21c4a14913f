//! Traces across process boundaries, without tying the runtime to a
//! telemetry SDK.
//!
//! The runtime marks its work with `tracing` spans (a turn, each model
//! call, tool call, provisioning, lease and approval wait). An installed
//! [`TraceContext`] (the CLI's OpenTelemetry exporter) turns them into a
//! trace, and is what the runtime asks for the W3C `traceparent` of a span,
//! to pass on to a model request (a header) and a command (`TRACEPARENT`),
//! and to adopt a client's `traceparent` as a turn's parent. Without one,
//! nothing is asked and nothing is passed on.

/// The bridge between `tracing` spans and a trace context.
///
/// ```
/// use roder_api::telemetry::{TraceContext, valid_traceparent};
///
/// struct Off;
/// impl TraceContext for Off {
///     fn traceparent(&self, _span: &tracing::Span) -> Option<String> { None }
///     fn set_parent(&self, _span: &tracing::Span, _traceparent: &str) -> bool { false }
/// }
/// assert_eq!(Off.traceparent(&tracing::Span::none()), None);
/// assert!(valid_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
/// assert!(!valid_traceparent("00-00000000000000000000000000000000-00f067aa0ba902b7-01"));
/// ```
pub trait TraceContext: Send + Sync + 'static {
    /// The `traceparent` of `span`, when it is recorded in a trace.
    fn traceparent(&self, span: &tracing::Span) -> Option<String>;

    /// Makes the remote context `traceparent` the parent of `span` (created
    /// but not yet entered); false when it is malformed or tracing is off.
    fn set_parent(&self, span: &tracing::Span, traceparent: &str) -> bool;
}

/// Whether `text` is a well-formed W3C `traceparent`: `00-` (or another
/// version byte but `ff`), 32 hex digits of trace id, 16 of parent id, 2 of
/// flags, ids not all zero. Checked on bytes: it comes from clients.
pub fn valid_traceparent(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.len() != 55 {
        return false;
    }
    let hex = |range: std::ops::Range<usize>| {
        bytes.get(range).is_some_and(|part| {
            part.iter()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
        })
    };
    let zero = |range: std::ops::Range<usize>| {
        bytes
            .get(range)
            .is_some_and(|part| part.iter().all(|b| *b == b'0'))
    };
    hex(0..2)
        && bytes.get(0..2) != Some(b"ff".as_slice())
        && bytes.get(2) == Some(&b'-')
        && hex(3..35)
        && bytes.get(35) == Some(&b'-')
        && hex(36..52)
        && bytes.get(52) == Some(&b'-')
        && hex(53..55)
        && !zero(3..35)
        && !zero(36..52)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn never_panics_and_well_formed_ones_pass(
            trace in "[0-9a-f]{32}", parent in "[0-9a-f]{16}", junk in "\\PC{0,60}"
        ) {
            let _ = valid_traceparent(&junk);
            let text = format!("00-{trace}-{parent}-01");
            let nonzero = trace.bytes().any(|b| b != b'0') && parent.bytes().any(|b| b != b'0');
            prop_assert_eq!(valid_traceparent(&text), nonzero);
            prop_assert!(!valid_traceparent(&text.to_uppercase()) || !text.bytes().any(|b| b.is_ascii_alphabetic()));
        }
    }
}
