//! The model-wire peer suite (`../shared/peer-suites/model-wire/`), OpenAI
//! half: every `openai-responses` and `openai-chat` scenario of
//! `scenarios.json`, its recorded bytes served from a real HTTP server on
//! 127.0.0.1, read by the engine's `stream_turn`.
//!
//! A scenario that must complete must decode to what its recording carries:
//! the text (per phase on Responses), the tool calls (name and arguments),
//! the reasoning, the usage and the stop reason. Those expectations are
//! derived here from the recorded bytes, by a reading independent of the
//! engine's decoder (Responses: from the finished items and
//! `response.completed`, not the deltas), so a decoding that drops or
//! doubles anything fails. A scenario that must fail must fail with the
//! provider's message after exactly the requests the scenario says.
//!
//! The folder stays in `../shared` and is never copied here; when it is
//! missing the tests say so and pass (CI checks that it exists).

mod common;

use std::collections::BTreeMap;

use common::{Api, config, reliability, request, user};
use roder_api::inference::{InferenceEvent, MessagePhase, TokenUsage};
use roder_api::stop_reason::StopReason;
use roder_api::transcript::TranscriptItem;
use roder_testkit::fake_models::model_wire::Scenario;
use roder_testkit::fake_models::{
    CollectedResponse, FakeModelServer, ModelWireSuite, RecordedReply, sse_events,
};
use serde_json::Value;

#[tokio::test]
async fn every_recorded_responses_scenario_behaves_as_recorded() {
    run_api("openai-responses", Api::Responses).await;
}

#[tokio::test]
async fn every_recorded_chat_scenario_behaves_as_recorded() {
    run_api("openai-chat", Api::Chat).await;
}

async fn run_api(name: &str, api: Api) {
    let Some(root) = ModelWireSuite::locate_for_test(env!("CARGO_MANIFEST_DIR")) else {
        eprintln!(
            "model-wire peer suite not found beside the workspace (../shared/peer-suites/model-wire); skipping"
        );
        return;
    };
    let suite = ModelWireSuite::load(&root).unwrap();
    let mut ran = 0;
    let mut failures = Vec::new();
    for scenario in suite.for_api(name) {
        ran += 1;
        if let Err(error) = run_scenario(&suite, scenario, api).await {
            failures.push(format!("{name}/{}: {error:#}", scenario.name));
        }
    }
    assert!(ran > 0, "no {name} scenarios in scenarios.json");
    assert!(
        failures.is_empty(),
        "{} of {ran} scenarios failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

async fn run_scenario(suite: &ModelWireSuite, scenario: &Scenario, api: Api) -> anyhow::Result<()> {
    let server = FakeModelServer::start().await?;
    let mut replies = Vec::new();
    for step in &scenario.steps {
        replies.push(suite.step_reply(&scenario.api, step)?);
    }
    for reply in &replies {
        server.push(reply.clone());
    }
    if scenario.repeat_last
        && let Some(last) = replies.last()
    {
        server.repeat_when_empty(last.clone());
    }
    let mut rounds = vec![
        suite.step_body(
            &scenario.api,
            scenario
                .steps
                .last()
                .ok_or_else(|| anyhow::anyhow!("no steps"))?,
        )?,
    ];
    for file in &scenario.followups {
        let body = suite.file(&scenario.api, file)?;
        server.push(RecordedReply::sse(body.clone()));
        rounds.push(body);
    }

    let engine = api.engine(config(&server));
    let reliability = reliability(4);
    let mut transcript = vec![user("Run the recorded scenario.")];
    for (round, body) in rounds.iter().enumerate() {
        let outcome = common::ask(engine.as_ref(), &reliability, request(transcript.clone())).await;
        if scenario.expects_failure() {
            let error = match outcome {
                Ok(response) => anyhow::bail!("completed, but must fail: {:?}", response.text),
                Err(error) => format!("{error:#}"),
            };
            if let Some(needle) = &scenario.error_contains {
                anyhow::ensure!(
                    error.contains(needle.as_str()),
                    "the error {error:?} does not carry the provider's message {needle:?}"
                );
            }
            break;
        }
        let response =
            outcome.map_err(|error| anyhow::anyhow!("round {}: {error:#}", round + 1))?;
        let expected = match api {
            Api::Chat => chat_expectation(body)?,
            Api::Responses => responses_expectation(body)?,
        };
        expected
            .check(&response)
            .map_err(|error| anyhow::anyhow!("round {}: {error}", round + 1))?;
        if response.tool_calls.is_empty() {
            break;
        }
        // Continue the turn as the runtime would: the calls and a result
        // for each.
        if !response.text.is_empty() {
            transcript.push(TranscriptItem::AssistantMessage {
                text: response.text.clone(),
            });
        }
        for call in &response.tool_calls {
            transcript.push(TranscriptItem::ToolCall {
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            });
            transcript.push(TranscriptItem::ToolResult {
                id: call.id.clone(),
                name: call.name.clone(),
                output: "ok".into(),
                is_error: false,
            });
        }
    }
    let requests = server.model_requests().len();
    if let Some(expected) = scenario.requests {
        anyhow::ensure!(
            requests == expected,
            "{requests} model requests were made, the scenario says {expected}"
        );
    }
    Ok(())
}

/// What a recording carries.
#[derive(Debug, Default)]
struct Expected {
    text: String,
    /// Text per phase, where the API gave phases.
    phases: BTreeMap<&'static str, String>,
    reasoning: String,
    /// (name, arguments) of the calls that must be completed.
    calls: Vec<(String, String)>,
    usage: Option<TokenUsage>,
    stop: Option<StopReason>,
}

impl Expected {
    fn check(&self, response: &CollectedResponse) -> Result<(), String> {
        if response.text != self.text {
            return Err(format!(
                "text {:?}, recorded {:?}",
                response.text, self.text
            ));
        }
        for (phase, text) in &self.phases {
            let got: String = response
                .events
                .iter()
                .filter_map(|event| match event {
                    InferenceEvent::MessageDelta(delta)
                        if delta.phase.map(phase_name) == Some(*phase) =>
                    {
                        Some(delta.text.as_str())
                    }
                    _ => None,
                })
                .collect();
            if &got != text {
                return Err(format!("{phase} text {got:?}, recorded {text:?}"));
            }
        }
        if response.reasoning != self.reasoning {
            return Err(format!(
                "reasoning {:?}, recorded {:?}",
                response.reasoning, self.reasoning
            ));
        }
        let calls: Vec<(String, String)> = response
            .tool_calls
            .iter()
            .map(|call| (call.name.clone(), call.arguments.clone()))
            .collect();
        if calls.len() != self.calls.len()
            || calls
                .iter()
                .zip(&self.calls)
                .any(|(got, want)| got.0 != want.0 || !same_json(&got.1, &want.1))
        {
            return Err(format!("tool calls {calls:?}, recorded {:?}", self.calls));
        }
        if let Some(usage) = &self.usage
            && &response.usage != usage
        {
            return Err(format!("usage {:?}, recorded {usage:?}", response.usage));
        }
        let stop = response
            .completion
            .as_ref()
            .and_then(|completion| completion.stop_reason.as_deref())
            .map(StopReason::from_provider);
        if stop != self.stop {
            return Err(format!("stop reason {stop:?}, recorded {:?}", self.stop));
        }
        Ok(())
    }
}

fn phase_name(phase: MessagePhase) -> &'static str {
    match phase {
        MessagePhase::Commentary => "commentary",
        MessagePhase::FinalAnswer => "final_answer",
    }
}

/// Equal as JSON when both parse (whitespace may differ), else as text.
fn same_json(a: &str, b: &str) -> bool {
    match (
        serde_json::from_str::<Value>(a),
        serde_json::from_str::<Value>(b),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

fn json_events(body: &[u8]) -> Vec<Value> {
    sse_events(body)
        .into_iter()
        .filter(|(_, data)| data.trim() != "[DONE]")
        .filter_map(|(_, data)| serde_json::from_str(&data).ok())
        .collect()
}

fn text_of(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn count(value: &Value, pointer: &str) -> u64 {
    value.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

/// Chat Completions: choice 0's content and refusal deltas, reasoning
/// fields, tool call fragments by index, the last usage, `finish_reason`.
fn chat_expectation(body: &[u8]) -> anyhow::Result<Expected> {
    let mut expected = Expected::default();
    let mut calls: BTreeMap<u64, (String, String)> = BTreeMap::new();
    let mut finish = None;
    let mut refused = false;
    for chunk in json_events(body) {
        if let Some(usage) = chunk.get("usage").filter(|usage| usage.is_object()) {
            expected.usage = Some(TokenUsage {
                input_tokens: count(usage, "/prompt_tokens"),
                output_tokens: count(usage, "/completion_tokens"),
                cached_input_tokens: count(usage, "/prompt_tokens_details/cached_tokens"),
                reasoning_tokens: count(usage, "/completion_tokens_details/reasoning_tokens"),
            });
        }
        let choices = chunk
            .get("choices")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for choice in choices {
            if count(&choice, "/index") != 0 {
                continue;
            }
            let delta = choice.get("delta").cloned().unwrap_or(Value::Null);
            expected.text.push_str(&text_of(&delta, "content"));
            let refusal = text_of(&delta, "refusal");
            refused |= !refusal.is_empty();
            expected.text.push_str(&refusal);
            let reasoning = match delta.get("reasoning_content").and_then(Value::as_str) {
                Some(text) => text.to_string(),
                None => text_of(&delta, "reasoning"),
            };
            expected.reasoning.push_str(&reasoning);
            let fragments = delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for (position, fragment) in (0u64..).zip(fragments) {
                let index = fragment
                    .get("index")
                    .and_then(Value::as_u64)
                    .unwrap_or(position);
                let call = calls.entry(index).or_default();
                let function = fragment.get("function").cloned().unwrap_or(Value::Null);
                if call.0.is_empty() {
                    call.0 = text_of(&function, "name");
                }
                call.1.push_str(&text_of(&function, "arguments"));
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                finish = Some(reason.to_string());
            }
        }
    }
    let finish = finish.ok_or_else(|| anyhow::anyhow!("the recording has no finish_reason"))?;
    let cut_off = finish == "length";
    expected.calls = calls
        .into_values()
        .map(|(name, arguments)| {
            let arguments = if arguments.trim().is_empty() {
                "{}".to_string()
            } else {
                arguments
            };
            (name, arguments)
        })
        .filter(|(_, arguments)| !cut_off || serde_json::from_str::<Value>(arguments).is_ok())
        .collect();
    expected.stop = Some(if refused && finish == "stop" {
        StopReason::Refusal
    } else {
        StopReason::from_provider(&finish)
    });
    Ok(expected)
}

/// Responses: the finished items (`output_item.done`, then any item of
/// `response.completed`'s output not seen finished), the finished reasoning
/// texts, and `response.completed`'s usage and status. A finished text is
/// the text; where the deltas before it do not lead up to it (a recording
/// edited by hand), what streamed comes first, then the finished text.
fn responses_expectation(body: &[u8]) -> anyhow::Result<Expected> {
    let mut expected = Expected::default();
    // (output index, item) of the finished items.
    let mut finished: Vec<(u64, Value)> = Vec::new();
    let mut streamed: BTreeMap<(u64, u64), String> = BTreeMap::new();
    let mut reasoning: Vec<String> = Vec::new();
    let mut completed = None;
    for event in json_events(body) {
        match event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
        {
            "response.output_item.done" => {
                if let Some(item) = event.get("item") {
                    finished.push((count(&event, "/output_index"), item.clone()));
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                let key = (
                    count(&event, "/output_index"),
                    count(&event, "/content_index"),
                );
                streamed
                    .entry(key)
                    .or_default()
                    .push_str(&text_of(&event, "delta"));
            }
            "response.reasoning_summary_text.done" | "response.reasoning_text.done" => {
                let text = text_of(&event, "text");
                if !text.is_empty() {
                    reasoning.push(text);
                }
            }
            "response.completed" | "response.incomplete" => {
                completed = event.get("response").cloned();
            }
            _ => {}
        }
    }
    let completed =
        completed.ok_or_else(|| anyhow::anyhow!("the recording has no response.completed"))?;
    let seen: Vec<String> = finished
        .iter()
        .map(|(_, item)| text_of(item, "id"))
        .collect();
    for (index, item) in (0u64..).zip(
        completed
            .get("output")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
    ) {
        // Seen finished under its id or its position (some servers send a
        // new id with every event).
        let id = text_of(&item, "id");
        let seen_here = finished.iter().any(|(at, _)| *at == index);
        if !seen_here && (id.is_empty() || !seen.contains(&id)) {
            finished.push((index, item));
        }
    }
    let mut refused = false;
    for (output_index, item) in &finished {
        match item.get("type").and_then(Value::as_str).unwrap_or_default() {
            "message" => {
                let mut text = String::new();
                for (content_index, part) in (0u64..).zip(
                    item.get("content")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                ) {
                    let full = match part.get("type").and_then(Value::as_str) {
                        Some("output_text") => text_of(&part, "text"),
                        Some("refusal") => {
                            refused = true;
                            text_of(&part, "refusal")
                        }
                        _ => continue,
                    };
                    let before = streamed
                        .get(&(*output_index, content_index))
                        .cloned()
                        .unwrap_or_default();
                    if !full.starts_with(&before) {
                        text.push_str(&before);
                    }
                    text.push_str(&full);
                }
                expected.text.push_str(&text);
                let phase = match item.get("phase").and_then(Value::as_str) {
                    Some("commentary") => Some("commentary"),
                    Some("final_answer") => Some("final_answer"),
                    _ => None,
                };
                if let Some(phase) = phase {
                    expected.phases.entry(phase).or_default().push_str(&text);
                }
            }
            "function_call" => {
                let arguments = text_of(item, "arguments");
                expected.calls.push((
                    text_of(item, "name"),
                    if arguments.trim().is_empty() {
                        "{}".to_string()
                    } else {
                        arguments
                    },
                ));
            }
            _ => {}
        }
    }
    expected.reasoning = reasoning.join("\n\n");
    if let Some(usage) = completed.get("usage").filter(|usage| usage.is_object()) {
        expected.usage = Some(TokenUsage {
            input_tokens: count(usage, "/input_tokens"),
            output_tokens: count(usage, "/output_tokens"),
            cached_input_tokens: count(usage, "/input_tokens_details/cached_tokens"),
            reasoning_tokens: count(usage, "/output_tokens_details/reasoning_tokens"),
        });
    }
    expected.stop = Some(match completed.get("status").and_then(Value::as_str) {
        Some("incomplete") => StopReason::from_provider(&text_of(
            completed.get("incomplete_details").unwrap_or(&Value::Null),
            "reason",
        )),
        _ if refused => StopReason::Refusal,
        _ if !expected.calls.is_empty() => StopReason::ToolUse,
        _ => StopReason::EndTurn,
    });
    Ok(expected)
}
