//! Shared set-up of the engine tests: engines pointed at a fake server,
//! replies in either wire format, and a small agent loop that drives a
//! turn the way the runtime does (tools run only after `Completed`).

#![allow(dead_code)]

use std::time::Duration;

use roder_api::inference::{
    AgentInferenceRequest, HostedWebSearchConfig, InferenceEngine, InferenceTurnContext,
    ReliabilityConfig, TokenUsage,
};
use roder_api::tools::ToolSpec;
use roder_api::transcript::TranscriptItem;
use roder_ext_openai::{ApiKeySource, OpenAiChatEngine, OpenAiConfig, OpenAiResponsesEngine};
use roder_testkit::fake_models::{
    ChatStream, CollectedResponse, FakeModelServer, FakeStream, ResponsesStream, collect_response,
};
use tokio_util::sync::CancellationToken;

pub const KEY: &str = "sk-test-key";
pub const WAIT: Duration = Duration::from_secs(10);

/// The two OpenAI wire formats; most tests run against both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Chat,
    Responses,
}

pub const APIS: [Api; 2] = [Api::Chat, Api::Responses];

impl Api {
    pub fn engine(self, config: OpenAiConfig) -> Box<dyn InferenceEngine> {
        match self {
            Api::Chat => Box::new(OpenAiChatEngine::new(config).unwrap()),
            Api::Responses => Box::new(OpenAiResponsesEngine::new(config).unwrap()),
        }
    }

    pub fn path(self) -> &'static str {
        match self {
            Api::Chat => "/v1/chat/completions",
            Api::Responses => "/v1/responses",
        }
    }

    pub fn text_reply(self, text: &str) -> FakeStream {
        match self {
            Api::Chat => ChatStream::text_reply(text),
            Api::Responses => ResponsesStream::text_reply("resp_text", text),
        }
    }

    /// Calls `(id, name, fragments of arguments)`, usage 10 in / 5 out.
    pub fn tool_reply(self, calls: &[(&str, &str, &[&str])]) -> FakeStream {
        match self {
            Api::Chat => {
                let mut stream = ChatStream::new();
                for (index, (id, name, fragments)) in calls.iter().enumerate() {
                    stream = stream.tool_call(index as u32, id, name, fragments);
                }
                stream.finish("tool_calls").usage(10, 5).done()
            }
            Api::Responses => {
                let mut stream = ResponsesStream::new("resp_tools");
                for (id, name, fragments) in calls {
                    stream = stream.function_call(id, name, fragments);
                }
                stream.usage(10, 5).completed()
            }
        }
    }
}

pub fn config(server: &FakeModelServer) -> OpenAiConfig {
    OpenAiConfig::compatible("openai-test", server.openai_base_url())
        .with_api_key(ApiKeySource::Static(KEY.to_string()))
}

/// Tiny backoffs keep retry tests fast.
pub fn reliability(max_attempts: u32) -> ReliabilityConfig {
    ReliabilityConfig {
        max_attempts,
        initial_backoff_ms: 1,
        max_backoff_ms: 5,
    }
}

pub fn request(transcript: Vec<TranscriptItem>) -> AgentInferenceRequest {
    AgentInferenceRequest {
        model: "fake-model".into(),
        instructions: "You are a coding agent.".into(),
        developer_context: None,
        transcript,
        tools: vec![ToolSpec {
            name: "shell".into(),
            description: "Runs a shell command".into(),
            parameters: serde_json::json!({
                "type": "object",
                "properties": {"cmd": {"type": "string"}},
                "required": ["cmd"],
            }),
        }],
        parallel_tool_calls: true,
        reasoning: None,
        hosted_web_search: HostedWebSearchConfig::disabled(),
    }
}

pub fn user(text: &str) -> TranscriptItem {
    TranscriptItem::UserMessage {
        text: text.into(),
        images: vec![],
    }
}

/// One model request, read as the runtime reads it.
pub async fn ask(
    engine: &dyn InferenceEngine,
    reliability: &ReliabilityConfig,
    request: AgentInferenceRequest,
) -> anyhow::Result<CollectedResponse> {
    let cancel = CancellationToken::new();
    let ctx = InferenceTurnContext {
        thread_id: "thread-1",
        turn_id: "turn-1",
        reliability,
        cancellation: &cancel,
        traceparent: None,
    };
    tokio::time::timeout(WAIT, async {
        let stream = engine.stream_turn(ctx, request).await?;
        collect_response(stream).await
    })
    .await
    .map_err(|_| anyhow::anyhow!("the model request did not finish in time"))?
}

/// A response's reasoning as the runtime records it: one item per
/// finished reasoning item (with its provider data), else the streamed
/// text as one item without data.
pub fn reasoning_transcript(response: &CollectedResponse) -> Vec<TranscriptItem> {
    if !response.reasoning_items.is_empty() {
        return response
            .reasoning_items
            .iter()
            .map(|item| TranscriptItem::Reasoning {
                text: item.text.clone(),
                provider_data: Some(item.provider_data.clone()),
            })
            .collect();
    }
    if response.reasoning.is_empty() {
        return Vec::new();
    }
    vec![TranscriptItem::Reasoning {
        text: response.reasoning.clone(),
        provider_data: None,
    }]
}

/// A turn driven like the runtime's agent loop.
#[derive(Debug, Default)]
pub struct Turn {
    pub transcript: Vec<TranscriptItem>,
    /// Every tool execution: (call id, name, raw arguments).
    pub executions: Vec<(String, String, String)>,
    pub usage: TokenUsage,
    pub rounds: usize,
    pub final_text: Option<String>,
    /// Overrides `request`'s model (a reasoning model, say).
    pub model: Option<String>,
}

impl Turn {
    pub fn new(message: &str) -> Self {
        Self {
            transcript: vec![user(message)],
            ..Self::default()
        }
    }

    /// Requests until the model answers without tool calls. Tools "run" by
    /// echoing their arguments; they run only after a response completed.
    pub async fn run(
        &mut self,
        engine: &dyn InferenceEngine,
        reliability: &ReliabilityConfig,
    ) -> anyhow::Result<()> {
        loop {
            self.rounds += 1;
            let mut request = request(self.transcript.clone());
            if let Some(model) = &self.model {
                request.model = model.clone();
            }
            let response = ask(engine, reliability, request).await?;
            self.usage.add(&response.usage);
            self.transcript.extend(reasoning_transcript(&response));
            if !response.text.is_empty() {
                self.transcript.push(TranscriptItem::AssistantMessage {
                    text: response.text.clone(),
                });
            }
            if response.tool_calls.is_empty() {
                self.final_text = Some(response.text);
                return Ok(());
            }
            for call in &response.tool_calls {
                self.transcript.push(TranscriptItem::ToolCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                });
            }
            for call in &response.tool_calls {
                self.executions
                    .push((call.id.clone(), call.name.clone(), call.arguments.clone()));
                let parsed: serde_json::Value = serde_json::from_str(&call.arguments)?;
                self.transcript.push(TranscriptItem::ToolResult {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    output: format!("ran {}", parsed["cmd"].as_str().unwrap_or("?")),
                    is_error: false,
                });
            }
        }
    }
}

/// A base URL nothing listens on.
pub async fn dead_base_url() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}/v1")
}
