//! Reads Responses API stream events into inference events.
//!
//! Function calls are output items: `output_item.added` names the call,
//! `function_call_arguments.delta` events carry argument fragments keyed by
//! item id (several calls may interleave), and `output_item.done` carries
//! the whole call, which is when `ToolCallCompleted` is sent. A terminal
//! `response.completed` or `response.incomplete` ends the response;
//! `response.failed` and `error` events are provider errors.
//!
//! Stop reasons use the Chat Completions words, so both engines report
//! alike: `tool_calls` when calls were made, else `stop`; an incomplete
//! response reports its reason (`max_output_tokens`, `content_filter`).

use std::collections::{HashMap, HashSet, VecDeque};

use roder_api::inference::{
    CompletionMetadata, InferenceEvent, MessageDelta, MessagePhase, ReasoningDelta, TokenUsage,
    ToolCallArgumentsDelta, ToolCallCompleted,
};
use roder_ext_inference_http::{DecodeError, Decoder, Event, Progress, snippet};
use serde::Deserialize;

#[derive(Debug, Clone, Default)]
pub(crate) struct ResponsesDecoder {
    response_id: Option<String>,
    /// Calls by item id.
    calls: HashMap<String, PendingCall>,
    /// Call ids already completed.
    completed: HashSet<String>,
    /// Phases of message items by item id.
    phases: HashMap<String, MessagePhase>,
}

#[derive(Debug, Clone)]
struct PendingCall {
    call_id: String,
    name: String,
    arguments: String,
}

#[derive(Deserialize)]
#[serde(tag = "type")]
enum StreamEvent {
    #[serde(rename = "response.created", alias = "response.in_progress")]
    Started { response: ResponseBody },
    #[serde(rename = "response.output_item.added")]
    ItemAdded { item: Item },
    #[serde(rename = "response.output_item.done")]
    ItemDone { item: Item },
    #[serde(
        rename = "response.output_text.delta",
        alias = "response.refusal.delta"
    )]
    TextDelta {
        item_id: Option<String>,
        delta: String,
    },
    #[serde(rename = "response.reasoning_summary_part.added")]
    SummaryPartAdded {
        #[serde(default)]
        summary_index: u64,
    },
    #[serde(
        rename = "response.reasoning_summary_text.delta",
        alias = "response.reasoning_text.delta"
    )]
    ReasoningDelta { delta: String },
    #[serde(rename = "response.function_call_arguments.delta")]
    ArgumentsDelta { item_id: String, delta: String },
    #[serde(rename = "response.function_call_arguments.done")]
    ArgumentsDone { item_id: String, arguments: String },
    #[serde(rename = "response.completed", alias = "response.incomplete")]
    Finished { response: ResponseBody },
    #[serde(rename = "response.failed")]
    Failed { response: ResponseBody },
    #[serde(rename = "error")]
    Error {
        code: Option<String>,
        message: Option<String>,
        error: Option<ErrorBody>,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type")]
enum Item {
    #[serde(rename = "function_call")]
    FunctionCall {
        id: Option<String>,
        call_id: String,
        name: String,
        #[serde(default)]
        arguments: String,
    },
    #[serde(rename = "message")]
    Message {
        id: Option<String>,
        phase: Option<String>,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct ResponseBody {
    id: Option<String>,
    status: Option<String>,
    usage: Option<Usage>,
    #[serde(default)]
    output: Vec<Item>,
    incomplete_details: Option<IncompleteDetails>,
    error: Option<ErrorBody>,
}

#[derive(Deserialize)]
struct IncompleteDetails {
    reason: Option<String>,
}

#[derive(Deserialize)]
struct ErrorBody {
    code: Option<String>,
    message: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    input_tokens_details: Option<InputDetails>,
    output_tokens_details: Option<OutputDetails>,
}

#[derive(Deserialize)]
struct InputDetails {
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct OutputDetails {
    reasoning_tokens: Option<u64>,
}

impl Decoder for ResponsesDecoder {
    fn on_event(
        &mut self,
        event: &Event,
        out: &mut VecDeque<InferenceEvent>,
    ) -> Result<Progress, DecodeError> {
        let data = event.data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(Progress::More);
        }
        let parsed: StreamEvent = serde_json::from_str(data).map_err(|error| {
            DecodeError::Malformed(format!("{error} in event {}", snippet(data)))
        })?;
        match parsed {
            StreamEvent::Started { response } => {
                if response.id.is_some() {
                    self.response_id = response.id;
                }
            }
            StreamEvent::ItemAdded { item } => self.on_item_added(item),
            StreamEvent::ItemDone { item } => self.on_item_done(item, out),
            StreamEvent::TextDelta { item_id, delta } => {
                if !delta.is_empty() {
                    let phase = item_id.and_then(|id| self.phases.get(&id).copied());
                    out.push_back(InferenceEvent::MessageDelta(MessageDelta {
                        text: delta,
                        phase,
                    }));
                }
            }
            StreamEvent::SummaryPartAdded { summary_index } => {
                // Summary parts are paragraphs; keep them apart.
                if summary_index > 0 {
                    out.push_back(InferenceEvent::ReasoningDelta(ReasoningDelta {
                        text: "\n\n".to_string(),
                    }));
                }
            }
            StreamEvent::ReasoningDelta { delta } => {
                if !delta.is_empty() {
                    out.push_back(InferenceEvent::ReasoningDelta(ReasoningDelta {
                        text: delta,
                    }));
                }
            }
            StreamEvent::ArgumentsDelta { item_id, delta } => {
                if let Some(call) = self.calls.get_mut(&item_id) {
                    call.arguments.push_str(&delta);
                    out.push_back(InferenceEvent::ToolCallArgumentsDelta(
                        ToolCallArgumentsDelta {
                            id: call.call_id.clone(),
                            name: Some(call.name.clone()),
                            delta,
                        },
                    ));
                }
            }
            StreamEvent::ArgumentsDone { item_id, arguments } => {
                if let Some(call) = self.calls.get_mut(&item_id) {
                    call.arguments = arguments;
                }
            }
            StreamEvent::Finished { response } => {
                self.finish(response, out);
                return Ok(Progress::Done);
            }
            StreamEvent::Failed { response } => {
                let (code, message) = match response.error {
                    Some(error) => (error.code, error.message),
                    None => (None, None),
                };
                return Err(reported(code, message));
            }
            StreamEvent::Error {
                code,
                message,
                error,
            } => {
                let (code, message) = match error {
                    Some(error) => (error.code.or(code), error.message.or(message)),
                    None => (code, message),
                };
                return Err(reported(code, message));
            }
            StreamEvent::Other => {}
        }
        Ok(Progress::More)
    }

    fn on_eof(&mut self, _out: &mut VecDeque<InferenceEvent>) -> Result<(), DecodeError> {
        Err(DecodeError::Truncated)
    }
}

impl ResponsesDecoder {
    fn on_item_added(&mut self, item: Item) {
        match item {
            Item::FunctionCall {
                id,
                call_id,
                name,
                arguments,
            } => {
                let key = id.unwrap_or_else(|| call_id.clone());
                self.calls.insert(
                    key,
                    PendingCall {
                        call_id,
                        name,
                        arguments,
                    },
                );
            }
            Item::Message {
                id: Some(id),
                phase,
            } => {
                let phase = match phase.as_deref() {
                    Some("commentary") => Some(MessagePhase::Commentary),
                    Some("final_answer") => Some(MessagePhase::FinalAnswer),
                    _ => None,
                };
                if let Some(phase) = phase {
                    self.phases.insert(id, phase);
                }
            }
            Item::Message { .. } | Item::Other => {}
        }
    }

    fn on_item_done(&mut self, item: Item, out: &mut VecDeque<InferenceEvent>) {
        let Item::FunctionCall {
            id,
            call_id,
            name,
            arguments,
        } = item
        else {
            return;
        };
        // The done item carries the whole arguments; fall back on what the
        // deltas assembled if a proxy left them out.
        let assembled = id
            .as_ref()
            .and_then(|id| self.calls.remove(id))
            .map(|call| call.arguments);
        let arguments = if arguments.is_empty() {
            assembled.unwrap_or_default()
        } else {
            arguments
        };
        self.complete_call(call_id, name, arguments, out);
    }

    fn complete_call(
        &mut self,
        call_id: String,
        name: String,
        arguments: String,
        out: &mut VecDeque<InferenceEvent>,
    ) {
        if !self.completed.insert(call_id.clone()) {
            return;
        }
        let arguments = if arguments.trim().is_empty() {
            "{}".to_string()
        } else {
            arguments
        };
        out.push_back(InferenceEvent::ToolCallCompleted(ToolCallCompleted {
            id: call_id,
            name,
            arguments,
        }));
    }

    fn finish(&mut self, response: ResponseBody, out: &mut VecDeque<InferenceEvent>) {
        // Calls whose `output_item.done` never came are in the final output.
        for item in response.output {
            if let Item::FunctionCall {
                call_id,
                name,
                arguments,
                ..
            } = item
            {
                self.complete_call(call_id, name, arguments, out);
            }
        }
        if let Some(usage) = response.usage {
            out.push_back(InferenceEvent::Usage(TokenUsage {
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                cached_input_tokens: usage
                    .input_tokens_details
                    .and_then(|details| details.cached_tokens)
                    .unwrap_or_default(),
                reasoning_tokens: usage
                    .output_tokens_details
                    .and_then(|details| details.reasoning_tokens)
                    .unwrap_or_default(),
            }));
        }
        let stop_reason = match response.status.as_deref() {
            Some("incomplete") => response
                .incomplete_details
                .and_then(|details| details.reason)
                .unwrap_or_else(|| "incomplete".to_string()),
            _ if !self.completed.is_empty() => "tool_calls".to_string(),
            _ => "stop".to_string(),
        };
        out.push_back(InferenceEvent::Completed(CompletionMetadata {
            stop_reason: Some(stop_reason),
            provider_response_id: response.id.or_else(|| self.response_id.clone()),
        }));
    }
}

/// Rate limits and server-side failures are worth another attempt.
fn reported(code: Option<String>, message: Option<String>) -> DecodeError {
    let retryable = matches!(
        code.as_deref(),
        Some("rate_limit_exceeded" | "server_error" | "server_is_overloaded" | "slow_down")
    );
    let message = match (code, message) {
        (Some(code), Some(message)) => format!("{message} ({code})"),
        (None, Some(message)) => message,
        (Some(code), None) => code,
        (None, None) => "the response failed without an error message".to_string(),
    };
    DecodeError::Reported { message, retryable }
}

#[cfg(test)]
mod tests {
    use roder_testkit::fake_models::ResponsesStream;

    use super::*;
    use roder_ext_inference_http::decode_chunks;

    fn decode_at(body: &[u8], cut: usize) -> (Vec<InferenceEvent>, Result<(), DecodeError>) {
        decode_chunks(
            ResponsesDecoder::default(),
            vec![body[..cut].to_vec(), body[cut..].to_vec()],
        )
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

    fn concat(events: &[InferenceEvent], reasoning: bool) -> String {
        events
            .iter()
            .filter_map(|event| match event {
                InferenceEvent::MessageDelta(delta) if !reasoning => Some(delta.text.as_str()),
                InferenceEvent::ReasoningDelta(delta) if reasoning => Some(delta.text.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_full_response_decodes_at_every_byte_cut() {
        let fragments = ["{\"cmd\":\"printf \\", "\"%s\\", "\\n\\\" ü", "\"}"];
        let stream = ResponsesStream::new("resp_9")
            .reasoning_summary(&[&["Plan", " it"], &["Then act"]])
            .message_with_phase("commentary", &["Checking ", "files"])
            .function_call("call_x", "shell", &fragments)
            .usage_details(50, 9, 20, 4)
            .completed();
        let body = stream.body();
        for cut in 0..=body.len() {
            let (events, end) = decode_at(&body, cut);
            assert_eq!(end, Ok(()), "cut at {cut}");
            assert_eq!(concat(&events, true), "Plan it\n\nThen act");
            assert_eq!(concat(&events, false), "Checking files");
            assert_eq!(
                calls(&events),
                vec![ToolCallCompleted {
                    id: "call_x".into(),
                    name: "shell".into(),
                    arguments: fragments.concat(),
                }],
                "cut at {cut}"
            );
            assert_eq!(
                events[events.len() - 2],
                InferenceEvent::Usage(TokenUsage {
                    input_tokens: 50,
                    output_tokens: 9,
                    cached_input_tokens: 20,
                    reasoning_tokens: 4,
                })
            );
            assert_eq!(
                events.last(),
                Some(&InferenceEvent::Completed(CompletionMetadata {
                    stop_reason: Some("tool_calls".into()),
                    provider_response_id: Some("resp_9".into()),
                }))
            );
        }
        let (events, _) = decode_at(&body, 0);
        assert!(events.iter().any(|event| matches!(
            event,
            InferenceEvent::MessageDelta(MessageDelta {
                phase: Some(MessagePhase::Commentary),
                ..
            })
        )));
    }

    #[test]
    fn interleaved_calls_complete_with_their_own_arguments() {
        let stream = ResponsesStream::new("resp_2")
            .function_call_added("call_a", "shell")
            .function_call_added("call_b", "read_file")
            .function_call_delta("call_b", "{\"path\":\"x\"")
            .function_call_delta("call_a", "{\"cmd\":")
            .function_call_delta("call_b", "}")
            .function_call_delta("call_a", "\"ls\"}")
            .function_call_done("call_b")
            .function_call_done("call_a")
            .completed();
        let (events, end) = decode_at(&stream.body(), 0);
        assert_eq!(end, Ok(()));
        let calls = calls(&events);
        assert_eq!(calls.len(), 2);
        assert_eq!(
            (calls[0].id.as_str(), calls[0].arguments.as_str()),
            ("call_b", "{\"path\":\"x\"}")
        );
        assert_eq!(
            (calls[1].id.as_str(), calls[1].arguments.as_str()),
            ("call_a", "{\"cmd\":\"ls\"}")
        );
    }

    #[test]
    fn incomplete_responses_report_their_reason() {
        let stream = ResponsesStream::new("r")
            .message(&["partial"])
            .incomplete("max_output_tokens");
        let (events, end) = decode_at(&stream.body(), 0);
        assert_eq!(end, Ok(()));
        assert!(matches!(
            events.last(),
            Some(InferenceEvent::Completed(CompletionMetadata { stop_reason: Some(reason), .. }))
                if reason == "max_output_tokens"
        ));
    }

    #[test]
    fn failures_and_truncation() {
        let failed = ResponsesStream::new("r").failed("server_error", "boom");
        let (_, end) = decode_at(&failed.body(), 0);
        assert_eq!(
            end,
            Err(DecodeError::Reported {
                message: "boom (server_error)".into(),
                retryable: true,
            })
        );
        let error = ResponsesStream::new("r").error("invalid_prompt", "no");
        let (_, end) = decode_at(&error.body(), 0);
        assert!(matches!(
            end,
            Err(DecodeError::Reported {
                retryable: false,
                ..
            })
        ));
        let cut = ResponsesStream::new("r").message(&["x"]).unfinished();
        let (_, end) = decode_at(&cut.body(), 0);
        assert_eq!(end, Err(DecodeError::Truncated));
    }
}
