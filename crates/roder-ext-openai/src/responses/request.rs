//! Maps an [`AgentInferenceRequest`] onto a Responses API request body.
//!
//! * `instructions` → `instructions`; `developer_context` → a `developer`
//!   message at the start of `input`.
//! * User and assistant text → `message` items; tool calls →
//!   `function_call` items; results → `function_call_output` items, each
//!   keyed by `call_id`.
//! * Reasoning items are dropped: replaying them needs the item id or its
//!   `encrypted_content`, which the transcript does not keep. The model
//!   still sees every call and result.
//! * `store: false`: the whole transcript is sent each time, so nothing
//!   needs to be kept server-side (`extra_body` can turn it back on).

use roder_api::inference::AgentInferenceRequest;
use roder_api::transcript::TranscriptItem;
use serde_json::{Map, Value, json};

/// The JSON body for `POST {base_url}/responses`.
pub(crate) fn build_body(request: &AgentInferenceRequest, extra: &Map<String, Value>) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    if !request.instructions.trim().is_empty() {
        body.insert("instructions".into(), json!(request.instructions));
    }
    body.insert("input".into(), Value::Array(input(request)));
    body.insert("stream".into(), json!(true));
    body.insert("store".into(), json!(false));
    let mut tools: Vec<Value> = request
        .tools
        .iter()
        .map(|tool| {
            json!({
                "type": "function",
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
                // Strict mode rewrites what a schema may contain; tools'
                // schemas are sent as they are.
                "strict": false,
            })
        })
        .collect();
    if request.hosted_web_search.enabled {
        tools.push(json!({"type": "web_search"}));
    }
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
        body.insert("tool_choice".into(), json!("auto"));
        body.insert(
            "parallel_tool_calls".into(),
            json!(request.parallel_tool_calls),
        );
    }
    if let Some(effort) = request.reasoning {
        body.insert(
            "reasoning".into(),
            json!({"effort": effort.as_str(), "summary": "auto"}),
        );
    }
    for (key, value) in extra {
        body.insert(key.clone(), value.clone());
    }
    Value::Object(body)
}

fn input(request: &AgentInferenceRequest) -> Vec<Value> {
    let mut items = Vec::new();
    if let Some(context) = request
        .developer_context
        .as_deref()
        .filter(|context| !context.trim().is_empty())
    {
        items.push(json!({
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": context}],
        }));
    }
    for item in &request.transcript {
        match item {
            TranscriptItem::UserMessage { text, images } => {
                let mut content = vec![json!({"type": "input_text", "text": text})];
                content.extend(
                    images.iter().map(
                        |url| json!({"type": "input_image", "image_url": url, "detail": "auto"}),
                    ),
                );
                items.push(json!({"type": "message", "role": "user", "content": content}));
            }
            TranscriptItem::AssistantMessage { text } if !text.is_empty() => {
                items.push(json!({"type": "message", "role": "assistant", "content": text}));
            }
            TranscriptItem::AssistantMessage { .. } | TranscriptItem::Reasoning { .. } => {}
            TranscriptItem::ToolCall {
                id,
                name,
                arguments,
            } => items.push(json!({
                "type": "function_call",
                "call_id": id,
                "name": name,
                "arguments": arguments,
            })),
            TranscriptItem::ToolResult { id, output, .. } => items.push(json!({
                "type": "function_call_output",
                "call_id": id,
                "output": output,
            })),
        }
    }
    items
}

#[cfg(test)]
mod tests {
    use roder_api::inference::{HostedWebSearchConfig, ReasoningEffort};
    use roder_api::tools::ToolSpec;

    use super::*;

    fn request(transcript: Vec<TranscriptItem>) -> AgentInferenceRequest {
        AgentInferenceRequest {
            model: "gpt-5".into(),
            instructions: "Be brief.".into(),
            developer_context: Some("cwd: /w".into()),
            transcript,
            tools: vec![ToolSpec {
                name: "shell".into(),
                description: "Runs".into(),
                parameters: json!({"type": "object"}),
            }],
            parallel_tool_calls: false,
            reasoning: Some(ReasoningEffort::Low),
            hosted_web_search: HostedWebSearchConfig::disabled(),
        }
    }

    #[test]
    fn transcript_items_map_to_input_items() {
        let body = build_body(
            &request(vec![
                TranscriptItem::UserMessage {
                    text: "hi".into(),
                    images: vec!["https://x/y.png".into()],
                },
                TranscriptItem::Reasoning {
                    text: "hmm".into(),
                    provider_data: None,
                },
                TranscriptItem::AssistantMessage {
                    text: "Running.".into(),
                },
                TranscriptItem::ToolCall {
                    id: "call_1".into(),
                    name: "shell".into(),
                    arguments: "{\"cmd\":\"ls\"}".into(),
                },
                TranscriptItem::ToolResult {
                    id: "call_1".into(),
                    name: "shell".into(),
                    output: "a".into(),
                    is_error: true,
                },
            ]),
            &Map::new(),
        );
        assert_eq!(body["instructions"], json!("Be brief."));
        assert_eq!(
            body["input"],
            json!([
                {"type": "message", "role": "developer",
                 "content": [{"type": "input_text", "text": "cwd: /w"}]},
                {"type": "message", "role": "user", "content": [
                    {"type": "input_text", "text": "hi"},
                    {"type": "input_image", "image_url": "https://x/y.png", "detail": "auto"},
                ]},
                {"type": "message", "role": "assistant", "content": "Running."},
                {"type": "function_call", "call_id": "call_1", "name": "shell",
                 "arguments": "{\"cmd\":\"ls\"}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "a"},
            ])
        );
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "name": "shell", "description": "Runs",
                    "parameters": {"type": "object"}, "strict": false}])
        );
        assert_eq!(body["parallel_tool_calls"], json!(false));
        assert_eq!(
            body["reasoning"],
            json!({"effort": "low", "summary": "auto"})
        );
        assert_eq!(body["store"], json!(false));
        assert_eq!(body["stream"], json!(true));
    }

    #[test]
    fn hosted_web_search_adds_the_hosted_tool() {
        let mut req = request(vec![]);
        req.tools.clear();
        req.reasoning = None;
        req.hosted_web_search = HostedWebSearchConfig { enabled: true };
        let body = build_body(&req, &Map::new());
        assert_eq!(body["tools"], json!([{"type": "web_search"}]));
        assert!(body.get("reasoning").is_none());
    }
}
