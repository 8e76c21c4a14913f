//! A real OTLP/HTTP receiver on 127.0.0.1: it decodes every trace export
//! it receives with the OpenTelemetry protocol's own types
//! (`opentelemetry-proto`) and keeps the spans.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

pub struct Receiver {
    pub endpoint: String,
    spans: Arc<Mutex<Vec<Span>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    pub async fn start() -> Self {
        let spans: Arc<Mutex<Vec<Span>>> = Arc::default();
        let kept = spans.clone();
        let app = axum::Router::new()
            .route(
                "/v1/traces",
                post(move |body: Bytes| {
                    let kept = kept.clone();
                    async move {
                        let request = ExportTraceServiceRequest::decode(body)
                            .expect("the exporter sends valid OTLP protobuf");
                        for resource in request.resource_spans {
                            for scope in resource.scope_spans {
                                kept.lock().unwrap().extend(scope.spans);
                            }
                        }
                        Vec::<u8>::new()
                    }
                }),
            )
            .route("/v1/metrics", post(|| async { Vec::<u8>::new() }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self {
            endpoint,
            spans,
            task,
        }
    }

    pub fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A span's attribute as text (numbers and booleans too).
pub fn attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|attribute| attribute.key == key)
        .and_then(|attribute| attribute.value.as_ref())
        .and_then(|value| value.value.as_ref())
        .map(|value| match value {
            AnyValue::StringValue(text) => text.clone(),
            AnyValue::IntValue(number) => number.to_string(),
            AnyValue::DoubleValue(number) => number.to_string(),
            AnyValue::BoolValue(flag) => flag.to_string(),
            other => format!("{other:?}"),
        })
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
