//! Maps an [`AgentInferenceRequest`] onto a Responses API request body.
//!
//! * `instructions` → `instructions`; `developer_context` → a `developer`
//!   message at the start of `input`.
//! * User and assistant text → `message` items; tool calls →
//!   `function_call` items; results → `function_call_output` items, each
//!   keyed by `call_id`.
//! * Reasoning items go back in their place: a `TranscriptItem::Reasoning`
//!   whose `provider_data` is a Responses reasoning item (as the decoder
//!   stored it, with `encrypted_content`) is sent as that item, without its
//!   `id` (with `store: false` the server keeps no items, and an id it
//!   cannot find fails the request). Reasoning of another format (an
//!   Anthropic thinking block), without data, or without encrypted content
//!   is dropped; the model still sees every call and result.
//! * `store: false`: the whole transcript is sent each time, so nothing
//!   needs to be kept server-side (`extra_body` can turn it back on; then
//!   ids are kept too). So that reasoning survives between requests
//!   anyway, reasoning requests ask for it encrypted:
//!   `include: ["reasoning.encrypted_content"]` whenever `reasoning` is set
//!   or the model is a reasoning model ([`is_reasoning_model`]). Other
//!   models reject that `include`, so it is not sent for them.

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
    let store = extra
        .get("store")
        .is_some_and(|store| store == &json!(true));
    body.insert("input".into(), Value::Array(input(request, store)));
    body.insert("stream".into(), json!(true));
    body.insert("store".into(), json!(false));
    if request.reasoning.is_some() || is_reasoning_model(&request.model) {
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    }
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

/// Whether `model` reasons (and so returns reasoning items): the o-series
/// (`o1`, `o3-mini`, `o4-mini`, ...), `gpt-5*` and the `codex` models,
/// with or without a router's `openai/` prefix.
pub(crate) fn is_reasoning_model(model: &str) -> bool {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    let o_series = name
        .strip_prefix('o')
        .and_then(|rest| rest.chars().next())
        .is_some_and(|next| next.is_ascii_digit());
    o_series || name.starts_with("gpt-5") || name.contains("codex")
}

/// A stored reasoning item as it goes back into `input`, or `None` when
/// it cannot (another provider's data, nothing encrypted to send).
fn reasoning_input(data: &Value, store: bool) -> Option<Value> {
    let item = data.as_object()?;
    if item.get("type")? != "reasoning" {
        return None;
    }
    let encrypted = item
        .get("encrypted_content")
        .and_then(Value::as_str)
        .is_some_and(|content| !content.is_empty());
    let has_id = item.get("id").and_then(Value::as_str).is_some();
    // Encrypted content carries the reasoning itself; an id only refers
    // to an item the server kept (`store: true`).
    let sendable = encrypted || (store && has_id);
    if !sendable {
        return None;
    }
    let mut item = item.clone();
    if !store {
        item.remove("id");
    }
    item.entry("summary").or_insert_with(|| json!([]));
    Some(Value::Object(item))
}

fn input(request: &AgentInferenceRequest, store: bool) -> Vec<Value> {
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
            TranscriptItem::Reasoning {
                provider_data: Some(data),
                ..
            } => items.extend(reasoning_input(data, store)),
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

    fn encrypted(id: &str, content: &str) -> Value {
        json!({"type": "reasoning", "id": id, "encrypted_content": content,
               "summary": [{"type": "summary_text", "text": "plan"}]})
    }

    #[test]
    fn reasoning_items_go_back_in_place_without_their_ids() {
        let body = build_body(
            &request(vec![
                TranscriptItem::UserMessage {
                    text: "hi".into(),
                    images: vec![],
                },
                TranscriptItem::Reasoning {
                    text: "plan".into(),
                    provider_data: Some(encrypted("rs_1", "gAAAA-1")),
                },
                TranscriptItem::Reasoning {
                    text: "claude".into(),
                    provider_data: Some(
                        json!({"type": "thinking", "thinking": "x", "signature": "s"}),
                    ),
                },
                TranscriptItem::Reasoning {
                    text: "no data".into(),
                    provider_data: None,
                },
                TranscriptItem::Reasoning {
                    text: "nothing encrypted".into(),
                    provider_data: Some(json!({"type": "reasoning", "id": "rs_2", "summary": []})),
                },
                TranscriptItem::ToolCall {
                    id: "call_1".into(),
                    name: "shell".into(),
                    arguments: "{}".into(),
                },
            ]),
            &Map::new(),
        );
        let input = body["input"].as_array().unwrap();
        assert_eq!(input.len(), 4, "{input:?}");
        assert_eq!(
            input[2],
            json!({"type": "reasoning", "encrypted_content": "gAAAA-1",
                   "summary": [{"type": "summary_text", "text": "plan"}]})
        );
        assert_eq!(input[3]["type"], json!("function_call"));
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));

        // With `store: true` the server keeps items: ids stay.
        let mut extra = Map::new();
        extra.insert("store".into(), json!(true));
        let body = build_body(
            &request(vec![TranscriptItem::Reasoning {
                text: "plan".into(),
                provider_data: Some(encrypted("rs_1", "gAAAA-1")),
            }]),
            &extra,
        );
        assert_eq!(body["input"][1]["id"], json!("rs_1"));
        assert_eq!(body["store"], json!(true));
    }

    #[test]
    fn encrypted_reasoning_is_asked_of_reasoning_models_only() {
        let mut req = request(vec![]);
        req.reasoning = None;
        for model in [
            "gpt-5",
            "gpt-5-codex",
            "o3",
            "o4-mini",
            "openai/o1",
            "codex-mini-latest",
        ] {
            req.model = model.into();
            let body = build_body(&req, &Map::new());
            assert_eq!(
                body["include"],
                json!(["reasoning.encrypted_content"]),
                "{model}"
            );
        }
        for model in ["gpt-4o", "gpt-4.1-mini", "omni-moderation", "llama3"] {
            req.model = model.into();
            let body = build_body(&req, &Map::new());
            assert!(body.get("include").is_none(), "{model}");
        }
        req.model = "my-finetune".into();
        req.reasoning = Some(ReasoningEffort::High);
        assert!(build_body(&req, &Map::new()).get("include").is_some());
    }

    proptest::proptest! {
        /// Whatever a log holds as provider data, the body is built, and a
        /// reasoning item goes out only with encrypted content.
        #[test]
        fn arbitrary_provider_data_never_panics(
            kind in proptest::sample::select(vec!["reasoning", "thinking", ""]),
            field in proptest::sample::select(vec!["encrypted_content", "id", "summary", "type"]),
            value in "\\PC{0,20}",
            number in proptest::bool::ANY,
            model in "\\PC{0,12}",
        ) {
            let mut data = json!({"type": kind});
            data[field] = if number { json!(7) } else { json!(value) };
            for data in [data, json!(value), json!([kind]), Value::Null] {
                let mut req = request(vec![TranscriptItem::Reasoning {
                    text: String::new(),
                    provider_data: Some(data),
                }]);
                req.model = model.clone();
                let body = build_body(&req, &Map::new());
                for item in body["input"].as_array().cloned().unwrap_or_default() {
                    if item["type"] == "reasoning" {
                        proptest::prop_assert!(item["encrypted_content"].as_str().is_some_and(|c| !c.is_empty()));
                        proptest::prop_assert!(item.get("id").is_none());
                    }
                }
            }
        }
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
