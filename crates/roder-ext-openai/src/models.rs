//! Model listing, the same for both OpenAI engines: `GET {base_url}/models`,
//! which OpenAI, OpenRouter, vLLM, Ollama and llama.cpp's server all answer
//! in the same shape. The context window is the config's `context_window`
//! when set, else the entry's `context_length` (OpenRouter, vLLM), else
//! unknown.

use roder_api::inference::{InferenceProviderContext, ModelDescriptor};
use roder_ext_inference_http::Connection;
use serde::Deserialize;

use crate::config::OpenAiConfig;

/// One entry of the list; `context_length` is OpenRouter's and vLLM's.
#[derive(Deserialize)]
struct Model {
    id: String,
    context_length: Option<u64>,
}

pub(crate) async fn list_models(
    connection: &Connection<OpenAiConfig>,
    ctx: InferenceProviderContext<'_>,
) -> anyhow::Result<Vec<ModelDescriptor>> {
    let models: Vec<Model> = connection.list_models("models", ctx.reliability).await?;
    let configured = connection.config().context_window;
    Ok(models
        .into_iter()
        .map(|model| ModelDescriptor {
            id: model.id,
            display_name: None,
            // What the user configured wins over what the server says.
            context_window: configured.or(model.context_length),
        })
        .collect())
}
