//! The HTTP client, the configured headers and the key lookup.

use bytes::Bytes;
use reqwest::Method;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use roder_api::inference::{InferenceProviderContext, ModelDescriptor, ReliabilityConfig};
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::config::AnthropicConfig;
use crate::error::ProviderError;
use crate::http::{Exchange, ExchangeParts, sensitive};

pub(crate) struct Connection {
    pub config: AnthropicConfig,
    client: reqwest::Client,
    headers: HeaderMap,
}

impl Connection {
    /// Checks the version and extra headers once, so a typo is an error at
    /// start-up rather than at the first turn.
    pub fn new(config: AnthropicConfig) -> anyhow::Result<Self> {
        let mut headers = HeaderMap::new();
        let version = HeaderValue::from_str(&config.version).map_err(|_| {
            anyhow::anyhow!(
                "provider \"{}\": invalid anthropic-version {:?}",
                config.id,
                config.version
            )
        })?;
        headers.insert("anthropic-version", version);
        for (name, value) in &config.extra_headers {
            let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                anyhow::anyhow!(
                    "provider \"{}\": invalid header name {name:?} in extra_headers",
                    config.id
                )
            })?;
            let value = HeaderValue::from_str(value).map_err(|_| {
                anyhow::anyhow!(
                    "provider \"{}\": invalid value for header {name:?} in extra_headers",
                    config.id
                )
            })?;
            headers.append(header, value);
        }
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|error| {
                anyhow::anyhow!(
                    "provider \"{}\": cannot build an HTTP client: {error}",
                    config.id
                )
            })?;
        Ok(Self {
            config,
            client,
            headers,
        })
    }

    /// A request to `/v1/{path}`, with the key looked up now.
    pub fn exchange(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        reliability: &ReliabilityConfig,
        cancel: CancellationToken,
    ) -> Result<Exchange, ProviderError> {
        let provider = self.config.id.clone();
        let variable = self.config.api_key.variable().map(str::to_string);
        let mut headers = self.headers.clone();
        if let Some(key) = self.config.api_key.resolve(&provider)? {
            headers.insert(
                "x-api-key",
                sensitive(&key, &provider, variable.as_deref())?,
            );
        }
        if body.is_some() {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        }
        Ok(Exchange::new(ExchangeParts {
            provider,
            client: self.client.clone(),
            method,
            url: self.config.url(path),
            headers,
            body: body.map(|body| Bytes::from(body.to_string())),
            key_variable: variable,
            reliability: reliability.clone(),
            cancel,
            idle_timeout: self.config.idle_timeout,
        }))
    }

    /// `GET /v1/models`, first page of up to 1000 (more than exist).
    pub async fn list_models(
        &self,
        ctx: InferenceProviderContext<'_>,
    ) -> anyhow::Result<Vec<ModelDescriptor>> {
        #[derive(Deserialize)]
        struct Models {
            data: Vec<Model>,
        }
        #[derive(Deserialize)]
        struct Model {
            id: String,
            display_name: Option<String>,
        }
        let id = &self.config.id;
        let mut exchange = self.exchange(
            Method::GET,
            "models?limit=1000",
            None,
            ctx.reliability,
            CancellationToken::new(),
        )?;
        let response = exchange.send().await?;
        let body = tokio::time::timeout(self.config.idle_timeout, response.bytes())
            .await
            .map_err(|_| {
                anyhow::anyhow!("provider \"{id}\": the model list did not arrive in time")
            })?
            .map_err(|error| {
                anyhow::anyhow!("provider \"{id}\": reading the model list failed: {error}")
            })?;
        let models: Models = serde_json::from_slice(&body).map_err(|error| {
            anyhow::anyhow!(
                "provider \"{id}\": the model list is not in the expected shape: {error}"
            )
        })?;
        Ok(models
            .data
            .into_iter()
            .map(|model| ModelDescriptor {
                id: model.id,
                display_name: model.display_name,
                context_window: None,
            })
            .collect())
    }
}
