//! Reads Responses API stream events into inference events.
//!
//! Function calls are output items: `output_item.added` names the call,
//! `function_call_arguments.delta` events carry argument fragments keyed by
//! item id (several calls may interleave), and `output_item.done` carries
//! the whole call, which is when `ToolCallCompleted` is sent. A terminal
//! `response.completed` or `response.incomplete` ends the response;
//! `response.failed` and `error` events are provider errors.
//!
//! Message text streams as `output_text.delta` (refusals as
//! `refusal.delta`), each delta tagged with its item's `phase`
//! (`commentary` or `final_answer`). The finished text of a content part
//! (`output_text.done`, `refusal.done`, the parts of `output_item.done`,
//! and the messages of `response.completed`) is authoritative: whatever of
//! it was not streamed as deltas (a server that sends only the finished
//! item, a stream with deltas left out) is sent then as one more delta, and
//! nothing is sent twice.
//!
//! A finished reasoning item (`output_item.done` with type `reasoning`, or
//! one only in `response.completed`'s output) is sent once as a
//! `ReasoningItem`, after its summary deltas: its summary as text and, as
//! `provider_data`, the item as the API takes it back
//! (`{"type": "reasoning", "id", "summary", "encrypted_content"}`), so the
//! next request (`request.rs`) can carry the model's reasoning forward.
//!
//! Stop reasons use the Chat Completions words, so both engines report
//! alike: `tool_calls` when calls were made, else `stop`; `refusal` when
//! the model refused; an incomplete response reports its reason
//! (`max_output_tokens`, `content_filter`). A call the output limit cut
//! off (item status `incomplete`, or arguments that are not whole JSON in
//! an incomplete response) is never completed: its argument deltas were
//! sent, and the runtime reports it as truncated.

use std::collections::{HashMap, HashSet, VecDeque};

use roder_api::inference::{
    CompletionMetadata, InferenceEvent, MessageDelta, MessagePhase, ReasoningDelta, ReasoningItem,
    TokenUsage, ToolCallArgumentsDelta, ToolCallCompleted,
};
use roder_ext_inference_http::{DecodeError, Decoder, Event, FailureReport, Progress, snippet};
use serde::Deserialize;
use serde_json::{Map, Value, json};

#[derive(Debug, Clone, Default)]
pub(crate) struct ResponsesDecoder {
    response_id: Option<String>,
    /// Calls by item key.
    calls: HashMap<String, PendingCall>,
    /// Item ids seen with an output index, to the key of that index.
    keys: HashMap<String, String>,
    /// Call ids already completed.
    completed: HashSet<String>,
    /// Phases of message items by item key. (An item's key is its output
    /// index where the event gives one, since some servers, GitHub
    /// Copilot's among them, send a new item id with every event.)
    phases: HashMap<String, MessagePhase>,
    /// Text sent so far per (item key, content index).
    sent: HashMap<(String, u64), String>,
    /// Keys of reasoning items already sent as `ReasoningItem`.
    reasoning_sent: HashSet<String>,
    /// Refusal text was sent.
    refused: bool,
    /// Reasoning text was sent.
    reasoned: bool,
    /// A new summary part began after earlier reasoning: the next
    /// reasoning text starts a new paragraph.
    separate: bool,
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
    ItemAdded {
        item: Item,
        output_index: Option<u64>,
    },
    #[serde(rename = "response.output_item.done")]
    ItemDone {
        item: Item,
        output_index: Option<u64>,
    },
    #[serde(rename = "response.output_text.delta")]
    TextDelta {
        item_id: Option<String>,
        output_index: Option<u64>,
        #[serde(default)]
        content_index: u64,
        delta: String,
    },
    #[serde(rename = "response.refusal.delta")]
    RefusalDelta {
        item_id: Option<String>,
        output_index: Option<u64>,
        #[serde(default)]
        content_index: u64,
        delta: String,
    },
    #[serde(rename = "response.output_text.done")]
    TextDone {
        item_id: Option<String>,
        output_index: Option<u64>,
        #[serde(default)]
        content_index: u64,
        text: String,
    },
    #[serde(rename = "response.refusal.done")]
    RefusalDone {
        item_id: Option<String>,
        output_index: Option<u64>,
        #[serde(default)]
        content_index: u64,
        refusal: String,
    },
    #[serde(rename = "response.reasoning_summary_part.added")]
    SummaryPartAdded {},
    #[serde(
        rename = "response.reasoning_summary_text.delta",
        alias = "response.reasoning_text.delta"
    )]
    ReasoningDelta { delta: String },
    #[serde(rename = "response.function_call_arguments.delta")]
    ArgumentsDelta {
        item_id: Option<String>,
        output_index: Option<u64>,
        delta: String,
    },
    #[serde(rename = "response.function_call_arguments.done")]
    ArgumentsDone {
        item_id: Option<String>,
        output_index: Option<u64>,
        arguments: String,
    },
    #[serde(rename = "response.completed", alias = "response.incomplete")]
    Finished { response: ResponseBody },
    #[serde(rename = "response.failed")]
    Failed { response: ResponseBody },
    #[serde(rename = "error")]
    Error {
        code: Option<Value>,
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
        status: Option<String>,
    },
    #[serde(rename = "message")]
    Message {
        id: Option<String>,
        phase: Option<String>,
        #[serde(default)]
        content: Vec<ContentPart>,
    },
    #[serde(rename = "reasoning")]
    Reasoning {
        id: Option<String>,
        #[serde(default)]
        summary: Vec<Value>,
        encrypted_content: Option<String>,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type")]
enum ContentPart {
    #[serde(rename = "output_text")]
    Text {
        #[serde(default)]
        text: String,
    },
    #[serde(rename = "refusal")]
    Refusal {
        #[serde(default)]
        refusal: String,
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
    #[serde(rename = "type")]
    kind: Option<String>,
    code: Option<Value>,
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

fn phase_of(phase: Option<&str>) -> Option<MessagePhase> {
    match phase {
        Some("commentary") => Some(MessagePhase::Commentary),
        Some("final_answer") => Some(MessagePhase::FinalAnswer),
        _ => None,
    }
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
            StreamEvent::ItemAdded { item, output_index } => self.on_item_added(item, output_index),
            StreamEvent::ItemDone { item, output_index } => {
                self.on_item_done(item, output_index, out)
            }
            StreamEvent::TextDelta {
                item_id,
                output_index,
                content_index,
                delta,
            } => {
                let key = self.item_key(item_id.as_deref(), output_index);
                self.send_text(key, content_index, delta, out);
            }
            StreamEvent::RefusalDelta {
                item_id,
                output_index,
                content_index,
                delta,
            } => {
                self.refused = true;
                let key = self.item_key(item_id.as_deref(), output_index);
                self.send_text(key, content_index, delta, out);
            }
            StreamEvent::TextDone {
                item_id,
                output_index,
                content_index,
                text,
            } => {
                let key = self.item_key(item_id.as_deref(), output_index);
                self.catch_up(key, content_index, &text, out);
            }
            StreamEvent::RefusalDone {
                item_id,
                output_index,
                content_index,
                refusal,
            } => {
                self.refused = true;
                let key = self.item_key(item_id.as_deref(), output_index);
                self.catch_up(key, content_index, &refusal, out);
            }
            StreamEvent::SummaryPartAdded {} => {
                // Summary parts (of one reasoning item or several) are
                // paragraphs; keep them apart.
                self.separate = self.reasoned;
            }
            StreamEvent::ReasoningDelta { delta } => {
                if !delta.is_empty() {
                    if std::mem::take(&mut self.separate) {
                        out.push_back(InferenceEvent::ReasoningDelta(ReasoningDelta {
                            text: "\n\n".to_string(),
                        }));
                    }
                    self.reasoned = true;
                    out.push_back(InferenceEvent::ReasoningDelta(ReasoningDelta {
                        text: delta,
                    }));
                }
            }
            StreamEvent::ArgumentsDelta {
                item_id,
                output_index,
                delta,
            } => {
                let key = self.item_key(item_id.as_deref(), output_index);
                if let Some(call) = self.calls.get_mut(&key) {
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
            StreamEvent::ArgumentsDone {
                item_id,
                output_index,
                arguments,
            } => {
                let key = self.item_key(item_id.as_deref(), output_index);
                if let Some(call) = self.calls.get_mut(&key) {
                    call.arguments = arguments;
                }
            }
            StreamEvent::Finished { response } => {
                self.finish(response, out);
                return Ok(Progress::Done);
            }
            StreamEvent::Failed { response } => {
                return Err(match response.error {
                    Some(error) => reported(error),
                    None => reported(ErrorBody {
                        kind: None,
                        code: None,
                        message: None,
                    }),
                });
            }
            StreamEvent::Error {
                code,
                message,
                error,
            } => {
                let error = match error {
                    Some(error) => ErrorBody {
                        kind: error.kind,
                        code: error.code.or(code),
                        message: error.message.or(message),
                    },
                    None => ErrorBody {
                        kind: None,
                        code,
                        message,
                    },
                };
                return Err(reported(error));
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
    /// The key an item's calls, text and phase are kept under: its output
    /// index (`#3`), else the key its id was last seen with, else its id,
    /// else "" (a server that sends neither, one item at a time).
    fn item_key(&mut self, item_id: Option<&str>, output_index: Option<u64>) -> String {
        match (item_id, output_index) {
            (Some(id), Some(index)) => {
                let key = format!("#{index}");
                self.keys.insert(id.to_string(), key.clone());
                key
            }
            (None, Some(index)) => format!("#{index}"),
            (Some(id), None) => self.keys.get(id).cloned().unwrap_or_else(|| id.to_string()),
            (None, None) => String::new(),
        }
    }

    fn on_item_added(&mut self, item: Item, output_index: Option<u64>) {
        match item {
            Item::FunctionCall {
                id,
                call_id,
                name,
                arguments,
                ..
            } => {
                let key = self.item_key(Some(id.as_deref().unwrap_or(&call_id)), output_index);
                self.calls.insert(
                    key,
                    PendingCall {
                        call_id,
                        name,
                        arguments,
                    },
                );
            }
            Item::Message { id, phase, .. } => {
                let key = self.item_key(id.as_deref(), output_index);
                if let Some(phase) = phase_of(phase.as_deref()) {
                    self.phases.insert(key, phase);
                }
            }
            Item::Reasoning { .. } | Item::Other => {}
        }
    }

    fn on_item_done(
        &mut self,
        item: Item,
        output_index: Option<u64>,
        out: &mut VecDeque<InferenceEvent>,
    ) {
        match item {
            Item::FunctionCall {
                id,
                call_id,
                name,
                arguments,
                status,
            } => {
                // The done item carries the whole arguments; fall back on
                // what the deltas assembled if a proxy left them out.
                let key = self.item_key(Some(id.as_deref().unwrap_or(&call_id)), output_index);
                let assembled = self.calls.remove(&key).map(|call| call.arguments);
                let arguments = if arguments.is_empty() {
                    assembled.unwrap_or_default()
                } else {
                    arguments
                };
                if status.as_deref() == Some("incomplete") {
                    // Cut off by the output limit: never run half a call.
                    return;
                }
                self.complete_call(call_id, name, arguments, out);
            }
            Item::Message { id, phase, content } => {
                let key = self.item_key(id.as_deref(), output_index);
                self.message_done(key, phase.as_deref(), content, out);
            }
            Item::Reasoning {
                id,
                summary,
                encrypted_content,
            } => {
                let key = self.item_key(id.as_deref(), output_index);
                self.reasoning_done(key, id, summary, encrypted_content, out);
            }
            Item::Other => {}
        }
    }

    /// A finished reasoning item, sent once with what the API needs back.
    fn reasoning_done(
        &mut self,
        key: String,
        id: Option<String>,
        summary: Vec<Value>,
        encrypted_content: Option<String>,
        out: &mut VecDeque<InferenceEvent>,
    ) {
        if !key.is_empty() && !self.reasoning_sent.insert(key) {
            return;
        }
        let text = summary
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .filter(|text| !text.is_empty())
            .collect::<Vec<_>>()
            .join("\n\n");
        let mut item = Map::new();
        item.insert("type".into(), json!("reasoning"));
        if let Some(id) = id {
            item.insert("id".into(), json!(id));
        }
        item.insert("summary".into(), Value::Array(summary));
        if let Some(encrypted) = encrypted_content {
            item.insert("encrypted_content".into(), json!(encrypted));
        }
        out.push_back(InferenceEvent::ReasoningItem(ReasoningItem {
            text,
            provider_data: Value::Object(item),
        }));
    }

    /// A finished message: sends what its parts hold beyond what streamed.
    fn message_done(
        &mut self,
        key: String,
        phase: Option<&str>,
        content: Vec<ContentPart>,
        out: &mut VecDeque<InferenceEvent>,
    ) {
        if let Some(phase) = phase_of(phase) {
            self.phases.entry(key.clone()).or_insert(phase);
        }
        for (index, part) in (0u64..).zip(content) {
            match part {
                ContentPart::Text { text } => self.catch_up(key.clone(), index, &text, out),
                ContentPart::Refusal { refusal } => {
                    self.refused = true;
                    self.catch_up(key.clone(), index, &refusal, out);
                }
                ContentPart::Other => {}
            }
        }
        if key.is_empty() {
            // Items without id or index share the key: start the next one
            // afresh.
            self.sent.retain(|(item, _), _| !item.is_empty());
        }
    }

    fn send_text(
        &mut self,
        key: String,
        content_index: u64,
        text: String,
        out: &mut VecDeque<InferenceEvent>,
    ) {
        if text.is_empty() {
            return;
        }
        let phase = self.phases.get(&key).copied();
        self.sent
            .entry((key, content_index))
            .or_default()
            .push_str(&text);
        out.push_back(InferenceEvent::MessageDelta(MessageDelta { text, phase }));
    }

    /// `full` is the finished text of a content part: sends the part of it
    /// that was not streamed. A final text that does not continue what was
    /// streamed (the stream and the finished item disagree) is sent whole:
    /// the finished item is the API's last word, and what streamed cannot
    /// be taken back.
    fn catch_up(
        &mut self,
        key: String,
        content_index: u64,
        full: &str,
        out: &mut VecDeque<InferenceEvent>,
    ) {
        let sent = self
            .sent
            .get(&(key.clone(), content_index))
            .map(String::as_str)
            .unwrap_or("");
        let rest = match full.strip_prefix(sent) {
            Some(rest) => rest.to_string(),
            None => full.to_string(),
        };
        if !rest.is_empty() {
            if !full.starts_with(sent) {
                // Start over, so a later copy of the same finished text
                // (`output_item.done` after `output_text.done`) is not sent
                // again.
                self.sent.remove(&(key.clone(), content_index));
            }
            self.send_text(key, content_index, rest, out);
        }
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
        let incomplete = response.status.as_deref() == Some("incomplete");
        // Items whose `output_item.done` never came are in the final output.
        for (index, item) in (0u64..).zip(response.output) {
            match item {
                Item::FunctionCall {
                    call_id,
                    name,
                    arguments,
                    status,
                    ..
                } => {
                    let cut_off = status.as_deref() == Some("incomplete")
                        || (incomplete && serde_json::from_str::<Value>(&arguments).is_err());
                    if !cut_off {
                        self.complete_call(call_id, name, arguments, out);
                    }
                }
                Item::Message { id, phase, content } => {
                    // Its position in the output is its output index,
                    // unless its id was seen with another.
                    let key = match id.as_deref().and_then(|id| self.keys.get(id)) {
                        Some(key) => key.clone(),
                        None => format!("#{index}"),
                    };
                    self.message_done(key, phase.as_deref(), content, out);
                }
                Item::Reasoning {
                    id,
                    summary,
                    encrypted_content,
                } => {
                    let key = match id.as_deref().and_then(|id| self.keys.get(id)) {
                        Some(key) => key.clone(),
                        None => format!("#{index}"),
                    };
                    self.reasoning_done(key, id, summary, encrypted_content, out);
                }
                Item::Other => {}
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
        let stop_reason = if incomplete {
            response
                .incomplete_details
                .and_then(|details| details.reason)
                .unwrap_or_else(|| "incomplete".to_string())
        } else if self.refused {
            "refusal".to_string()
        } else if !self.completed.is_empty() {
            "tool_calls".to_string()
        } else {
            "stop".to_string()
        };
        out.push_back(InferenceEvent::Completed(CompletionMetadata {
            stop_reason: Some(stop_reason),
            provider_response_id: response.id.or_else(|| self.response_id.clone()),
        }));
    }
}

/// A `response.failed` or `error` event: a context overflow
/// (`context_length_exceeded`) ends the request for the runtime to compact;
/// otherwise [`roder_ext_inference_http::classify`] decides whether it is
/// worth another attempt (`insufficient_quota` is not, a rate limit is,
/// a rate limit the request exceeds outright gets one more try).
fn reported(error: ErrorBody) -> DecodeError {
    let code = match &error.code {
        Some(Value::String(code)) => Some(code.clone()),
        _ => None,
    };
    let message = match (&code, error.message.clone()) {
        (Some(code), Some(message)) => format!("{message} ({code})"),
        (None, Some(message)) => message,
        (Some(code), None) => code.clone(),
        (None, None) => "the response failed without an error message".to_string(),
    };
    let report = FailureReport {
        status: error
            .code
            .as_ref()
            .and_then(Value::as_u64)
            .and_then(|status| u16::try_from(status).ok()),
        kind: error.kind.as_deref(),
        code: code.as_deref(),
        message: error.message.as_deref().unwrap_or(&message),
        should_retry: None,
    };
    roder_ext_inference_http::reported(report, message.clone())
}

#[cfg(test)]
mod tests {
    use roder_testkit::fake_models::ResponsesStream;

    use super::*;
    use roder_ext_inference_http::{RetryClass, decode_chunks};

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

    fn stop_reason(events: &[InferenceEvent]) -> Option<String> {
        match events.last() {
            Some(InferenceEvent::Completed(metadata)) => metadata.stop_reason.clone(),
            _ => None,
        }
    }

    #[test]
    fn text_only_in_the_finished_item_is_sent_once() {
        let stream = ResponsesStream::new("r")
            .message_done_only("whole answer")
            .completed();
        let (events, end) = decode_at(&stream.body(), 0);
        assert_eq!(end, Ok(()));
        assert_eq!(concat(&events, false), "whole answer");
        // Deltas, then `output_text.done`, `output_item.done` and
        // `response.completed` with the same text: no copy.
        let stream = ResponsesStream::new("r").message(&["a", "b"]).completed();
        let (events, _) = decode_at(&stream.body(), 0);
        assert_eq!(concat(&events, false), "ab");
    }

    #[test]
    fn finished_text_completes_what_the_deltas_left_out() {
        let stream = ResponsesStream::new("r")
            .raw(
                "response.output_item.added",
                serde_json::json!({"output_index": 0, "item": {"id": "m", "type": "message",
                    "phase": "final_answer", "content": []}}),
            )
            .raw(
                "response.output_text.delta",
                serde_json::json!({"item_id": "m", "output_index": 0, "content_index": 0,
                    "delta": "Here are"}),
            )
            .raw(
                "response.output_text.done",
                serde_json::json!({"item_id": "m", "output_index": 0, "content_index": 0,
                    "text": "Here are the headlines."}),
            )
            .raw(
                "response.output_item.done",
                serde_json::json!({"output_index": 0, "item": {"id": "m", "type": "message",
                    "phase": "final_answer",
                    "content": [{"type": "output_text", "text": "Here are the headlines."}]}}),
            )
            .completed();
        let (events, _) = decode_at(&stream.body(), 0);
        assert_eq!(concat(&events, false), "Here are the headlines.");
        assert!(events.iter().all(|event| !matches!(
            event,
            InferenceEvent::MessageDelta(MessageDelta { phase, .. })
                if *phase != Some(MessagePhase::FinalAnswer)
        )));
    }

    #[test]
    fn items_are_matched_by_output_index_when_ids_rotate() {
        let stream = ResponsesStream::new("r")
            .raw(
                "response.output_text.delta",
                serde_json::json!({"item_id": "id-1", "output_index": 0, "content_index": 0,
                    "delta": "one"}),
            )
            .raw(
                "response.output_item.done",
                serde_json::json!({"output_index": 0, "item": {"id": "id-2", "type": "message",
                    "content": [{"type": "output_text", "text": "one"}]}}),
            )
            .completed();
        let (events, _) = decode_at(&stream.body(), 0);
        assert_eq!(concat(&events, false), "one");
    }

    #[test]
    fn a_finished_text_that_disagrees_with_the_deltas_is_sent_whole_once() {
        let stream = ResponsesStream::new("r")
            .raw(
                "response.output_text.delta",
                serde_json::json!({"item_id": "m", "output_index": 0, "delta": "XXXX"}),
            )
            .raw(
                "response.output_text.done",
                serde_json::json!({"item_id": "m", "output_index": 0, "text": "Final."}),
            )
            .raw(
                "response.output_item.done",
                serde_json::json!({"output_index": 0, "item": {"id": "m", "type": "message",
                    "content": [{"type": "output_text", "text": "Final."}]}}),
            )
            .completed();
        let (events, _) = decode_at(&stream.body(), 0);
        assert_eq!(concat(&events, false), "XXXXFinal.");
    }

    #[test]
    fn a_refusal_streams_as_text_and_says_refusal() {
        let stream = ResponsesStream::new("r")
            .refusal(&["I can't", " help with that."])
            .completed();
        let (events, end) = decode_at(&stream.body(), 0);
        assert_eq!(end, Ok(()));
        assert_eq!(concat(&events, false), "I can't help with that.");
        assert_eq!(stop_reason(&events).as_deref(), Some("refusal"));
    }

    #[test]
    fn a_call_cut_off_by_the_output_limit_is_never_completed() {
        let stream = ResponsesStream::new("r")
            .function_call("call_a", "shell", &["{\"cmd\":\"ls\"}"])
            .function_call_added("call_b", "write_file")
            .function_call_delta("call_b", "{\"path\":\"a\",\"te")
            .incomplete("max_output_tokens");
        let (events, end) = decode_at(&stream.body(), 0);
        assert_eq!(end, Ok(()));
        let completed = calls(&events);
        assert_eq!(completed.len(), 1, "{completed:?}");
        assert_eq!(completed[0].id, "call_a");
        assert!(events.iter().any(|event| matches!(
            event,
            InferenceEvent::ToolCallArgumentsDelta(delta) if delta.id == "call_b"
        )));
        assert_eq!(stop_reason(&events).as_deref(), Some("max_output_tokens"));
    }

    fn reasoning_items(events: &[InferenceEvent]) -> Vec<ReasoningItem> {
        events
            .iter()
            .filter_map(|event| match event {
                InferenceEvent::ReasoningItem(item) => Some(item.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn finished_reasoning_items_are_sent_once_with_their_encrypted_content() {
        let stream = ResponsesStream::new("r")
            .reasoning_item(&[&["Plan"], &["Act"]], Some("gAAAA-enc=="))
            .function_call("call_1", "shell", &["{}"])
            .completed();
        let body = stream.body();
        for cut in 0..=body.len() {
            let (events, end) = decode_at(&body, cut);
            assert_eq!(end, Ok(()));
            let items = reasoning_items(&events);
            assert_eq!(
                items,
                vec![ReasoningItem {
                    text: "Plan\n\nAct".into(),
                    provider_data: json!({"type": "reasoning", "id": "rs_0",
                        "summary": [{"type": "summary_text", "text": "Plan"},
                                    {"type": "summary_text", "text": "Act"}],
                        "encrypted_content": "gAAAA-enc=="}),
                }],
                "cut at {cut}"
            );
            // After its deltas, before the call.
            let at = |wanted: fn(&InferenceEvent) -> bool| events.iter().position(wanted);
            assert!(
                at(|e| matches!(e, InferenceEvent::ReasoningDelta(_)))
                    < at(|e| matches!(e, InferenceEvent::ReasoningItem(_)))
            );
        }
        // An item only in `response.completed`'s output is sent too.
        let stream = ResponsesStream::new("r")
            .raw(
                "response.completed",
                json!({"response": {"id": "r", "status": "completed", "output": [
                    {"type": "reasoning", "id": "rs_9", "summary": [],
                     "encrypted_content": "e"}]}}),
            )
            .unfinished();
        let (events, _) = decode_at(&stream.body(), 0);
        let items = reasoning_items(&events);
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].provider_data["encrypted_content"], json!("e"));
        assert_eq!(items[0].text, "");
    }

    #[test]
    fn summaries_of_separate_reasoning_items_are_separate_paragraphs() {
        let stream = ResponsesStream::new("r")
            .reasoning_summary(&[&["first"]])
            .reasoning_summary(&[&["second"]])
            .message(&["ok"])
            .completed();
        let (events, _) = decode_at(&stream.body(), 0);
        assert_eq!(concat(&events, true), "first\n\nsecond");
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_event_data_never_panics(
            data in "\\PC{0,200}",
            kind in proptest::sample::select(vec![
                "response.created", "response.output_item.added", "response.output_item.done",
                "response.output_text.delta", "response.output_text.done",
                "response.refusal.delta", "response.refusal.done",
                "response.function_call_arguments.delta", "response.completed",
                "response.incomplete", "response.failed", "error", "unknown",
            ]),
        ) {
            let body = format!("event: {kind}\ndata: {data}\n\n");
            let _ = decode_at(body.as_bytes(), 0);
            let json = serde_json::json!({"type": kind, "delta": data, "text": data,
                "item_id": data, "output_index": 0});
            let body = format!("data: {json}\n\n");
            let _ = decode_at(body.as_bytes(), 0);
        }

        #[test]
        fn streamed_and_finished_text_add_up_to_the_finished_text_once(
            text in "\\PC{0,40}",
            streamed in 0usize..=40,
            pieces in 1usize..5,
        ) {
            let chars: Vec<char> = text.chars().collect();
            let streamed = streamed.min(chars.len());
            let head: String = chars.iter().take(streamed).collect();
            let mut stream = ResponsesStream::new("r").raw(
                "response.output_item.added",
                serde_json::json!({"output_index": 0, "item": {"id": "m", "type": "message",
                    "content": []}}),
            );
            let size = head.chars().count().div_ceil(pieces).max(1);
            let head_chars: Vec<char> = head.chars().collect();
            for piece in head_chars.chunks(size) {
                let delta: String = piece.iter().collect();
                stream = stream.raw(
                    "response.output_text.delta",
                    serde_json::json!({"item_id": "m", "output_index": 0, "content_index": 0,
                        "delta": delta}),
                );
            }
            let body = stream
                .raw(
                    "response.output_text.done",
                    serde_json::json!({"item_id": "m", "output_index": 0, "content_index": 0,
                        "text": text}),
                )
                .raw(
                    "response.output_item.done",
                    serde_json::json!({"output_index": 0, "item": {"id": "m", "type": "message",
                        "content": [{"type": "output_text", "text": text}]}}),
                )
                .completed()
                .body();
            let (events, end) = decode_at(&body, 0);
            proptest::prop_assert_eq!(end, Ok(()));
            proptest::prop_assert_eq!(concat(&events, false), text);
        }
    }

    #[test]
    fn failures_and_truncation() {
        let failed = ResponsesStream::new("r").failed("server_error", "boom");
        let (_, end) = decode_at(&failed.body(), 0);
        assert_eq!(
            end,
            Err(DecodeError::Reported {
                message: "boom (server_error)".into(),
                retry: RetryClass::Transient,
            })
        );
        let error = ResponsesStream::new("r").error("invalid_prompt", "no");
        let (_, end) = decode_at(&error.body(), 0);
        assert!(matches!(
            end,
            Err(DecodeError::Reported {
                retry: RetryClass::Permanent,
                ..
            })
        ));
        let cut = ResponsesStream::new("r").message(&["x"]).unfinished();
        let (_, end) = decode_at(&cut.body(), 0);
        assert_eq!(end, Err(DecodeError::Truncated));
        let overflow = ResponsesStream::new("r").failed(
            "context_length_exceeded",
            "Your input exceeds the context window of this model.",
        );
        let (_, end) = decode_at(&overflow.body(), 0);
        assert_eq!(
            end,
            Err(DecodeError::ContextOverflow {
                message: "Your input exceeds the context window of this model.".into(),
            })
        );
    }
}
