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

/// An [`InferenceEngine`] over the Anthropic Messages API.
pub struct AnthropicEngine {
    connection: Connection<AnthropicConfig>,
}

impl AnthropicEngine {
    /// Fails only when the version or `extra_headers` hold an invalid header
    /// or no HTTP client can be built; keys are checked at request time.
    pub fn new(config: AnthropicConfig) -> anyhow::Result<Self> {
        Ok(Self {
            connection: Connection::new(config)?,
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
        let config = self.connection.config();
        Ok(models
            .into_iter()
            .map(|model| ModelDescriptor {
                context_window: config.context_window_of(&model.id),
                id: model.id,
                display_name: model.display_name,
            })
            .collect())
    }

    async fn stream_turn(
        &self,
        ctx: InferenceTurnContext<'_>,
        request: AgentInferenceRequest,
    ) -> anyhow::Result<InferenceEventStream> {
        let body = build_body(&request, self.connection.config());
        let exchange = self
            .connection
            .exchange(
                Method::POST,
                "messages",
                Some(&body),
                ctx.reliability,
                ctx.cancellation.clone(),
            )?
            .with_traceparent(ctx.traceparent);
        // `start` returns a prompt that is too long as `ContextOverflow`.
        Driver::start(exchange, MessagesDecoder::default()).await
    }
}
