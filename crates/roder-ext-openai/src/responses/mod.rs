//! The Responses API engine: `POST {base_url}/responses` with
//! `stream: true`. OpenAI's own API for agents: reasoning summaries,
//! message phases and hosted web search are only available here.

mod decode;
mod request;

use reqwest::Method;
use roder_api::extension::InferenceEngineId;
use roder_api::inference::{
    AgentInferenceRequest, InferenceCapabilities, InferenceEngine, InferenceEventStream,
    InferenceProviderContext, InferenceTurnContext, ModelDescriptor,
};
use roder_ext_inference_http::{Connection, Driver};

use crate::config::OpenAiConfig;
use crate::models::list_models;

/// An [`InferenceEngine`] over the Responses API.
pub struct OpenAiResponsesEngine {
    connection: Connection<OpenAiConfig>,
}

impl OpenAiResponsesEngine {
    /// Fails only when `config.extra_headers` holds an invalid header or no
    /// HTTP client can be built; keys are checked at request time.
    pub fn new(config: OpenAiConfig) -> anyhow::Result<Self> {
        Ok(Self {
            connection: Connection::new(config)?,
        })
    }

    pub fn config(&self) -> &OpenAiConfig {
        self.connection.config()
    }
}

#[async_trait::async_trait]
impl InferenceEngine for OpenAiResponsesEngine {
    fn id(&self) -> InferenceEngineId {
        self.connection.config().id.clone()
    }

    fn capabilities(&self) -> InferenceCapabilities {
        InferenceCapabilities {
            images: true,
            hosted_web_search: true,
            ..InferenceCapabilities::coding_agent_default()
        }
    }

    async fn list_models(
        &self,
        ctx: InferenceProviderContext<'_>,
    ) -> anyhow::Result<Vec<ModelDescriptor>> {
        list_models(&self.connection, ctx).await
    }

    async fn stream_turn(
        &self,
        ctx: InferenceTurnContext<'_>,
        request: AgentInferenceRequest,
    ) -> anyhow::Result<InferenceEventStream> {
        let body = request::build_body(&request, &self.connection.config().extra_body);
        let exchange = self
            .connection
            .exchange(
                Method::POST,
                "responses",
                Some(&body),
                ctx.reliability,
                ctx.cancellation.clone(),
            )?
            .with_traceparent(ctx.traceparent);
        // `start` returns a context overflow as `ContextOverflow`.
        Driver::start(exchange, decode::ResponsesDecoder::default()).await
    }
}
