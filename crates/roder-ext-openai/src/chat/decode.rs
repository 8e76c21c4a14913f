//! Reads Chat Completions chunks (`chat.completion.chunk`) into inference
//! events.
//!
//! Tool calls arrive as fragments keyed by `index`: the first carries the
//! id and name, later ones pieces of the JSON arguments, split anywhere
//! (mid-string, mid-escape). Fragments are accumulated per index and each
//! call is completed when the choice finishes (`finish_reason`), in index
//! order. Usage (the `choices: []` chunk that `include_usage` adds) is held
//! back and sent just before `Completed`, so a retried attempt can never
//! count tokens twice.
//!
//! A refusal (`delta.refusal`) streams as message text and ends with the
//! stop reason `refusal`. When the output limit cut the answer off
//! (`finish_reason: "length"`), only calls whose arguments are whole JSON
//! are completed; a call cut off mid-arguments gets its argument deltas
//! but no `ToolCallCompleted`, so the runtime sees it was truncated
//! instead of running half a command.

use std::collections::{BTreeMap, VecDeque};

use roder_api::inference::{
    CompletionMetadata, InferenceEvent, MessageDelta, ReasoningDelta, TokenUsage,
    ToolCallArgumentsDelta, ToolCallCompleted,
};
use roder_ext_inference_http::{DecodeError, Decoder, Event, FailureReport, Progress, snippet};
use serde::Deserialize;
use serde_json::Value;

use crate::ids::synthesized_call_id;

#[derive(Debug, Clone, Default)]
pub(crate) struct ChatDecoder {
    response_id: Option<String>,
    calls: BTreeMap<u64, PendingCall>,
    finish_reason: Option<String>,
    usage: Option<TokenUsage>,
    /// Refusal text was streamed.
    refused: bool,
}

#[derive(Debug, Clone)]
struct PendingCall {
    id: String,
    name: String,
    arguments: String,
}

#[derive(Deserialize)]
struct Chunk {
    id: Option<String>,
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    usage: Option<Usage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: u64,
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    content: Option<String>,
    /// The model's refusal, streamed like content.
    refusal: Option<String>,
    /// DeepSeek, vLLM, llama.cpp.
    reasoning_content: Option<String>,
    /// OpenRouter, Ollama. Kept loose: its shape differs between servers.
    reasoning: Option<Value>,
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    index: Option<u64>,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptDetails>,
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct CompletionDetails {
    reasoning_tokens: Option<u64>,
}

impl Decoder for ChatDecoder {
    fn on_event(
        &mut self,
        event: &Event,
        out: &mut VecDeque<InferenceEvent>,
    ) -> Result<Progress, DecodeError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(Progress::More);
        }
        if data == "[DONE]" {
            self.complete(out);
            return Ok(Progress::Done);
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|error| {
            DecodeError::Malformed(format!("{error} in chunk {}", snippet(data)))
        })?;
        if let Some(error) = chunk.error {
            return Err(reported(&error));
        }
        if self.response_id.is_none() {
            // Azure's first chunk (prompt filter results) has an empty id.
            self.response_id = chunk.id.filter(|id| !id.is_empty());
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(TokenUsage {
                input_tokens: usage.prompt_tokens.unwrap_or_default(),
                output_tokens: usage.completion_tokens.unwrap_or_default(),
                cached_input_tokens: usage
                    .prompt_tokens_details
                    .and_then(|details| details.cached_tokens)
                    .unwrap_or_default(),
                reasoning_tokens: usage
                    .completion_tokens_details
                    .and_then(|details| details.reasoning_tokens)
                    .unwrap_or_default(),
            });
        }
        // One choice is requested; others (from n > 1 in extra_body) are ignored.
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                self.on_delta(delta, out);
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
                self.complete_calls(out);
            }
        }
        Ok(Progress::More)
    }

    fn on_eof(&mut self, out: &mut VecDeque<InferenceEvent>) -> Result<(), DecodeError> {
        // Some compatible servers end the body without `[DONE]`; once the
        // choice has finished nothing of the answer is missing.
        if self.finish_reason.is_some() {
            self.complete(out);
            Ok(())
        } else {
            Err(DecodeError::Truncated)
        }
    }
}

impl ChatDecoder {
    fn on_delta(&mut self, delta: Delta, out: &mut VecDeque<InferenceEvent>) {
        let reasoning = delta.reasoning_content.or_else(|| {
            delta
                .reasoning
                .as_ref()
                .and_then(Value::as_str)
                .map(str::to_string)
        });
        if let Some(text) = reasoning.filter(|text| !text.is_empty()) {
            out.push_back(InferenceEvent::ReasoningDelta(ReasoningDelta { text }));
        }
        if let Some(text) = delta.content.filter(|text| !text.is_empty()) {
            out.push_back(InferenceEvent::MessageDelta(MessageDelta {
                text,
                phase: None,
            }));
        }
        if let Some(text) = delta.refusal.filter(|text| !text.is_empty()) {
            self.refused = true;
            out.push_back(InferenceEvent::MessageDelta(MessageDelta {
                text,
                phase: None,
            }));
        }
        for (position, fragment) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
            let index = fragment.index.unwrap_or(position as u64);
            let function = fragment.function;
            let (name, arguments) = match function {
                Some(function) => (function.name, function.arguments),
                None => (None, None),
            };
            let call = self.calls.entry(index).or_insert_with(|| PendingCall {
                id: String::new(),
                name: String::new(),
                arguments: String::new(),
            });
            if call.id.is_empty()
                && let Some(id) = fragment.id.filter(|id| !id.is_empty())
            {
                call.id = id;
            }
            if call.name.is_empty()
                && let Some(name) = name
            {
                call.name = name;
            }
            if let Some(arguments) = arguments.filter(|arguments| !arguments.is_empty()) {
                call.arguments.push_str(&arguments);
                if call.id.is_empty() {
                    call.id = synthesized_call_id();
                }
                out.push_back(InferenceEvent::ToolCallArgumentsDelta(
                    ToolCallArgumentsDelta {
                        id: call.id.clone(),
                        name: Some(call.name.clone()).filter(|name| !name.is_empty()),
                        delta: arguments,
                    },
                ));
            }
        }
    }

    fn complete_calls(&mut self, out: &mut VecDeque<InferenceEvent>) {
        let cut_off = self.finish_reason.as_deref() == Some("length");
        for (_, call) in std::mem::take(&mut self.calls) {
            if cut_off && serde_json::from_str::<Value>(&call.arguments).is_err() {
                // Truncated mid-arguments: left open for the runtime to
                // report, never run.
                continue;
            }
            let arguments = if call.arguments.trim().is_empty() {
                // A call of a tool without parameters; "{}" parses, "" not.
                "{}".to_string()
            } else {
                call.arguments
            };
            out.push_back(InferenceEvent::ToolCallCompleted(ToolCallCompleted {
                id: if call.id.is_empty() {
                    synthesized_call_id()
                } else {
                    call.id
                },
                name: call.name,
                arguments,
            }));
        }
    }

    fn complete(&mut self, out: &mut VecDeque<InferenceEvent>) {
        self.complete_calls(out);
        if let Some(usage) = self.usage.take() {
            out.push_back(InferenceEvent::Usage(usage));
        }
        out.push_back(InferenceEvent::Completed(CompletionMetadata {
            stop_reason: self.stop_reason(),
            provider_response_id: self.response_id.clone(),
        }));
    }

    /// `finish_reason` as sent, except that a refusal that otherwise ended
    /// normally says `refusal`.
    fn stop_reason(&self) -> Option<String> {
        match self.finish_reason.as_deref() {
            None | Some("stop") if self.refused => Some("refusal".to_string()),
            _ => self.finish_reason.clone(),
        }
    }
}

/// An in-stream `error` object. OpenRouter puts the upstream HTTP status in
/// `code`, OpenAI a word; a context overflow ends the request, otherwise
/// [`roder_ext_inference_http::classify`] decides whether it is worth
/// another attempt.
fn reported(error: &Value) -> DecodeError {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| error.as_str())
        .unwrap_or("unknown error")
        .to_string();
    let code = error.get("code");
    let report = FailureReport {
        status: code
            .and_then(Value::as_u64)
            .and_then(|status| u16::try_from(status).ok()),
        kind: error.get("type").and_then(Value::as_str),
        code: code.and_then(Value::as_str),
        message: &message,
        should_retry: None,
    };
    // A context overflow ends the request for the runtime to compact.
    roder_ext_inference_http::reported(report, message.clone())
}

#[cfg(test)]
mod tests {
    use roder_testkit::fake_models::ChatStream;

    use super::*;
    use roder_ext_inference_http::{RetryClass, decode_chunks};

    fn decode(body: &[u8], cuts: &[usize]) -> (Vec<InferenceEvent>, Result<(), DecodeError>) {
        let mut chunks = Vec::new();
        let mut start = 0;
        for &cut in cuts.iter().chain(std::iter::once(&body.len())) {
            chunks.push(body[start..cut].to_vec());
            start = cut;
        }
        decode_chunks(ChatDecoder::default(), chunks)
    }

    fn calls(events: &[InferenceEvent]) -> Vec<ToolCallCompleted> {
        events
            .iter()
            .filter_map(|event| match event {
                InferenceEvent::ToolCallCompleted(call) => Some(call.clone()),
                _ => None,
            })
            .collect()
    }

    fn text(events: &[InferenceEvent]) -> String {
        events
            .iter()
            .filter_map(|event| match event {
                InferenceEvent::MessageDelta(delta) => Some(delta.text.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn arguments_split_mid_string_and_mid_escape_assemble_at_every_byte_cut() {
        // `{"cmd":"echo \"hé\"\n"}` with fragments cutting a string, an
        // escape sequence (`\` | `"`) and a multi-byte character's escape.
        let fragments = ["{\"cmd\":\"ec", "ho \\", "\"h\u{e9}\\", "\"\\n\"}"];
        let stream = ChatStream::with_id("chatcmpl-7")
            .text("Run")
            .text("ning é")
            .tool_call(0, "call_a", "shell", &fragments)
            .finish("tool_calls")
            .usage_details(100, 20, 40, 7)
            .done();
        let body = stream.body();
        let expected_arguments = fragments.concat();
        assert_eq!(
            serde_json::from_str::<Value>(&expected_arguments).unwrap()["cmd"],
            "echo \"hé\"\n"
        );
        for cut in 0..=body.len() {
            // Every byte position, plus a second cut a few bytes later.
            let second = (cut + 7).min(body.len());
            let (events, end) = decode(&body, &[cut, second]);
            assert_eq!(end, Ok(()), "cut at {cut}");
            assert_eq!(text(&events), "Running é", "cut at {cut}");
            let calls = calls(&events);
            assert_eq!(calls.len(), 1);
            assert_eq!(calls[0].id, "call_a");
            assert_eq!(calls[0].name, "shell");
            assert_eq!(calls[0].arguments, expected_arguments, "cut at {cut}");
            assert_eq!(
                events[events.len() - 2],
                InferenceEvent::Usage(TokenUsage {
                    input_tokens: 100,
                    output_tokens: 20,
                    cached_input_tokens: 40,
                    reasoning_tokens: 7,
                })
            );
            assert_eq!(
                events.last(),
                Some(&InferenceEvent::Completed(CompletionMetadata {
                    stop_reason: Some("tool_calls".into()),
                    provider_response_id: Some("chatcmpl-7".into()),
                }))
            );
        }
    }

    #[test]
    fn interleaved_parallel_calls_complete_in_index_order() {
        let stream = ChatStream::new()
            .tool_call_start(1, "call_b", "read_file")
            .tool_call_start(0, "call_a", "shell")
            .tool_call_arguments(1, "{\"path\":")
            .tool_call_arguments(0, "{\"cmd\":")
            .tool_call_arguments(0, "\"ls\"}")
            .tool_call_arguments(1, "\"a.txt\"}")
            .finish("tool_calls")
            .done();
        let (events, end) = decode(&stream.body(), &[]);
        assert_eq!(end, Ok(()));
        let calls = calls(&events);
        assert_eq!(
            calls,
            vec![
                ToolCallCompleted {
                    id: "call_a".into(),
                    name: "shell".into(),
                    arguments: "{\"cmd\":\"ls\"}".into(),
                },
                ToolCallCompleted {
                    id: "call_b".into(),
                    name: "read_file".into(),
                    arguments: "{\"path\":\"a.txt\"}".into(),
                },
            ]
        );
        let deltas: Vec<&ToolCallArgumentsDelta> = events
            .iter()
            .filter_map(|event| match event {
                InferenceEvent::ToolCallArgumentsDelta(delta) => Some(delta),
                _ => None,
            })
            .collect();
        assert_eq!(deltas.len(), 4);
        assert_eq!(deltas[0].id, "call_b");
        assert_eq!(deltas[0].name.as_deref(), Some("read_file"));
    }

    #[test]
    fn reasoning_fields_of_both_dialects_are_read() {
        let stream = ChatStream::new()
            .reasoning("think ")
            .reasoning_field("more")
            .text("answer")
            .finish("stop")
            .done();
        let (events, _) = decode(&stream.body(), &[]);
        let reasoning: String = events
            .iter()
            .filter_map(|event| match event {
                InferenceEvent::ReasoningDelta(delta) => Some(delta.text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(reasoning, "think more");
        assert_eq!(text(&events), "answer");
    }

    #[test]
    fn missing_ids_are_synthesized_and_empty_arguments_become_an_object() {
        let stream = ChatStream::new()
            .raw(
                serde_json::json!({"choices": [{"index": 0, "delta": {"tool_calls": [
                {"function": {"name": "list_files", "arguments": ""}}
            ]}, "finish_reason": "tool_calls"}]}),
            )
            .done();
        let (events, _) = decode(&stream.body(), &[]);
        let calls = calls(&events);
        assert_eq!(calls.len(), 1);
        assert!(calls[0].id.starts_with("call_"));
        assert_eq!(calls[0].arguments, "{}");
    }

    #[test]
    fn a_body_without_done_is_complete_only_after_finish_reason() {
        let finished = ChatStream::new().text("hi").finish("stop").without_done();
        let (events, end) = decode(&finished.body(), &[]);
        assert_eq!(end, Ok(()));
        assert!(matches!(events.last(), Some(InferenceEvent::Completed(_))));

        let cut = ChatStream::new().text("hi").without_done();
        let (_, end) = decode(&cut.body(), &[]);
        assert_eq!(end, Err(DecodeError::Truncated));
    }

    #[test]
    fn in_stream_errors_are_reported_with_retryability() {
        let stream = ChatStream::new()
            .error("upstream overloaded", serde_json::json!(502))
            .done();
        let (_, end) = decode(&stream.body(), &[]);
        assert_eq!(
            end,
            Err(DecodeError::Reported {
                message: "upstream overloaded".into(),
                retry: RetryClass::Transient,
            })
        );
        let stream = ChatStream::new()
            .error("bad request", serde_json::json!(400))
            .done();
        let (_, end) = decode(&stream.body(), &[]);
        assert!(matches!(
            end,
            Err(DecodeError::Reported {
                retry: RetryClass::Permanent,
                ..
            })
        ));
    }

    fn stop_reason(events: &[InferenceEvent]) -> Option<String> {
        match events.last() {
            Some(InferenceEvent::Completed(metadata)) => metadata.stop_reason.clone(),
            _ => None,
        }
    }

    #[test]
    fn a_refusal_streams_as_text_and_says_refusal() {
        let stream = ChatStream::new()
            .refusal("I'm sorry,")
            .refusal(" I can't help")
            .finish("stop")
            .done();
        let (events, end) = decode(&stream.body(), &[]);
        assert_eq!(end, Ok(()));
        assert_eq!(text(&events), "I'm sorry, I can't help");
        assert_eq!(stop_reason(&events).as_deref(), Some("refusal"));
        let plain = ChatStream::new().text("fine").finish("stop").done();
        let (events, _) = decode(&plain.body(), &[]);
        assert_eq!(stop_reason(&events).as_deref(), Some("stop"));
    }

    #[test]
    fn a_call_cut_off_by_the_output_limit_is_left_open() {
        let stream = ChatStream::new()
            .tool_call(0, "call_a", "shell", &["{\"cmd\":", "\"ls\"}"])
            .tool_call(
                1,
                "call_b",
                "write_file",
                &["{\"path\":\"a\",\"text\":\"hal"],
            )
            .finish("length")
            .done();
        let (events, end) = decode(&stream.body(), &[]);
        assert_eq!(end, Ok(()));
        let completed = calls(&events);
        assert_eq!(completed.len(), 1, "{completed:?}");
        assert_eq!(completed[0].id, "call_a");
        assert!(events.iter().any(|event| matches!(
            event,
            InferenceEvent::ToolCallArgumentsDelta(delta) if delta.id == "call_b"
        )));
        assert_eq!(stop_reason(&events).as_deref(), Some("length"));
        // Without the limit, malformed arguments still reach the runtime.
        let stream = ChatStream::new()
            .tool_call(0, "call_c", "shell", &["{\"cmd\":"])
            .finish("tool_calls")
            .done();
        let (events, _) = decode(&stream.body(), &[]);
        assert_eq!(calls(&events).len(), 1);
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_chunks_never_panic(data in "\\PC{0,200}") {
            let _ = decode(format!("data: {data}\n\n").as_bytes(), &[]);
            let chunk = serde_json::json!({"choices": [{"index": 0, "delta": {
                "content": data, "refusal": data, "reasoning": data,
                "tool_calls": [{"index": 0, "function": {"name": data, "arguments": data}}]},
                "finish_reason": data}]});
            let _ = decode(format!("data: {chunk}\n\n").as_bytes(), &[]);
        }

        #[test]
        fn a_call_cut_off_by_length_is_completed_only_if_its_arguments_are_whole(
            cut in 0usize..=30,
        ) {
            let arguments = "{\"cmd\":\"echo \\\"hé\\\"\"}";
            let kept: String = arguments.chars().take(cut).collect();
            let stream = ChatStream::new()
                .tool_call(0, "call_a", "shell", &[&kept])
                .finish("length")
                .done();
            let (events, _) = decode(&stream.body(), &[]);
            let whole = serde_json::from_str::<Value>(&kept).is_ok();
            proptest::prop_assert_eq!(calls(&events).len(), usize::from(whole));
        }
    }

    #[test]
    fn garbage_is_a_protocol_error() {
        let (_, end) = decode(b"data: {not json\n\n", &[]);
        assert!(matches!(end, Err(DecodeError::Malformed(_))));
    }
}
