//! The model-wire peer suite (`../shared/peer-suites/model-wire/`),
//! Anthropic half: every `anthropic` scenario of `scenarios.json`, its
//! recorded bytes served (with the recorded status and headers) from a real
//! HTTP server on 127.0.0.1, read by the engine's `stream_turn`.
//!
//! A scenario that must complete must decode to what its recording carries:
//! text, tool calls (name and input), thinking, usage and stop reason,
//! derived here from the recorded events by a reading independent of the
//! engine's decoder. A scenario that must fail must fail with the
//! provider's message after exactly the requests it says. With
//! `sends_back_signature`, round 2 runs with round 1's result in the
//! transcript (the signed blocks in `Reasoning::provider_data`, read back
//! from JSON as a resumed thread would be) and its request must carry
//! round 1's signed thinking block.
//!
//! The folder stays in `../shared` and is never copied here; when it is
//! missing the tests say so and pass (CI checks that it exists).

mod common;

use std::collections::BTreeMap;

use common::{engine, reliability, request, user};
use roder_api::inference::{ReasoningEffort, TokenUsage};
use roder_api::stop_reason::StopReason;
use roder_api::transcript::TranscriptItem;
use roder_testkit::fake_models::model_wire::Scenario;
use roder_testkit::fake_models::{
    CollectedResponse, FakeModelServer, ModelWireSuite, RecordedReply, sse_events,
};
use serde_json::Value;

#[tokio::test]
async fn every_recorded_anthropic_scenario_behaves_as_recorded() {
    let Some(root) = ModelWireSuite::locate_for_test(env!("CARGO_MANIFEST_DIR")) else {
        eprintln!(
            "model-wire peer suite not found beside the workspace (../shared/peer-suites/model-wire); skipping"
        );
        return;
    };
    let suite = ModelWireSuite::load(&root).unwrap();
    let mut ran = 0;
    let mut failures = Vec::new();
    for scenario in suite.for_api("anthropic") {
        ran += 1;
        if let Err(error) = run_scenario(&suite, scenario).await {
            failures.push(format!("anthropic/{}: {error:#}", scenario.name));
        }
    }
    assert!(ran > 0, "no anthropic scenarios in scenarios.json");
    assert!(
        failures.is_empty(),
        "{} of {ran} scenarios failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

async fn run_scenario(suite: &ModelWireSuite, scenario: &Scenario) -> anyhow::Result<()> {
    let server = FakeModelServer::start().await?;
    let mut last = None;
    for step in &scenario.steps {
        let reply = suite.step_reply(&scenario.api, step)?;
        server.push(reply.clone());
        last = Some(reply);
    }
    if scenario.repeat_last
        && let Some(last) = &last
    {
        server.repeat_when_empty(last.clone());
    }
    let last_step = scenario
        .steps
        .last()
        .ok_or_else(|| anyhow::anyhow!("no steps"))?;
    let mut rounds = vec![suite.step_body(&scenario.api, last_step)?];
    for file in &scenario.followups {
        let body = suite.file(&scenario.api, file)?;
        server.push(RecordedReply::sse(body.clone()));
        rounds.push(body);
    }

    let engine = engine(&server);
    let reliability = reliability(4);
    let mut transcript = vec![user("Run the recorded scenario.")];
    let mut signed = Vec::new();
    for (round, body) in rounds.iter().enumerate() {
        let outcome = common::ask(
            &engine,
            &reliability,
            request(transcript.clone(), Some(ReasoningEffort::Medium)),
        )
        .await;
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
        let expected = expectation(body)?;
        expected
            .check(&response)
            .map_err(|error| anyhow::anyhow!("round {}: {error}", round + 1))?;
        if round == 0 {
            signed = expected.signatures.clone();
        }
        if response.tool_calls.is_empty() {
            break;
        }
        // Continue the turn as the runtime records it.
        // As the runtime persists it: signed blocks in `provider_data`.
        transcript.extend(common::reasoning_transcript(&response));
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
        }
        for call in &response.tool_calls {
            transcript.push(TranscriptItem::ToolResult {
                id: call.id.clone(),
                name: call.name.clone(),
                output: "ok".into(),
                is_error: false,
            });
        }
        // Through the log's JSON, as a resumed thread reads it.
        transcript = serde_json::from_str(&serde_json::to_string(&transcript)?)?;
    }
    let requests = server.model_requests();
    if let Some(expected) = scenario.requests {
        anyhow::ensure!(
            requests.len() == expected,
            "{} model requests were made, the scenario says {expected}",
            requests.len()
        );
    }
    if scenario.sends_back_signature {
        anyhow::ensure!(!signed.is_empty(), "round 1 recorded no signed thinking");
        let second = requests
            .get(1)
            .ok_or_else(|| anyhow::anyhow!("no round-2 request was made"))?;
        let sent: Vec<String> = second.body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|message| message["role"] == "assistant")
            .flat_map(|message| message["content"].as_array().cloned().unwrap_or_default())
            .filter(|block| block["type"] == "thinking")
            .filter_map(|block| block["signature"].as_str().map(str::to_string))
            .collect();
        anyhow::ensure!(
            sent == signed,
            "round 2 sent the thinking signatures {sent:?}, round 1 recorded {signed:?}"
        );
        anyhow::ensure!(
            second.body.get("thinking").is_some(),
            "round 2 went without thinking"
        );
    }
    Ok(())
}

/// What a recording carries.
#[derive(Debug, Default)]
struct Expected {
    text: String,
    reasoning: String,
    /// (name, input) of the tool uses that must be completed.
    calls: Vec<(String, String)>,
    usage: TokenUsage,
    stop: Option<StopReason>,
    /// Signatures of the thinking blocks, in order.
    signatures: Vec<String>,
}

impl Expected {
    fn check(&self, response: &CollectedResponse) -> Result<(), String> {
        if response.text != self.text {
            return Err(format!(
                "text {:?}, recorded {:?}",
                response.text, self.text
            ));
        }
        if response.reasoning != self.reasoning {
            return Err(format!(
                "thinking {:?}, recorded {:?}",
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
        if response.usage != self.usage {
            return Err(format!(
                "usage {:?}, recorded {:?}",
                response.usage, self.usage
            ));
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

fn text_of(value: &Value, pointer: &str) -> String {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// One content block as recorded.
#[derive(Debug, Default)]
struct RecordedBlock {
    kind: String,
    name: String,
    initial: Value,
    text: String,
    signature: String,
    stopped: bool,
}

/// Reads the recorded events: blocks by index, the usage of
/// `message_start` updated by `message_delta`, the stop reason.
fn expectation(body: &[u8]) -> anyhow::Result<Expected> {
    let mut expected = Expected::default();
    let mut blocks: BTreeMap<u64, RecordedBlock> = BTreeMap::new();
    let mut usage: BTreeMap<String, Value> = BTreeMap::new();
    let mut explanation = String::new();
    let mut text_seen = false;
    let mut merge_usage = |value: Option<&Value>| {
        if let Some(Value::Object(fields)) = value {
            for (name, value) in fields {
                if !value.is_null() {
                    usage.insert(name.clone(), value.clone());
                }
            }
        }
    };
    for (_, data) in sse_events(body) {
        let Ok(event) = serde_json::from_str::<Value>(&data) else {
            continue;
        };
        let index = event["index"].as_u64().unwrap_or(0);
        match event["type"].as_str().unwrap_or_default() {
            "message_start" => merge_usage(event.pointer("/message/usage")),
            "content_block_start" => {
                let block = &event["content_block"];
                let kind = text_of(block, "/type");
                let mut recorded = RecordedBlock {
                    name: text_of(block, "/name"),
                    initial: block["input"].clone(),
                    signature: text_of(block, "/signature"),
                    ..RecordedBlock::default()
                };
                match kind.as_str() {
                    "text" => recorded.text = text_of(block, "/text"),
                    "thinking" => recorded.text = text_of(block, "/thinking"),
                    _ => {}
                }
                if kind == "text" && !recorded.text.is_empty() {
                    text_seen = true;
                    expected.text.push_str(&recorded.text);
                }
                recorded.kind = kind;
                blocks.insert(index, recorded);
            }
            "content_block_delta" => {
                let Some(block) = blocks.get_mut(&index) else {
                    continue;
                };
                let delta = &event["delta"];
                match (block.kind.as_str(), delta["type"].as_str().unwrap_or("")) {
                    ("text", "text_delta") => {
                        let text = text_of(delta, "/text");
                        text_seen |= !text.is_empty();
                        expected.text.push_str(&text);
                        block.text.push_str(&text);
                    }
                    ("tool_use", "input_json_delta") => {
                        block.text.push_str(&text_of(delta, "/partial_json"));
                    }
                    ("thinking", "thinking_delta") => {
                        block.text.push_str(&text_of(delta, "/thinking"));
                    }
                    ("thinking", "signature_delta") => {
                        block.signature.push_str(&text_of(delta, "/signature"));
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                if let Some(block) = blocks.get_mut(&index) {
                    block.stopped = true;
                }
            }
            "message_delta" => {
                merge_usage(event.get("usage"));
                if let Some(stop) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    expected.stop = Some(StopReason::from_provider(stop));
                }
                explanation = text_of(&event, "/delta/stop_details/explanation");
            }
            _ => {}
        }
    }
    anyhow::ensure!(expected.stop.is_some(), "the recording has no stop reason");
    let cut_off = expected.stop == Some(StopReason::MaxOutputTokens);
    let mut thinking = Vec::new();
    for block in blocks.values() {
        match block.kind.as_str() {
            "thinking" => {
                thinking.push(block.text.clone());
                expected.signatures.push(block.signature.clone());
            }
            "tool_use" => {
                let input = if !block.text.trim().is_empty() {
                    block.text.clone()
                } else if block.initial.as_object().is_some_and(|o| !o.is_empty()) {
                    block.initial.to_string()
                } else {
                    "{}".to_string()
                };
                let whole = serde_json::from_str::<Value>(&input).is_ok();
                // Cut off by the output limit, or never finished: not a
                // call to run.
                if whole || (block.stopped && !cut_off) {
                    expected.calls.push((block.name.clone(), input));
                }
            }
            _ => {}
        }
    }
    expected.reasoning = thinking
        .into_iter()
        .filter(|text| !text.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    if expected.stop == Some(StopReason::Refusal) && !text_seen {
        expected.text = explanation;
    }
    let tokens = |name: &str| usage.get(name).and_then(Value::as_u64).unwrap_or(0);
    let cache_read = tokens("cache_read_input_tokens");
    expected.usage = TokenUsage {
        input_tokens: tokens("input_tokens") + cache_read + tokens("cache_creation_input_tokens"),
        output_tokens: tokens("output_tokens"),
        cached_input_tokens: cache_read,
        reasoning_tokens: usage
            .get("output_tokens_details")
            .and_then(|details| details["thinking_tokens"].as_u64())
            .unwrap_or(0),
    };
    Ok(expected)
}
