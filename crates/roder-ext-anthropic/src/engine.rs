//! The Messages API engine: `POST {base_url}/v1/messages` with
//! `stream: true`.

use reqwest::Method;
use roder_api::extension::InferenceEngineId;
use roder_api::inference::{
    AgentInferenceRequest, InferenceCapabilities, InferenceEngine, InferenceEventStream,
    InferenceProviderContext, InferenceTurnContext, ModelDescriptor,
};

use crate::config::AnthropicConfig;
use crate::connection::Connection;
use crate::decode::MessagesDecoder;
use crate::request::build_body;
use crate::sse::Driver;
use crate::thinking::ThinkingCache;

/// An [`InferenceEngine`] over the Anthropic Messages API.
pub struct AnthropicEngine {
    connection: Connection,
    /// Signed thinking blocks of this engine's recent responses.
    thinking: ThinkingCache,
}

impl AnthropicEngine {
    /// Fails only when the version or `extra_headers` hold an invalid header
    /// or no HTTP client can be built; keys are checked at request time.
    pub fn new(config: AnthropicConfig) -> anyhow::Result<Self> {
        Ok(Self {
            connection: Connection::new(config)?,
            thinking: ThinkingCache::default(),
        })
    }

    pub fn config(&self) -> &AnthropicConfig {
        &self.connection.config
    }
}

#[async_trait::async_trait]
impl InferenceEngine for AnthropicEngine {
    fn id(&self) -> InferenceEngineId {
        self.connection.config.id.clone()
    }

    fn capabilities(&self) -> InferenceCapabilities {
        InferenceCapabilities {
            images: true,
            ..InferenceCapabilities::coding_agent_default()
        }
    }

    async fn list_models(
        &self,
        ctx: InferenceProviderContext<'_>,
    ) -> anyhow::Result<Vec<ModelDescriptor>> {
        self.connection.list_models(ctx).await
    }

    async fn stream_turn(
        &self,
        ctx: InferenceTurnContext<'_>,
        request: AgentInferenceRequest,
    ) -> anyhow::Result<InferenceEventStream> {
        let body = build_body(&request, &self.connection.config, &self.thinking);
        let exchange = self.connection.exchange(
            Method::POST,
            "messages",
            Some(&body),
            ctx.reliability,
            ctx.cancellation.clone(),
        )?;
        let decoder = MessagesDecoder::new(self.thinking.clone());
        let driver = Driver::open(exchange, decoder).await?;
        Ok(driver.into_stream())
    }
}
