//! Reads Messages API stream events into inference events.
//!
//! A response is `message_start`, then content blocks by index
//! (`content_block_start`, `_delta`s, `_stop`), then `message_delta` with
//! the stop reason and the final output token count, then `message_stop`.
//! Text and thinking stream as deltas; a `tool_use` block's input arrives as
//! `input_json_delta` fragments split anywhere and is complete at its
//! `content_block_stop`. Usage is held back until `message_stop` so that a
//! retried attempt can never count tokens twice. Stop reasons are the
//! API's own (`end_turn`, `tool_use`, `max_tokens`, `refusal`, ...).
//!
//! A tool use whose input is not whole JSON when its block stops waits for
//! the stop reason: with `max_tokens` the output limit cut it off, so it is
//! never completed (its argument deltas were sent; the runtime reports the
//! call as truncated); otherwise it is completed as sent and the runtime
//! answers the malformed input. A tool use still open at `message_stop` is
//! completed only if its input is whole JSON. A refusal that streamed no
//! text of its own sends the API's `stop_details.explanation` as its text.
//!
//! A thinking or redacted thinking block, at its `content_block_stop`, is
//! sent as a `ReasoningItem` whose `provider_data` is the block as the API
//! wants it back (`{"type": "thinking", "thinking", "signature"}` or
//! `{"type": "redacted_thinking", "data"}`): the runtime persists it with
//! the transcript and `request.rs` sends it back. An `error` event saying
//! the prompt is too long is a context overflow, not a failure to retry.

use std::collections::{BTreeMap, VecDeque};

use roder_api::inference::{
    CompletionMetadata, InferenceEvent, MessageDelta, ReasoningDelta, ReasoningItem, TokenUsage,
    ToolCallArgumentsDelta, ToolCallCompleted,
};
use roder_ext_inference_http::{DecodeError, Decoder, Event, FailureReport, Progress, snippet};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Debug, Clone, Default)]
pub(crate) struct MessagesDecoder {
    message_id: Option<String>,
    blocks: BTreeMap<u64, Block>,
    stop_reason: Option<String>,
    usage: Usage,
    /// Reasoning text was streamed (the next thinking block starts a new
    /// paragraph).
    reasoned: bool,
    /// Tool uses whose input did not parse when their block stopped.
    unparsed: Vec<ToolCallCompleted>,
    /// Message text was sent.
    texted: bool,
    /// `stop_details.explanation` of a refusal.
    explanation: Option<String>,
}

#[derive(Debug, Clone)]
enum Block {
    Text,
    ToolUse {
        id: String,
        name: String,
        json: String,
        initial: Value,
    },
    Thinking {
        text: String,
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StreamEvent {
    MessageStart {
        message: MessageStart,
    },
    ContentBlockStart {
        index: u64,
        content_block: ContentBlock,
    },
    ContentBlockDelta {
        index: u64,
        delta: BlockDelta,
    },
    ContentBlockStop {
        index: u64,
    },
    MessageDelta {
        delta: MessageDeltaBody,
        usage: Option<Usage>,
    },
    MessageStop,
    Ping,
    Error {
        error: ErrorBody,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct MessageStart {
    id: Option<String>,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ContentBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        #[serde(default)]
        data: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type")]
enum BlockDelta {
    #[serde(rename = "text_delta")]
    Text { text: String },
    #[serde(rename = "input_json_delta")]
    InputJson { partial_json: String },
    #[serde(rename = "thinking_delta")]
    Thinking { thinking: String },
    #[serde(rename = "signature_delta")]
    Signature { signature: String },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct MessageDeltaBody {
    stop_reason: Option<String>,
    stop_details: Option<StopDetails>,
}

#[derive(Deserialize)]
struct StopDetails {
    explanation: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct Usage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    output_tokens_details: Option<OutputDetails>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct OutputDetails {
    thinking_tokens: Option<u64>,
}

impl Usage {
    /// `message_delta` counts are cumulative: later values replace earlier.
    fn update(&mut self, newer: Usage) {
        self.input_tokens = newer.input_tokens.or(self.input_tokens);
        self.output_tokens = newer.output_tokens.or(self.output_tokens);
        self.cache_read_input_tokens = newer
            .cache_read_input_tokens
            .or(self.cache_read_input_tokens);
        self.cache_creation_input_tokens = newer
            .cache_creation_input_tokens
            .or(self.cache_creation_input_tokens);
        self.output_tokens_details = newer
            .output_tokens_details
            .or(self.output_tokens_details.take());
    }

    /// `input_tokens` counts the whole prompt, cached parts included, as
    /// OpenAI's does (the API's own `input_tokens` excludes cache reads and
    /// writes).
    fn to_token_usage(&self) -> TokenUsage {
        let cache_read = self.cache_read_input_tokens.unwrap_or_default();
        TokenUsage {
            input_tokens: self.input_tokens.unwrap_or_default()
                + cache_read
                + self.cache_creation_input_tokens.unwrap_or_default(),
            output_tokens: self.output_tokens.unwrap_or_default(),
            cached_input_tokens: cache_read,
            reasoning_tokens: self
                .output_tokens_details
                .as_ref()
                .and_then(|details| details.thinking_tokens)
                .unwrap_or_default(),
        }
    }
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<String>,
}

impl Decoder for MessagesDecoder {
    fn on_event(
        &mut self,
        event: &Event,
        out: &mut VecDeque<InferenceEvent>,
    ) -> Result<Progress, DecodeError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(Progress::More);
        }
        let parsed: StreamEvent = serde_json::from_str(data).map_err(|error| {
            DecodeError::Malformed(format!("{error} in event {}", snippet(data)))
        })?;
        match parsed {
            StreamEvent::MessageStart { message } => {
                self.message_id = message.id;
                if let Some(usage) = message.usage {
                    self.usage.update(usage);
                }
            }
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => self.on_block_start(index, content_block, out),
            StreamEvent::ContentBlockDelta { index, delta } => self.on_delta(index, delta, out),
            StreamEvent::ContentBlockStop { index } => self.on_block_stop(index, out),
            StreamEvent::MessageDelta { delta, usage } => {
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
                if let Some(explanation) =
                    delta.stop_details.and_then(|details| details.explanation)
                {
                    self.explanation = Some(explanation);
                }
                if let Some(usage) = usage {
                    self.usage.update(usage);
                }
            }
            StreamEvent::MessageStop => {
                self.finish(out);
                return Ok(Progress::Done);
            }
            StreamEvent::Ping | StreamEvent::Other => {}
            StreamEvent::Error { error } => return Err(reported(error)),
        }
        Ok(Progress::More)
    }

    fn on_eof(&mut self, _out: &mut VecDeque<InferenceEvent>) -> Result<(), DecodeError> {
        Err(DecodeError::Truncated)
    }
}

impl MessagesDecoder {
    fn on_block_start(
        &mut self,
        index: u64,
        block: ContentBlock,
        out: &mut VecDeque<InferenceEvent>,
    ) {
        let block = match block {
            ContentBlock::Text { text } => {
                if !text.is_empty() {
                    self.texted = true;
                    out.push_back(InferenceEvent::MessageDelta(MessageDelta {
                        text,
                        phase: None,
                    }));
                }
                Block::Text
            }
            ContentBlock::ToolUse { id, name, input } => Block::ToolUse {
                id,
                name,
                json: String::new(),
                initial: input,
            },
            ContentBlock::Thinking {
                thinking,
                signature,
            } => {
                // Separate the text of consecutive thinking blocks.
                if self.reasoned {
                    self.reason("\n\n".to_string(), out);
                }
                if !thinking.is_empty() {
                    self.reason(thinking.clone(), out);
                }
                Block::Thinking {
                    text: thinking,
                    signature,
                }
            }
            ContentBlock::RedactedThinking { data } => Block::RedactedThinking { data },
            ContentBlock::Other => Block::Other,
        };
        self.blocks.insert(index, block);
    }

    fn reason(&mut self, text: String, out: &mut VecDeque<InferenceEvent>) {
        self.reasoned = true;
        out.push_back(InferenceEvent::ReasoningDelta(ReasoningDelta { text }));
    }

    fn on_delta(&mut self, index: u64, delta: BlockDelta, out: &mut VecDeque<InferenceEvent>) {
        let Some(block) = self.blocks.get_mut(&index) else {
            return;
        };
        let mut reasoning = None;
        match (block, delta) {
            (Block::Text, BlockDelta::Text { text }) if !text.is_empty() => {
                self.texted = true;
                out.push_back(InferenceEvent::MessageDelta(MessageDelta {
                    text,
                    phase: None,
                }));
            }
            (Block::ToolUse { id, name, json, .. }, BlockDelta::InputJson { partial_json })
                if !partial_json.is_empty() =>
            {
                json.push_str(&partial_json);
                out.push_back(InferenceEvent::ToolCallArgumentsDelta(
                    ToolCallArgumentsDelta {
                        id: id.clone(),
                        name: Some(name.clone()),
                        delta: partial_json,
                    },
                ));
            }
            (Block::Thinking { text, .. }, BlockDelta::Thinking { thinking })
                if !thinking.is_empty() =>
            {
                text.push_str(&thinking);
                reasoning = Some(thinking);
            }
            (Block::Thinking { signature, .. }, BlockDelta::Signature { signature: part }) => {
                signature.push_str(&part);
            }
            _ => {}
        }
        if let Some(text) = reasoning {
            self.reason(text, out);
        }
    }

    fn on_block_stop(&mut self, index: u64, out: &mut VecDeque<InferenceEvent>) {
        match self.blocks.remove(&index) {
            Some(Block::ToolUse {
                id,
                name,
                json,
                initial,
            }) => {
                let call = ToolCallCompleted {
                    id,
                    name,
                    arguments: arguments_of(json, &initial),
                };
                if serde_json::from_str::<Value>(&call.arguments).is_ok() {
                    out.push_back(InferenceEvent::ToolCallCompleted(call));
                } else {
                    self.unparsed.push(call);
                }
            }
            Some(Block::Thinking { text, signature }) => {
                let provider_data =
                    json!({"type": "thinking", "thinking": text, "signature": signature});
                out.push_back(InferenceEvent::ReasoningItem(ReasoningItem {
                    text,
                    provider_data,
                }));
            }
            Some(Block::RedactedThinking { data }) => {
                out.push_back(InferenceEvent::ReasoningItem(ReasoningItem {
                    text: String::new(),
                    provider_data: json!({"type": "redacted_thinking", "data": data}),
                }));
            }
            Some(Block::Text | Block::Other) | None => {}
        }
    }

    fn finish(&mut self, out: &mut VecDeque<InferenceEvent>) {
        let cut_off = self.stop_reason.as_deref() == Some("max_tokens");
        let unparsed = std::mem::take(&mut self.unparsed);
        if !cut_off {
            for call in unparsed {
                out.push_back(InferenceEvent::ToolCallCompleted(call));
            }
        }
        // A block left open is a whole call only if its input is whole
        // JSON (a closed top-level object cannot grow).
        for block in std::mem::take(&mut self.blocks).into_values() {
            if let Block::ToolUse {
                id,
                name,
                json,
                initial,
            } = block
            {
                let arguments = arguments_of(json, &initial);
                if serde_json::from_str::<Value>(&arguments).is_ok() {
                    out.push_back(InferenceEvent::ToolCallCompleted(ToolCallCompleted {
                        id,
                        name,
                        arguments,
                    }));
                }
            }
        }
        if self.stop_reason.as_deref() == Some("refusal")
            && !self.texted
            && let Some(text) = self.explanation.take().filter(|text| !text.is_empty())
        {
            out.push_back(InferenceEvent::MessageDelta(MessageDelta {
                text,
                phase: None,
            }));
        }
        out.push_back(InferenceEvent::Usage(self.usage.to_token_usage()));
        out.push_back(InferenceEvent::Completed(CompletionMetadata {
            stop_reason: self.stop_reason.clone(),
            provider_response_id: self.message_id.clone(),
        }));
    }
}

/// The raw input of a tool use: the streamed JSON, else the start block's
/// `input` when no delta came, else `{}`.
fn arguments_of(json: String, initial: &Value) -> String {
    if !json.trim().is_empty() {
        json
    } else if initial.as_object().is_some_and(|object| !object.is_empty()) {
        initial.to_string()
    } else {
        "{}".to_string()
    }
}

/// A prompt that is too long is a context overflow; overload, rate limit
/// and internal errors are worth another attempt
/// ([`roder_ext_inference_http::classify`]); invalid requests and the like
/// are not.
fn reported(error: ErrorBody) -> DecodeError {
    let report = FailureReport {
        kind: error.kind.as_deref(),
        message: error.message.as_deref().unwrap_or(""),
        ..FailureReport::default()
    };
    let message = match (error.kind.clone(), error.message.clone()) {
        (Some(kind), Some(message)) => format!("{message} ({kind})"),
        (None, Some(message)) => message,
        (Some(kind), None) => kind,
        (None, None) => "the stream reported an error without a message".to_string(),
    };
    roder_ext_inference_http::reported(report, message)
}

#[cfg(test)]
mod tests {
    use roder_testkit::fake_models::MessagesStream;

    use super::*;
    use roder_ext_inference_http::{RetryClass, decode_chunks};

    fn decode_at(
        decoder: MessagesDecoder,
        body: &[u8],
        cut: usize,
    ) -> (Vec<InferenceEvent>, Result<(), DecodeError>) {
        decode_chunks(decoder, vec![body[..cut].to_vec(), body[cut..].to_vec()])
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
        let fragments = ["{\"cmd\": \"grep \\", "\"fn main\\", "\" -r . — ok", "\"}"];
        let stream = MessagesStream::new("msg_1")
            .thinking(&["Let me ", "search."], "sig-abc")
            .text(&["Searching", " now."])
            .ping()
            .tool_use("toolu_1", "shell", &fragments)
            .tool_use("toolu_2", "shell", &["{\"cmd\":", "\"ls\"}"])
            .usage(30, 12)
            .cache_usage(100, 5)
            .stop("tool_use");
        let body = stream.body();
        for cut in 0..=body.len() {
            let (events, end) = decode_at(MessagesDecoder::default(), &body, cut);
            assert_eq!(end, Ok(()), "cut at {cut}");
            assert_eq!(concat(&events, true), "Let me search.");
            assert_eq!(concat(&events, false), "Searching now.");
            let calls = calls(&events);
            assert_eq!(calls.len(), 2, "cut at {cut}");
            assert_eq!(calls[0].id, "toolu_1");
            assert_eq!(calls[0].arguments, fragments.concat(), "cut at {cut}");
            assert_eq!(calls[1].arguments, "{\"cmd\":\"ls\"}");
            assert_eq!(
                events[events.len() - 2],
                InferenceEvent::Usage(TokenUsage {
                    input_tokens: 135,
                    output_tokens: 12,
                    cached_input_tokens: 100,
                    reasoning_tokens: 0,
                })
            );
            assert_eq!(
                events.last(),
                Some(&InferenceEvent::Completed(CompletionMetadata {
                    stop_reason: Some("tool_use".into()),
                    provider_response_id: Some("msg_1".into()),
                }))
            );
        }
    }

    #[test]
    fn finished_thinking_blocks_are_sent_with_their_signatures() {
        let stream = MessagesStream::new("m")
            .thinking(&["o", "ne"], "sig-1")
            .redacted_thinking("opaque")
            .thinking(&["two"], "sig-2")
            .tool_use("toolu_1", "shell", &["{}"])
            .stop("tool_use");
        let body = stream.body();
        for cut in 0..=body.len() {
            let (events, end) = decode_at(MessagesDecoder::default(), &body, cut);
            assert_eq!(end, Ok(()));
            assert_eq!(concat(&events, true), "one\n\ntwo");
            let items: Vec<ReasoningItem> = events
                .iter()
                .filter_map(|event| match event {
                    InferenceEvent::ReasoningItem(item) => Some(item.clone()),
                    _ => None,
                })
                .collect();
            assert_eq!(
                items,
                vec![
                    ReasoningItem {
                        text: "one".into(),
                        provider_data: json!({"type": "thinking", "thinking": "one",
                                              "signature": "sig-1"}),
                    },
                    ReasoningItem {
                        text: String::new(),
                        provider_data: json!({"type": "redacted_thinking", "data": "opaque"}),
                    },
                    ReasoningItem {
                        text: "two".into(),
                        provider_data: json!({"type": "thinking", "thinking": "two",
                                              "signature": "sig-2"}),
                    },
                ],
                "cut at {cut}"
            );
            // Each after its own deltas.
            let first_item = events
                .iter()
                .position(|event| matches!(event, InferenceEvent::ReasoningItem(_)));
            let second_text = events.iter().position(|event| {
                matches!(event, InferenceEvent::ReasoningDelta(delta) if delta.text == "two")
            });
            assert!(first_item < second_text);
        }
    }

    #[test]
    fn a_tool_use_without_input_deltas_uses_its_start_input() {
        let stream = MessagesStream::new("m")
            .raw(
                "content_block_start",
                json!({"index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "x",
                                                      "input": {"a": 1}}}),
            )
            .raw("content_block_stop", json!({"index": 0}))
            .tool_use("t2", "y", &[])
            .stop("tool_use");
        let (events, _) = decode_at(MessagesDecoder::default(), &stream.body(), 0);
        let calls = calls(&events);
        assert_eq!(calls[0].arguments, "{\"a\":1}");
        assert_eq!(calls[1].arguments, "{}");
    }

    fn stop_reason(events: &[InferenceEvent]) -> Option<String> {
        match events.last() {
            Some(InferenceEvent::Completed(metadata)) => metadata.stop_reason.clone(),
            _ => None,
        }
    }

    #[test]
    fn a_tool_use_cut_off_by_max_tokens_is_left_open() {
        // As recorded: the input stops mid-string and no block stop comes.
        let stream = MessagesStream::new("m")
            .tool_use("toolu_1", "shell", &["{\"cmd\":\"ls\"}"])
            .raw(
                "content_block_start",
                json!({"index": 1, "content_block": {"type": "tool_use", "id": "toolu_2",
                    "name": "write_file", "input": {}}}),
            )
            .raw(
                "content_block_delta",
                json!({"index": 1, "delta": {"type": "input_json_delta",
                    "partial_json": "{\"path\": \"taxes.txt"}}),
            )
            .stop("max_tokens");
        let (events, end) = decode_at(MessagesDecoder::default(), &stream.body(), 0);
        assert_eq!(end, Ok(()));
        let completed = calls(&events);
        assert_eq!(completed.len(), 1, "{completed:?}");
        assert_eq!(completed[0].id, "toolu_1");
        assert!(events.iter().any(|event| matches!(
            event,
            InferenceEvent::ToolCallArgumentsDelta(delta) if delta.id == "toolu_2"
        )));
        assert_eq!(stop_reason(&events).as_deref(), Some("max_tokens"));

        // Stopped but still not JSON, and the limit did not end the message:
        // the runtime gets it (and answers the malformed input).
        let stream = MessagesStream::new("m")
            .tool_use("toolu_3", "shell", &["{\"cmd\":"])
            .stop("tool_use");
        let (events, _) = decode_at(MessagesDecoder::default(), &stream.body(), 0);
        assert_eq!(calls(&events).len(), 1);
        let stream = MessagesStream::new("m")
            .tool_use("toolu_4", "shell", &["{\"cmd\":"])
            .stop("max_tokens");
        let (events, _) = decode_at(MessagesDecoder::default(), &stream.body(), 0);
        assert!(calls(&events).is_empty());
    }

    #[test]
    fn a_refusal_without_text_says_why() {
        let stream = MessagesStream::new("m")
            .text(&[])
            .raw(
                "message_delta",
                json!({"delta": {"stop_reason": "refusal", "stop_details": {"type": "refusal",
                    "explanation": "This request was refused due to policy."}},
                    "usage": {"output_tokens": 0, "output_tokens_details": {"thinking_tokens": 3}}}),
            )
            .raw("message_stop", json!({}))
            .unfinished();
        let (events, end) = decode_at(MessagesDecoder::default(), &stream.body(), 0);
        assert_eq!(end, Ok(()));
        assert_eq!(
            concat(&events, false),
            "This request was refused due to policy."
        );
        assert_eq!(stop_reason(&events).as_deref(), Some("refusal"));
        assert!(events.iter().any(|event| matches!(
            event,
            InferenceEvent::Usage(TokenUsage {
                reasoning_tokens: 3,
                ..
            })
        )));
        // A refusal with text of its own keeps just that text.
        let stream = MessagesStream::new("m").text(&["No."]).stop("refusal");
        let (events, _) = decode_at(MessagesDecoder::default(), &stream.body(), 0);
        assert_eq!(concat(&events, false), "No.");
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_event_data_never_panics(
            data in "\\PC{0,200}",
            kind in proptest::sample::select(vec![
                "message_start", "content_block_start", "content_block_delta",
                "content_block_stop", "message_delta", "message_stop", "error", "unknown",
            ]),
        ) {
            let body = format!("event: {kind}\ndata: {data}\n\n");
            let _ = decode_at(MessagesDecoder::default(), body.as_bytes(), 0);
            let json = json!({"type": kind, "index": 0, "delta": {"type": "text_delta",
                "text": data, "partial_json": data}, "content_block": {"type": "tool_use",
                "id": data, "name": data, "input": {}}});
            let body = format!("data: {json}\n\n");
            let _ = decode_at(MessagesDecoder::default(), body.as_bytes(), 0);
        }

        #[test]
        fn a_tool_use_cut_off_by_max_tokens_is_completed_only_if_its_input_is_whole(
            cut in 0usize..=30,
            stopped in proptest::bool::ANY,
        ) {
            let input = "{\"cmd\": \"grep \\\"fn\\\" — ok\"}";
            let kept: String = input.chars().take(cut).collect();
            let mut stream = MessagesStream::new("m").raw(
                "content_block_start",
                json!({"index": 0, "content_block": {"type": "tool_use", "id": "t",
                    "name": "shell", "input": {}}}),
            );
            if !kept.is_empty() {
                stream = stream.raw(
                    "content_block_delta",
                    json!({"index": 0, "delta": {"type": "input_json_delta",
                        "partial_json": kept}}),
                );
            }
            if stopped {
                stream = stream.raw("content_block_stop", json!({"index": 0}));
            }
            let (events, end) =
                decode_at(MessagesDecoder::default(), &stream.stop("max_tokens").body(), 0);
            proptest::prop_assert_eq!(end, Ok(()));
            // No input at all is the empty object `{}`: a whole call.
            let whole = kept.is_empty() || serde_json::from_str::<Value>(&kept).is_ok();
            proptest::prop_assert_eq!(calls(&events).len(), usize::from(whole));
        }
    }

    #[test]
    fn error_events_and_truncation() {
        let overloaded = MessagesStream::new("m").error("overloaded_error", "Overloaded");
        let (_, end) = decode_at(MessagesDecoder::default(), &overloaded.body(), 0);
        assert_eq!(
            end,
            Err(DecodeError::Reported {
                message: "Overloaded (overloaded_error)".into(),
                retry: RetryClass::Transient,
            })
        );
        let invalid = MessagesStream::new("m").error("invalid_request_error", "bad");
        let (_, end) = decode_at(MessagesDecoder::default(), &invalid.body(), 0);
        assert!(matches!(
            end,
            Err(DecodeError::Reported {
                retry: RetryClass::Permanent,
                ..
            })
        ));
        let cut = MessagesStream::new("m").text(&["x"]).unfinished();
        let (_, end) = decode_at(MessagesDecoder::default(), &cut.body(), 0);
        assert_eq!(end, Err(DecodeError::Truncated));
        let too_long = MessagesStream::new("m").error(
            "invalid_request_error",
            "prompt is too long: 208310 tokens > 200000 maximum",
        );
        let (_, end) = decode_at(MessagesDecoder::default(), &too_long.body(), 0);
        assert_eq!(
            end,
            Err(DecodeError::ContextOverflow {
                message: "prompt is too long: 208310 tokens > 200000 maximum".into(),
            })
        );
    }
}
