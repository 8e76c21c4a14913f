//! Traces and metrics of this process, when `[telemetry]` or the standard
//! `OTEL_*` variables ask for them (`roder-ext-telemetry`).
//!
//! Export starts once the settings are loaded, before logging (its layer
//! is part of the global subscriber, `main.rs`). Runtimes get the trace
//! context through [`trace_context`], and their events feed the metrics
//! ([`watch`]).

use std::sync::{Arc, OnceLock};

use roder_api::telemetry::TraceContext;
use roder_core::Runtime;
use roder_ext_telemetry::Telemetry;
use tracing_subscriber::{Layer, Registry};

static CONTEXT: OnceLock<Arc<dyn TraceContext>> = OnceLock::new();
static METER: OnceLock<roder_ext_telemetry::Meter> = OnceLock::new();

/// Starts export when the settings ask for it. Call inside the async
/// runtime's context (gRPC needs it), before logging starts and before any
/// Roder runtime is built; keep what it returns until the command ends,
/// then [`stop`] it.
pub fn start(
    config: Option<roder_ext_telemetry::TelemetryConfig>,
) -> anyhow::Result<Option<Telemetry>> {
    let Some(config) = config else {
        return Ok(None);
    };
    let telemetry = Telemetry::start(config)?;
    let _ = CONTEXT.set(telemetry.trace_context());
    if let Some(meter) = telemetry.meter() {
        let _ = METER.set(meter);
    }
    Ok(Some(telemetry))
}

/// The layer that exports the runtime's spans, for the global subscriber.
pub fn layer(telemetry: &Telemetry) -> Box<dyn Layer<Registry> + Send + Sync> {
    Box::new(telemetry.layer())
}

/// Flushes and stops export.
pub async fn stop(telemetry: Option<Telemetry>) {
    if let Some(telemetry) = telemetry {
        telemetry.shutdown().await;
    }
}

/// The trace context runtimes of this process get, when export is on.
pub fn trace_context() -> Option<Arc<dyn TraceContext>> {
    CONTEXT.get().cloned()
}

/// Feeds `runtime`'s events to the metrics, when they are exported.
pub fn watch(runtime: &Arc<Runtime>) {
    if let Some(meter) = METER.get() {
        tokio::spawn(roder_ext_telemetry::record_events(
            meter.clone(),
            runtime.subscribe_events(),
        ));
    }
}
