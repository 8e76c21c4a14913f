//! OpenTelemetry for Roder.
//!
//! The runtime marks its work with `tracing` spans (`roder-core`'s
//! `trace.rs`); this crate exports them as OTLP traces (HTTP protobuf or
//! gRPC), gives the runtime their W3C `traceparent` (a
//! [`roder_api::telemetry::TraceContext`]), and turns runtime events into
//! metrics. It is off unless configured ([`TelemetryConfig`]), and export
//! never blocks a turn: spans go to a bounded batch queue exported on its
//! own thread; a collector that is down drops them, and that is logged
//! once.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod config;
mod context;
mod exporter;
mod metrics;

pub use config::{Protocol, TelemetryConfig, TelemetryFile};
pub use context::OtelTraceContext;
pub use exporter::Telemetry;
pub use metrics::record_events;
pub use opentelemetry::metrics::Meter;

/// The target of the runtime's spans: only these are exported.
pub const SPAN_TARGET: &str = "roder::trace";
