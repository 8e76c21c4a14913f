//! What both OpenAI engines share: the HTTP client, the configured
//! headers, the key lookup, and model listing.

use bytes::Bytes;
use reqwest::Method;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use roder_api::inference::{InferenceProviderContext, ModelDescriptor, ReliabilityConfig};
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::config::OpenAiConfig;
use crate::error::ProviderError;
use crate::http::{Exchange, ExchangeParts, bearer};

pub(crate) struct Connection {
    pub config: OpenAiConfig,
    client: reqwest::Client,
    headers: HeaderMap,
}

impl Connection {
    /// Checks the extra headers once, so a typo in a header name is an
    /// error at start-up rather than at the first turn.
    pub fn new(config: OpenAiConfig) -> anyhow::Result<Self> {
        let mut headers = HeaderMap::new();
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

    /// A request to `path`, with the key looked up now.
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
            headers.insert(AUTHORIZATION, bearer(&key, &provider, variable.as_deref())?);
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

    /// `GET {base_url}/models`, which OpenAI, OpenRouter, vLLM, Ollama and
    /// llama.cpp's server all answer in the same shape.
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
            context_length: Option<u64>,
        }
        let mut exchange = self.exchange(
            Method::GET,
            "models",
            None,
            ctx.reliability,
            CancellationToken::new(),
        )?;
        let response = exchange.send().await?;
        let body = tokio::time::timeout(self.config.idle_timeout, response.bytes())
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "provider \"{}\": the model list did not arrive in time",
                    self.config.id
                )
            })?
            .map_err(|error| {
                anyhow::anyhow!(
                    "provider \"{}\": reading the model list failed: {error}",
                    self.config.id
                )
            })?;
        let models: Models = serde_json::from_slice(&body).map_err(|error| {
            anyhow::anyhow!(
                "provider \"{}\": the model list is not in the expected shape: {error}",
                self.config.id
            )
        })?;
        Ok(models
            .data
            .into_iter()
            .map(|model| ModelDescriptor {
                id: model.id,
                display_name: None,
                context_window: model.context_length,
            })
            .collect())
    }
}
