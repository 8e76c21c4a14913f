//! Whether and where to export, from `[telemetry]` in `config.toml` and the
//! standard OpenTelemetry variables, which win over the file as in every
//! OpenTelemetry SDK.

use std::collections::HashMap;
use std::time::Duration;

/// `[telemetry]` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryFile {
    /// The collector: `http://host:4318` (HTTP; `/v1/traces` is added) or
    /// `http://host:4317` (gRPC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otlp_endpoint: Option<String>,
    /// `http/protobuf` (default) or `grpc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// Record prompts, model outputs, tool arguments and outputs in spans.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub capture_content: bool,
    /// The service name (default `roder`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
}

/// How spans and metrics travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    HttpProtobuf,
    Grpc,
}

impl Protocol {
    fn parse(text: &str) -> anyhow::Result<Self> {
        match text.trim() {
            "http/protobuf" => Ok(Protocol::HttpProtobuf),
            "grpc" => Ok(Protocol::Grpc),
            other => anyhow::bail!(
                "OTLP protocol \"{other}\" is not supported (supported: http/protobuf, grpc)"
            ),
        }
    }
}

/// The effective settings: `None` from [`TelemetryConfig::resolve`] means
/// off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetryConfig {
    /// Where traces go (the full URL for HTTP: `.../v1/traces`).
    pub traces_endpoint: String,
    /// Where metrics go (`.../v1/metrics` for HTTP), when they are exported.
    pub metrics_endpoint: Option<String>,
    pub protocol: Protocol,
    pub service_name: String,
    pub capture_content: bool,
    /// How long one export may take before it is given up.
    pub export_timeout: Duration,
}

impl TelemetryConfig {
    /// The effective settings from `file` and the environment `env` (the
    /// process's, in practice). Export is on when
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// or `otlp_endpoint` is set, and off with `OTEL_SDK_DISABLED=true`.
    pub fn resolve(
        file: Option<&TelemetryFile>,
        env: &HashMap<String, String>,
    ) -> anyhow::Result<Option<TelemetryConfig>> {
        let var = |name: &str| {
            env.get(name)
                .map(|value| value.trim())
                .filter(|value| !value.is_empty())
        };
        if var("OTEL_SDK_DISABLED").is_some_and(|value| value.eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        let default = TelemetryFile::default();
        let file = file.unwrap_or(&default);
        let protocol = match var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"))
            .or(file.protocol.as_deref())
        {
            Some(text) => Protocol::parse(text)?,
            None => Protocol::HttpProtobuf,
        };
        let base = var("OTEL_EXPORTER_OTLP_ENDPOINT")
            .map(str::to_string)
            .or_else(|| file.otlp_endpoint.clone());
        let signal = |path: &str, base: &str| match protocol {
            Protocol::HttpProtobuf => format!("{}/{path}", base.trim_end_matches('/')),
            Protocol::Grpc => base.to_string(),
        };
        let traces_endpoint = match (var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), &base) {
            (Some(endpoint), _) => endpoint.to_string(),
            (None, Some(base)) => signal("v1/traces", base),
            (None, None) => return Ok(None),
        };
        for endpoint in [Some(&traces_endpoint), base.as_ref()]
            .into_iter()
            .flatten()
        {
            if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
                anyhow::bail!("OTLP endpoint {endpoint:?} must be an http:// or https:// URL");
            }
        }
        let metrics_endpoint = var("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
            .map(str::to_string)
            .or_else(|| base.as_ref().map(|base| signal("v1/metrics", base)));
        let export_timeout = match var("OTEL_EXPORTER_OTLP_TIMEOUT") {
            Some(millis) => Duration::from_millis(millis.parse().map_err(|_| {
                anyhow::anyhow!(
                    "OTEL_EXPORTER_OTLP_TIMEOUT {millis:?} is not a number of milliseconds"
                )
            })?),
            None => Duration::from_secs(5),
        };
        Ok(Some(TelemetryConfig {
            traces_endpoint,
            metrics_endpoint,
            protocol,
            service_name: var("OTEL_SERVICE_NAME")
                .map(str::to_string)
                .or_else(|| file.service_name.clone())
                .unwrap_or_else(|| "roder".to_string()),
            capture_content: file.capture_content,
            export_timeout,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect()
    }

    #[test]
    fn off_unless_an_endpoint_is_set() {
        assert_eq!(TelemetryConfig::resolve(None, &env(&[])).unwrap(), None);
        let file = TelemetryFile {
            protocol: Some("grpc".into()),
            ..TelemetryFile::default()
        };
        assert_eq!(
            TelemetryConfig::resolve(Some(&file), &env(&[])).unwrap(),
            None
        );
    }

    #[test]
    fn the_environment_wins_over_the_file() {
        let file = TelemetryFile {
            otlp_endpoint: Some("http://file:4318".into()),
            protocol: Some("grpc".into()),
            capture_content: true,
            service_name: Some("from-file".into()),
        };
        let from_file = TelemetryConfig::resolve(Some(&file), &env(&[]))
            .unwrap()
            .unwrap();
        assert_eq!(from_file.traces_endpoint, "http://file:4318");
        assert_eq!(from_file.protocol, Protocol::Grpc);
        assert_eq!(from_file.service_name, "from-file");
        assert!(from_file.capture_content);
        let overridden = TelemetryConfig::resolve(
            Some(&file),
            &env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318/"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
                ("OTEL_SERVICE_NAME", "svc"),
            ]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(overridden.traces_endpoint, "http://env:4318/v1/traces");
        assert_eq!(
            overridden.metrics_endpoint.as_deref(),
            Some("http://env:4318/v1/metrics")
        );
        assert_eq!(overridden.protocol, Protocol::HttpProtobuf);
        assert_eq!(overridden.service_name, "svc");
        let traces_only = TelemetryConfig::resolve(
            None,
            &env(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:1/custom")]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(traces_only.traces_endpoint, "http://t:1/custom");
        assert_eq!(traces_only.metrics_endpoint, None);
    }

    #[test]
    fn disabled_and_bad_values() {
        let on = env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x:4318"),
            ("OTEL_SDK_DISABLED", "TRUE"),
        ]);
        assert_eq!(TelemetryConfig::resolve(None, &on).unwrap(), None);
        let bad = env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ]);
        let error = TelemetryConfig::resolve(None, &bad)
            .unwrap_err()
            .to_string();
        assert!(error.contains("http/json"), "{error}");
        let not_url = env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318")]);
        assert!(TelemetryConfig::resolve(None, &not_url).is_err());
    }
}
