//! Starting and stopping export: the tracer (and meter) providers, the
//! layer that feeds them the runtime's spans, and an exporter that says
//! once, not on every batch, that the collector cannot be reached.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

use crate::config::{Protocol, TelemetryConfig};
use crate::context::OtelTraceContext;

/// Running export. Keep it for the process's life; [`Telemetry::shutdown`]
/// flushes what is queued.
pub struct Telemetry {
    tracer_provider: SdkTracerProvider,
    meter_provider: Option<SdkMeterProvider>,
    config: TelemetryConfig,
}

impl Telemetry {
    /// Starts export as `config` says. Call inside a Tokio runtime (the
    /// gRPC client needs one). Nothing is sent yet: a collector that is down
    /// only shows when a batch is exported.
    pub fn start(config: TelemetryConfig) -> anyhow::Result<Telemetry> {
        let resource = Resource::builder()
            .with_service_name(config.service_name.clone())
            .build();
        let exporter = LoggedFailures {
            inner: span_exporter(&config)?,
            warned: AtomicBool::new(false),
            endpoint: config.traces_endpoint.clone(),
        };
        let tracer_provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.clone())
            .build();
        let meter_provider = match &config.metrics_endpoint {
            Some(endpoint) => Some(meter_provider(&config, endpoint, resource)?),
            None => None,
        };
        Ok(Telemetry {
            tracer_provider,
            meter_provider,
            config,
        })
    }

    /// The layer that exports the runtime's spans (target
    /// [`crate::SPAN_TARGET`] only; log lines stay logs).
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: tracing::Subscriber + for<'span> LookupSpan<'span> + Send + Sync,
    {
        let tracer = self.tracer_provider.tracer("roder");
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            // Off: per-poll busy/idle timing (two clock reads each time an
            // async span is entered), source locations and thread ids on
            // every span. None is part of what a trace says (trace.rs names
            // the attributes); leaving them out took about a third off the
            // export's CPU cost per step (`roder-bench -- traces`).
            .with_tracked_inactivity(false)
            .with_location(false)
            .with_threads(false)
            .with_filter(Targets::new().with_target(crate::SPAN_TARGET, tracing::Level::INFO))
    }

    pub fn trace_context(&self) -> Arc<dyn roder_api::telemetry::TraceContext> {
        Arc::new(OtelTraceContext)
    }

    /// The meter for metrics, when metrics are exported.
    pub fn meter(&self) -> Option<opentelemetry::metrics::Meter> {
        use opentelemetry::metrics::MeterProvider as _;
        self.meter_provider
            .as_ref()
            .map(|provider| provider.meter("roder"))
    }

    pub fn config(&self) -> &TelemetryConfig {
        &self.config
    }

    /// Exports what is queued and stops, within the export timeout (off the
    /// async threads: it blocks).
    pub async fn shutdown(self) {
        let timeout = self.config.export_timeout;
        let stopped = tokio::task::spawn_blocking(move || {
            let _ = self.tracer_provider.shutdown_with_timeout(timeout);
            if let Some(meters) = self.meter_provider {
                let _ = meters.shutdown_with_timeout(timeout);
            }
        });
        let _ = tokio::time::timeout(timeout + Duration::from_secs(1), stopped).await;
    }
}

fn span_exporter(config: &TelemetryConfig) -> anyhow::Result<opentelemetry_otlp::SpanExporter> {
    let built = match config.protocol {
        Protocol::HttpProtobuf => opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(config.traces_endpoint.clone())
            .with_timeout(config.export_timeout)
            .build(),
        Protocol::Grpc => opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(config.traces_endpoint.clone())
            .with_timeout(config.export_timeout)
            .build(),
    };
    built.map_err(|error| {
        anyhow::anyhow!(
            "could not set up OTLP trace export to {}: {error}",
            config.traces_endpoint
        )
    })
}

fn meter_provider(
    config: &TelemetryConfig,
    endpoint: &str,
    resource: Resource,
) -> anyhow::Result<SdkMeterProvider> {
    let built = match config.protocol {
        Protocol::HttpProtobuf => opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(endpoint.to_string())
            .with_timeout(config.export_timeout)
            .build(),
        Protocol::Grpc => opentelemetry_otlp::MetricExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint.to_string())
            .with_timeout(config.export_timeout)
            .build(),
    };
    let exporter = built.map_err(|error| {
        anyhow::anyhow!("could not set up OTLP metric export to {endpoint}: {error}")
    })?;
    Ok(SdkMeterProvider::builder()
        .with_periodic_exporter(exporter)
        .with_resource(resource)
        .build())
}

/// An exporter that logs the first failure to export, then stays quiet:
/// a collector that is down costs a log line, not one per batch.
#[derive(Debug)]
struct LoggedFailures<E> {
    inner: E,
    warned: AtomicBool,
    endpoint: String,
}

impl<E: SpanExporter> SpanExporter for LoggedFailures<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let result = self.inner.export(batch).await;
        if let Err(error) = &result
            && !self.warned.swap(true, Ordering::SeqCst)
        {
            tracing::warn!(
                target: "roder::telemetry",
                "could not export {spans} spans to {} ({error}); spans are dropped while the collector cannot be reached (said once)",
                self.endpoint
            );
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
