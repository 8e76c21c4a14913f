//! Maps an [`AgentInferenceRequest`] onto a Messages API request body.
//!
//! * `instructions` and `developer_context` → `system`, one text block each.
//! * The transcript → alternating `user` / `assistant` messages: consecutive
//!   items of one role share a message, because the API wants all
//!   `tool_use` blocks of a turn in one assistant message and all their
//!   `tool_result` blocks in the next user message.
//! * Tool calls → `tool_use` blocks whose `input` is the arguments parsed
//!   as JSON. Arguments that are not a JSON object (a model's malformed
//!   call, already answered with an error result) are sent as
//!   `{"_raw_arguments": TEXT}` so the model still sees what it sent.
//! * Reasoning → the signed block in its `provider_data` (a `thinking`
//!   block with its signature, or a `redacted_thinking` block), unmodified,
//!   at the start of the assistant message it belongs to (after the
//!   thinking blocks already there), as the API requires for a tool-use
//!   continuation. The data is what the decoder emitted and the runtime
//!   persisted, so a thread resumed by another process sends it too.
//!   Reasoning without such data (another provider's, an older log's) is
//!   dropped: the API rejects thinking blocks without a valid signature.
//! * Reasoning effort → `thinking.budget_tokens`
//!   ([`AnthropicConfig::thinking_budget`]), except when the latest
//!   assistant turn made tool calls and its thinking blocks are unknown:
//!   the API then requires them, so that request goes without thinking.

use roder_api::inference::AgentInferenceRequest;
use roder_api::transcript::TranscriptItem;
use serde_json::{Map, Value, json};

use crate::config::AnthropicConfig;

struct Message {
    role: &'static str,
    content: Vec<Value>,
}

/// The JSON body for `POST {base_url}/v1/messages`.
pub(crate) fn build_body(request: &AgentInferenceRequest, config: &AnthropicConfig) -> Value {
    let mut messages = messages(request);
    let mut system: Vec<Value> = [
        Some(request.instructions.as_str()),
        request.developer_context.as_deref(),
    ]
    .into_iter()
    .flatten()
    .filter(|text| !text.trim().is_empty())
    .map(|text| json!({"type": "text", "text": text}))
    .collect();
    if config.prompt_caching {
        mark_cache_breakpoint(system.last_mut());
        let last_block = messages
            .last_mut()
            .and_then(|message| message.content.last_mut());
        mark_cache_breakpoint(last_block);
    }

    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert("max_tokens".into(), json!(config.max_tokens));
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    if let Some(budget) = request
        .reasoning
        .and_then(|effort| config.thinking_budget(effort))
        .filter(|_| thinking_allowed(&messages))
    {
        body.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": budget}),
        );
    }
    body.insert(
        "messages".into(),
        Value::Array(
            messages
                .drain(..)
                .map(|message| json!({"role": message.role, "content": message.content}))
                .collect(),
        ),
    );
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        body.insert(
            "tool_choice".into(),
            json!({"type": "auto", "disable_parallel_tool_use": !request.parallel_tool_calls}),
        );
    }
    body.insert("stream".into(), json!(true));
    for (key, value) in &config.extra_body {
        body.insert(key.clone(), value.clone());
    }
    Value::Object(body)
}

fn messages(request: &AgentInferenceRequest) -> Vec<Message> {
    let mut messages: Vec<Message> = Vec::new();
    for item in &request.transcript {
        let mut push = |role: &'static str, block: Value| push_block(&mut messages, role, block);
        match item {
            TranscriptItem::UserMessage { text, images } => {
                // Images first: the API documents better results that way.
                for image in images {
                    push("user", image_block(image));
                }
                if !text.is_empty() {
                    push("user", json!({"type": "text", "text": text}));
                }
            }
            TranscriptItem::AssistantMessage { text } => {
                // The API rejects empty text blocks.
                if !text.is_empty() {
                    push("assistant", json!({"type": "text", "text": text}));
                }
            }
            TranscriptItem::Reasoning {
                provider_data: Some(data),
                ..
            } => {
                if let Some(block) = thinking_block(data) {
                    push_thinking(&mut messages, block);
                }
            }
            TranscriptItem::Reasoning { .. } => {}
            TranscriptItem::ToolCall {
                id,
                name,
                arguments,
            } => {
                let input = match serde_json::from_str::<Value>(arguments) {
                    Ok(Value::Object(object)) => Value::Object(object),
                    _ if arguments.trim().is_empty() => json!({}),
                    _ => json!({"_raw_arguments": arguments}),
                };
                push(
                    "assistant",
                    json!({"type": "tool_use", "id": id, "name": name, "input": input}),
                );
            }
            TranscriptItem::ToolResult {
                id,
                output,
                is_error,
                ..
            } => {
                let mut block = json!({"type": "tool_result", "tool_use_id": id});
                if !output.is_empty() {
                    block["content"] = json!(output);
                }
                if *is_error {
                    block["is_error"] = json!(true);
                }
                push("user", block);
            }
        }
    }
    messages
}

/// Appends `block` to the last message if it has `role`, else starts one.
fn push_block(messages: &mut Vec<Message>, role: &'static str, block: Value) {
    match messages.last_mut() {
        Some(last) if last.role == role => last.content.push(block),
        _ => messages.push(Message {
            role,
            content: vec![block],
        }),
    }
}

/// Puts a thinking block at the start of the current assistant message,
/// after the thinking blocks already there: the API wants an assistant
/// message's thinking before its text and tool uses.
fn push_thinking(messages: &mut Vec<Message>, block: Value) {
    match messages.last_mut() {
        Some(last) if last.role == "assistant" => {
            let at = last
                .content
                .iter()
                .take_while(|block| is_thinking(block))
                .count();
            last.content.insert(at, block);
        }
        _ => messages.push(Message {
            role: "assistant",
            content: vec![block],
        }),
    }
}

fn is_thinking(block: &Value) -> bool {
    matches!(
        block["type"].as_str(),
        Some("thinking" | "redacted_thinking")
    )
}

/// The block to send for stored reasoning data, exactly the fields the API
/// takes: a `thinking` block needs its signature, a `redacted_thinking`
/// block its data; anything else (a Responses item) is not ours.
fn thinking_block(data: &Value) -> Option<Value> {
    let text = |name: &str| data.get(name).and_then(Value::as_str);
    match text("type")? {
        "thinking" => {
            let signature = text("signature").filter(|signature| !signature.is_empty())?;
            Some(json!({
                "type": "thinking",
                "thinking": text("thinking").unwrap_or_default(),
                "signature": signature,
            }))
        }
        "redacted_thinking" => Some(json!({"type": "redacted_thinking", "data": text("data")?})),
        _ => None,
    }
}

/// Whether `thinking` may be enabled: when the conversation ends with tool
/// results, the assistant message that made those calls must start with a
/// thinking block.
fn thinking_allowed(messages: &[Message]) -> bool {
    let ends_with_results = messages.last().is_some_and(|last| {
        last.role == "user"
            && last
                .content
                .iter()
                .any(|block| block["type"] == "tool_result")
    });
    if !ends_with_results {
        return true;
    }
    let Some(assistant) = messages
        .iter()
        .rev()
        .find(|message| message.role == "assistant")
    else {
        return true;
    };
    assistant.content.first().is_some_and(is_thinking)
}

/// Thinking blocks cannot carry `cache_control`; others can.
fn mark_cache_breakpoint(block: Option<&mut Value>) {
    if let Some(block) = block
        && !is_thinking(block)
    {
        block["cache_control"] = json!({"type": "ephemeral"});
    }
}

/// A data URL becomes a base64 source; anything else a URL source.
fn image_block(image: &str) -> Value {
    if let Some(rest) = image.strip_prefix("data:")
        && let Some((media_type, data)) = rest.split_once(";base64,")
    {
        return json!({"type": "image", "source": {
            "type": "base64", "media_type": media_type, "data": data,
        }});
    }
    json!({"type": "image", "source": {"type": "url", "url": image}})
}

#[cfg(test)]
mod tests {
    use roder_api::inference::{HostedWebSearchConfig, ReasoningEffort};
    use roder_api::tools::ToolSpec;

    use super::*;

    fn request(transcript: Vec<TranscriptItem>) -> AgentInferenceRequest {
        AgentInferenceRequest {
            model: "claude-test".into(),
            instructions: "You are a coding agent.".into(),
            developer_context: Some("cwd: /w".into()),
            transcript,
            tools: vec![ToolSpec {
                name: "shell".into(),
                description: "Runs".into(),
                parameters: json!({"type": "object", "properties": {"cmd": {"type": "string"}}}),
            }],
            parallel_tool_calls: true,
            reasoning: None,
            hosted_web_search: HostedWebSearchConfig::disabled(),
        }
    }

    fn user(text: &str) -> TranscriptItem {
        TranscriptItem::UserMessage {
            text: text.into(),
            images: vec![],
        }
    }

    fn call(id: &str, arguments: &str) -> TranscriptItem {
        TranscriptItem::ToolCall {
            id: id.into(),
            name: "shell".into(),
            arguments: arguments.into(),
        }
    }

    fn result(id: &str, output: &str, is_error: bool) -> TranscriptItem {
        TranscriptItem::ToolResult {
            id: id.into(),
            name: "shell".into(),
            output: output.into(),
            is_error,
        }
    }

    fn no_caching() -> AnthropicConfig {
        AnthropicConfig {
            prompt_caching: false,
            ..AnthropicConfig::anthropic()
        }
    }

    #[test]
    fn a_tool_round_groups_calls_and_results_by_role() {
        let body = build_body(
            &request(vec![
                user("list"),
                TranscriptItem::Reasoning {
                    text: "unknown thoughts".into(),
                    provider_data: None,
                },
                TranscriptItem::AssistantMessage {
                    text: "Looking.".into(),
                },
                call("toolu_1", r#"{"cmd":"ls"}"#),
                call("toolu_2", "{not json"),
                result("toolu_1", "a.txt", false),
                result("toolu_2", "malformed arguments", true),
                user("thanks"),
            ]),
            &no_caching(),
        );
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "list"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {"cmd": "ls"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "shell",
                     "input": {"_raw_arguments": "{not json"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"},
                    {"type": "tool_result", "tool_use_id": "toolu_2",
                     "content": "malformed arguments", "is_error": true},
                    {"type": "text", "text": "thanks"},
                ]},
            ])
        );
        assert_eq!(
            body["system"],
            json!([
                {"type": "text", "text": "You are a coding agent."},
                {"type": "text", "text": "cwd: /w"},
            ])
        );
        assert_eq!(body["max_tokens"], json!(16_384));
        assert_eq!(
            body["tools"],
            json!([{"name": "shell", "description": "Runs",
                    "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}}}])
        );
        assert_eq!(
            body["tool_choice"],
            json!({"type": "auto", "disable_parallel_tool_use": false})
        );
        assert_eq!(body["stream"], json!(true));
        assert!(body.get("thinking").is_none());
    }

    #[test]
    fn prompt_caching_marks_the_system_prompt_and_the_last_block() {
        let body = build_body(
            &request(vec![
                user("a"),
                TranscriptItem::AssistantMessage { text: "b".into() },
                user("c"),
            ]),
            &AnthropicConfig::anthropic(),
        );
        assert_eq!(
            body["system"][1]["cache_control"],
            json!({"type": "ephemeral"})
        );
        assert!(body["system"][0].get("cache_control").is_none());
        assert_eq!(
            body["messages"][2]["content"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );
        assert!(
            body["messages"][0]["content"][0]
                .get("cache_control")
                .is_none()
        );
    }

    #[test]
    fn thinking_is_enabled_with_a_budget_on_a_fresh_user_message() {
        let mut req = request(vec![user("hi")]);
        req.reasoning = Some(ReasoningEffort::Medium);
        let body = build_body(&req, &no_caching());
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": 8192})
        );
    }

    #[test]
    fn persisted_thinking_blocks_are_sent_back_before_tool_use() {
        let signed = json!({"type": "thinking", "thinking": "plan", "signature": "sig=="});
        let redacted = json!({"type": "redacted_thinking", "data": "opaque"});
        let mut req = request(vec![
            user("go"),
            TranscriptItem::Reasoning {
                text: "plan".into(),
                provider_data: Some(signed.clone()),
            },
            TranscriptItem::Reasoning {
                text: String::new(),
                provider_data: Some(redacted.clone()),
            },
            TranscriptItem::Reasoning {
                text: "openai".into(),
                provider_data: Some(json!({"type": "reasoning", "encrypted_content": "e"})),
            },
            TranscriptItem::Reasoning {
                text: "unsigned".into(),
                provider_data: Some(json!({"type": "thinking", "thinking": "x"})),
            },
            TranscriptItem::AssistantMessage {
                text: "Looking.".into(),
            },
            call("toolu_1", "{}"),
            result("toolu_1", "ok", false),
        ]);
        req.reasoning = Some(ReasoningEffort::Low);
        let body = build_body(&req, &no_caching());
        let content = body["messages"][1]["content"].as_array().unwrap();
        assert_eq!(content.len(), 4, "{content:?}");
        assert_eq!(content[0], signed);
        assert_eq!(content[1], redacted);
        assert_eq!(content[2]["type"], json!("text"));
        assert_eq!(content[3]["type"], json!("tool_use"));
        assert_eq!(body["thinking"]["budget_tokens"], json!(4096));
    }

    #[test]
    fn thinking_that_comes_after_text_still_starts_the_message() {
        let signed = json!({"type": "thinking", "thinking": "late", "signature": "s"});
        let req = request(vec![
            user("go"),
            TranscriptItem::AssistantMessage { text: "a".into() },
            TranscriptItem::Reasoning {
                text: "late".into(),
                provider_data: Some(signed.clone()),
            },
            call("toolu_1", "{}"),
        ]);
        let body = build_body(&req, &no_caching());
        assert_eq!(body["messages"][1]["content"][0], signed);
        assert_eq!(body["messages"][1]["content"][1]["type"], json!("text"));
    }

    #[test]
    fn thinking_is_off_when_the_tool_turn_s_signed_blocks_are_unknown() {
        let mut req = request(vec![
            user("go"),
            TranscriptItem::Reasoning {
                text: "from another process".into(),
                provider_data: None,
            },
            call("toolu_1", "{}"),
            result("toolu_1", "ok", false),
        ]);
        req.reasoning = Some(ReasoningEffort::High);
        let body = build_body(&req, &no_caching());
        assert!(body.get("thinking").is_none());
        assert_eq!(body["messages"][1]["content"][0]["type"], json!("tool_use"));
    }

    proptest::proptest! {
        /// Whatever a log holds as provider data, the body is built, and
        /// a thinking block is sent only signed and only first.
        #[test]
        fn arbitrary_provider_data_never_panics(
            kind in proptest::sample::select(vec![
                "thinking", "redacted_thinking", "reasoning", "text", "",
            ]),
            field in proptest::sample::select(vec!["thinking", "signature", "data", "type"]),
            value in "\\PC{0,20}",
            number in proptest::bool::ANY,
        ) {
            let mut data = json!({"type": kind});
            data[field] = if number { json!(7) } else { json!(value) };
            for data in [data, json!(value), json!([kind]), Value::Null] {
                let req = request(vec![
                    user("go"),
                    TranscriptItem::AssistantMessage { text: "a".into() },
                    TranscriptItem::Reasoning {
                        text: String::new(),
                        provider_data: Some(data),
                    },
                    call("toolu_1", "{}"),
                ]);
                let body = build_body(&req, &no_caching());
                let content = body["messages"][1]["content"].as_array().cloned().unwrap_or_default();
                for (index, block) in content.iter().enumerate() {
                    if block["type"] == "thinking" {
                        proptest::prop_assert!(block["signature"].as_str().is_some_and(|s| !s.is_empty()));
                        proptest::prop_assert_eq!(index, 0);
                    }
                }
            }
        }
    }

    #[test]
    fn images_become_base64_or_url_sources() {
        let body = build_body(
            &request(vec![TranscriptItem::UserMessage {
                text: "what".into(),
                images: vec![
                    "data:image/png;base64,AAAA".into(),
                    "https://x/y.jpg".into(),
                ],
            }]),
            &no_caching(),
        );
        assert_eq!(
            body["messages"][0]["content"],
            json!([
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                {"type": "image", "source": {"type": "url", "url": "https://x/y.jpg"}},
                {"type": "text", "text": "what"},
            ])
        );
    }
}
