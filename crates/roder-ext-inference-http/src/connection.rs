//! The HTTP client, the configured headers and the key lookup: what every
//! request of one engine has in common. Engines differ only in how the key
//! is sent ([`KeyHeader`]), in fixed headers of their own (Anthropic's
//! `anthropic-version`) and in their URLs, all of which their config says
//! ([`ProviderConfig`]).

use std::time::Duration;

use bytes::Bytes;
use reqwest::Method;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use roder_api::inference::ReliabilityConfig;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::api_key::ApiKeySource;
use crate::error::ProviderError;
use crate::exchange::{Exchange, ExchangeParts};

/// How the API key travels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyHeader {
    /// `Authorization: Bearer {key}` (OpenAI and compatible servers).
    Bearer,
    /// The bare key in this header (Anthropic's `x-api-key`).
    Named(HeaderName),
}

/// What a [`Connection`] needs of an engine's config. Implemented by each
/// engine's public config struct, whose fields stay plain so callers can
/// set them directly.
pub trait ProviderConfig {
    /// The engine id, key and headers every request shares; read once, by
    /// [`Connection::new`].
    fn connection_settings(&self) -> anyhow::Result<ConnectionSettings>;

    /// Where `path` (`"messages"`, `"models"`) lives on the configured
    /// server.
    fn url(&self, path: &str) -> String;
}

/// The part of a config that [`Connection`] uses.
#[derive(Debug, Clone)]
pub struct ConnectionSettings {
    /// The engine id, named in every error.
    pub provider: String,
    pub api_key: ApiKeySource,
    pub key_header: KeyHeader,
    /// Headers the engine itself requires, already checked; `extra_headers`
    /// are added after them.
    pub headers: HeaderMap,
    /// Headers from the user's config, checked by [`Connection::new`].
    pub extra_headers: Vec<(String, String)>,
    /// Time allowed to open a TCP/TLS connection.
    pub connect_timeout: Duration,
    /// A response that sends nothing for this long counts as dropped.
    pub idle_timeout: Duration,
}

/// An engine's config with the HTTP client and headers made from it, from
/// which each request is made.
pub struct Connection<C> {
    config: C,
    provider: String,
    api_key: ApiKeySource,
    key_header: KeyHeader,
    client: reqwest::Client,
    headers: HeaderMap,
    idle_timeout: Duration,
}

impl<C: ProviderConfig> Connection<C> {
    /// Checks the headers once, so a typo in a header name is an error at
    /// start-up rather than at the first turn.
    pub fn new(config: C) -> anyhow::Result<Self> {
        let settings = config.connection_settings()?;
        let provider = settings.provider;
        let mut headers = settings.headers;
        for (name, value) in &settings.extra_headers {
            let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                anyhow::anyhow!(
                    "provider \"{provider}\": invalid header name {name:?} in extra_headers"
                )
            })?;
            let value = HeaderValue::from_str(value).map_err(|_| {
                anyhow::anyhow!(
                    "provider \"{provider}\": invalid value for header {name:?} in extra_headers"
                )
            })?;
            headers.append(header, value);
        }
        let client = crate::tls_roots::apply(
            reqwest::Client::builder().connect_timeout(settings.connect_timeout),
        )
        .build()
        .map_err(|error| {
            anyhow::anyhow!("provider \"{provider}\": cannot build an HTTP client: {error}")
        })?;
        Ok(Self {
            config,
            provider,
            api_key: settings.api_key,
            key_header: settings.key_header,
            client,
            headers,
            idle_timeout: settings.idle_timeout,
        })
    }

    /// The config this connection was made from.
    pub fn config(&self) -> &C {
        &self.config
    }

    /// A request to `path`, with the key looked up now. A `body` makes it a
    /// streaming JSON request (`Accept: text/event-stream`).
    pub fn exchange(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        reliability: &ReliabilityConfig,
        cancel: CancellationToken,
    ) -> Result<Exchange, ProviderError> {
        let provider = self.provider.clone();
        let variable = self.api_key.variable().map(str::to_string);
        let mut headers = self.headers.clone();
        if let Some(key) = self.api_key.resolve(&provider)? {
            let (name, value) = match &self.key_header {
                KeyHeader::Bearer => (AUTHORIZATION, format!("Bearer {key}")),
                KeyHeader::Named(name) => (name.clone(), key),
            };
            headers.insert(name, sensitive(&value, &provider, variable.as_deref())?);
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
            idle_timeout: self.idle_timeout,
        }))
    }

    /// `GET path` (with retries), read as `{"data": [...]}`: the shape in
    /// which OpenAI, OpenAI-compatible servers and Anthropic list models.
    /// `M` is the engine's reading of one entry.
    pub async fn list_models<M: DeserializeOwned>(
        &self,
        path: &str,
        reliability: &ReliabilityConfig,
    ) -> anyhow::Result<Vec<M>> {
        #[derive(Deserialize)]
        #[serde(bound = "M: DeserializeOwned")]
        struct List<M> {
            data: Vec<M>,
        }
        let provider = &self.provider;
        let mut exchange = self.exchange(
            Method::GET,
            path,
            None,
            reliability,
            CancellationToken::new(),
        )?;
        let response = exchange.send().await?;
        let body = tokio::time::timeout(self.idle_timeout, response.bytes())
            .await
            .map_err(|_| {
                anyhow::anyhow!("provider \"{provider}\": the model list did not arrive in time")
            })?
            .map_err(|error| {
                anyhow::anyhow!("provider \"{provider}\": reading the model list failed: {error}")
            })?;
        let list: List<M> = serde_json::from_slice(&body).map_err(|error| {
            anyhow::anyhow!(
                "provider \"{provider}\": the model list is not in the expected shape: {error}"
            )
        })?;
        Ok(list.data)
    }
}

/// A header value that carries a secret, marked sensitive so that reqwest
/// never prints it.
fn sensitive(
    value: &str,
    provider: &str,
    variable: Option<&str>,
) -> Result<HeaderValue, ProviderError> {
    let mut value = HeaderValue::from_str(value).map_err(|_| ProviderError::InvalidApiKey {
        provider: provider.to_string(),
        origin: variable
            .map(|variable| format!(" (from {variable})"))
            .unwrap_or_default(),
    })?;
    value.set_sensitive(true);
    Ok(value)
}
