//! The Messages API engine: `POST {base_url}/v1/messages` with
//! `stream: true`.

use reqwest::Method;
use roder_api::extension::InferenceEngineId;
use roder_api::inference::{
    AgentInferenceRequest, InferenceCapabilities, InferenceEngine, InferenceEventStream,
    InferenceProviderContext, InferenceTurnContext, ModelDescriptor,
};
use roder_ext_inference_http::{Connection, Driver};
use serde::Deserialize;

use crate::config::AnthropicConfig;
use crate::decode::MessagesDecoder;
use crate::request::build_body;
use crate::thinking::ThinkingCache;

/// An [`InferenceEngine`] over the Anthropic Messages API.
pub struct AnthropicEngine {
    connection: Connection<AnthropicConfig>,
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
        self.connection.config()
    }
}

/// One entry of `GET /v1/models`, first page of up to 1000 (more than
/// exist).
#[derive(Deserialize)]
struct Model {
    id: String,
    display_name: Option<String>,
}

#[async_trait::async_trait]
impl InferenceEngine for AnthropicEngine {
    fn id(&self) -> InferenceEngineId {
        self.connection.config().id.clone()
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
        let models: Vec<Model> = self
            .connection
            .list_models("models?limit=1000", ctx.reliability)
            .await?;
        Ok(models
            .into_iter()
            .map(|model| ModelDescriptor {
                id: model.id,
                display_name: model.display_name,
                context_window: None,
            })
            .collect())
    }

    async fn stream_turn(
        &self,
        ctx: InferenceTurnContext<'_>,
        request: AgentInferenceRequest,
    ) -> anyhow::Result<InferenceEventStream> {
        let body = build_body(&request, self.connection.config(), &self.thinking);
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
