//! Maps an [`AgentInferenceRequest`] onto a Chat Completions request body.
//!
//! * `instructions` and `developer_context` become one `system` message.
//!   Many chat templates of local servers reject a second system message or
//!   one that is not first, and every server accepts a single one.
//! * Assistant text and the tool calls that follow it become one assistant
//!   message with `tool_calls`, as the API requires; tool results become
//!   `tool` messages.
//! * Reasoning items are dropped: Chat Completions has no standard way to
//!   send reasoning back, and some servers (DeepSeek) reject
//!   `reasoning_content` in requests.

use roder_api::inference::AgentInferenceRequest;
use roder_api::transcript::TranscriptItem;
use serde_json::{Map, Value, json};

/// The JSON body for `POST {base_url}/chat/completions`.
pub(crate) fn build_body(request: &AgentInferenceRequest, extra: &Map<String, Value>) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert("messages".into(), Value::Array(messages(request)));
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        body.insert("tool_choice".into(), json!("auto"));
        // Only sent with tools: OpenAI rejects it on a request without any.
        body.insert(
            "parallel_tool_calls".into(),
            json!(request.parallel_tool_calls),
        );
    }
    if let Some(effort) = request.reasoning {
        body.insert("reasoning_effort".into(), json!(effort.as_str()));
    }
    for (key, value) in extra {
        body.insert(key.clone(), value.clone());
    }
    Value::Object(body)
}

/// An assistant message being assembled from consecutive transcript items.
#[derive(Default)]
struct Assistant {
    text: String,
    tool_calls: Vec<Value>,
}

impl Assistant {
    fn into_message(self) -> Value {
        let mut message = json!({"role": "assistant"});
        message["content"] = if self.text.is_empty() {
            Value::Null
        } else {
            json!(self.text)
        };
        if !self.tool_calls.is_empty() {
            message["tool_calls"] = Value::Array(self.tool_calls);
        }
        message
    }
}

fn messages(request: &AgentInferenceRequest) -> Vec<Value> {
    let mut out = Vec::new();
    let system: Vec<&str> = [
        Some(request.instructions.as_str()),
        request.developer_context.as_deref(),
    ]
    .into_iter()
    .flatten()
    .filter(|text| !text.trim().is_empty())
    .collect();
    if !system.is_empty() {
        out.push(json!({"role": "system", "content": system.join("\n\n")}));
    }
    let mut assistant: Option<Assistant> = None;
    let flush = |assistant: &mut Option<Assistant>, out: &mut Vec<Value>| {
        if let Some(message) = assistant.take() {
            out.push(message.into_message());
        }
    };
    for item in &request.transcript {
        match item {
            TranscriptItem::UserMessage { text, images } => {
                flush(&mut assistant, &mut out);
                out.push(user_message(text, images));
            }
            TranscriptItem::AssistantMessage { text } => {
                // Text after tool calls starts a new message: the API reads
                // a message's text as coming before its calls.
                if assistant.as_ref().is_some_and(|a| !a.tool_calls.is_empty()) {
                    flush(&mut assistant, &mut out);
                }
                let current = assistant.get_or_insert_with(Assistant::default);
                if !current.text.is_empty() && !text.is_empty() {
                    current.text.push_str("\n\n");
                }
                current.text.push_str(text);
            }
            TranscriptItem::Reasoning { .. } => {}
            TranscriptItem::ToolCall {
                id,
                name,
                arguments,
            } => {
                assistant
                    .get_or_insert_with(Assistant::default)
                    .tool_calls
                    .push(json!({
                        "id": id,
                        "type": "function",
                        "function": {"name": name, "arguments": arguments},
                    }));
            }
            TranscriptItem::ToolResult { id, output, .. } => {
                flush(&mut assistant, &mut out);
                out.push(json!({"role": "tool", "tool_call_id": id, "content": output}));
            }
        }
    }
    flush(&mut assistant, &mut out);
    out
}

fn user_message(text: &str, images: &[String]) -> Value {
    if images.is_empty() {
        return json!({"role": "user", "content": text});
    }
    let mut parts = vec![json!({"type": "text", "text": text})];
    parts.extend(
        images
            .iter()
            .map(|url| json!({"type": "image_url", "image_url": {"url": url}})),
    );
    json!({"role": "user", "content": parts})
}

#[cfg(test)]
mod tests {
    use roder_api::inference::{HostedWebSearchConfig, ReasoningEffort};
    use roder_api::tools::ToolSpec;

    use super::*;

    pub(crate) fn request(transcript: Vec<TranscriptItem>) -> AgentInferenceRequest {
        AgentInferenceRequest {
            model: "gpt-test".into(),
            instructions: "You are a coding agent.".into(),
            developer_context: Some("cwd: /work".into()),
            transcript,
            tools: vec![ToolSpec {
                name: "shell".into(),
                description: "Runs a command".into(),
                parameters: json!({"type": "object", "properties": {"cmd": {"type": "string"}}}),
            }],
            parallel_tool_calls: true,
            reasoning: Some(ReasoningEffort::High),
            hosted_web_search: HostedWebSearchConfig::disabled(),
        }
    }

    fn user(text: &str) -> TranscriptItem {
        TranscriptItem::UserMessage {
            text: text.into(),
            images: vec![],
        }
    }

    #[test]
    fn a_tool_round_maps_to_grouped_assistant_and_tool_messages() {
        let body = build_body(
            &request(vec![
                user("list files"),
                TranscriptItem::Reasoning {
                    text: "I should run ls".into(),
                    provider_data: None,
                },
                TranscriptItem::AssistantMessage {
                    text: "Looking.".into(),
                },
                TranscriptItem::ToolCall {
                    id: "call_1".into(),
                    name: "shell".into(),
                    arguments: r#"{"cmd":"ls"}"#.into(),
                },
                TranscriptItem::ToolCall {
                    id: "call_2".into(),
                    name: "shell".into(),
                    arguments: r#"{"cmd":"pwd"}"#.into(),
                },
                TranscriptItem::ToolResult {
                    id: "call_1".into(),
                    name: "shell".into(),
                    output: "a.txt".into(),
                    is_error: false,
                },
                TranscriptItem::ToolResult {
                    id: "call_2".into(),
                    name: "shell".into(),
                    output: "/work".into(),
                    is_error: false,
                },
            ]),
            &Map::new(),
        );
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": "You are a coding agent.\n\ncwd: /work"},
                {"role": "user", "content": "list files"},
                {"role": "assistant", "content": "Looking.", "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "shell", "arguments": "{\"cmd\":\"ls\"}"}},
                    {"id": "call_2", "type": "function",
                     "function": {"name": "shell", "arguments": "{\"cmd\":\"pwd\"}"}},
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
                {"role": "tool", "tool_call_id": "call_2", "content": "/work"},
            ])
        );
        assert_eq!(body["stream"], json!(true));
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert_eq!(body["tool_choice"], json!("auto"));
        assert_eq!(body["parallel_tool_calls"], json!(true));
        assert_eq!(body["reasoning_effort"], json!("high"));
        assert_eq!(body["model"], json!("gpt-test"));
        assert_eq!(
            body["tools"][0]["function"]["parameters"],
            json!({"type": "object", "properties": {"cmd": {"type": "string"}}})
        );
    }

    #[test]
    fn tool_calls_without_text_have_null_content() {
        let body = build_body(
            &request(vec![
                user("go"),
                TranscriptItem::ToolCall {
                    id: "c".into(),
                    name: "shell".into(),
                    arguments: "{}".into(),
                },
            ]),
            &Map::new(),
        );
        assert_eq!(body["messages"][2]["content"], Value::Null);
        assert_eq!(body["messages"][2]["tool_calls"][0]["id"], json!("c"));
    }

    #[test]
    fn no_tools_means_no_tool_fields_and_extra_body_wins() {
        let mut req = request(vec![user("hi")]);
        req.tools.clear();
        req.reasoning = None;
        req.developer_context = None;
        let mut extra = Map::new();
        extra.insert("stream_options".into(), Value::Null);
        extra.insert("options".into(), json!({"num_ctx": 8192}));
        let body = build_body(&req, &extra);
        for key in [
            "tools",
            "tool_choice",
            "parallel_tool_calls",
            "reasoning_effort",
        ] {
            assert!(body.get(key).is_none(), "{key}");
        }
        assert_eq!(
            body["messages"][0]["content"],
            json!("You are a coding agent.")
        );
        assert_eq!(body["stream_options"], Value::Null);
        assert_eq!(body["options"], json!({"num_ctx": 8192}));
    }

    #[test]
    fn images_become_content_parts() {
        let body = build_body(
            &request(vec![TranscriptItem::UserMessage {
                text: "what is this".into(),
                images: vec!["data:image/png;base64,AAAA".into()],
            }]),
            &Map::new(),
        );
        assert_eq!(
            body["messages"][1]["content"],
            json!([
                {"type": "text", "text": "what is this"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ])
        );
    }
}
