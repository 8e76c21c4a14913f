//! Builds Anthropic Messages streams: `message_start`, content blocks
//! (`content_block_start` / `_delta` / `_stop` for text, thinking and
//! tool_use), `message_delta` with the stop reason and usage, and
//! `message_stop`; or an `error` event.

use serde_json::{Value, json};

use super::script::{FakeStream, SseFrame};

/// A Messages stream. Content blocks get indexes in the order they are
/// added; `message_start` is written when the stream is finished, so usage
/// can be set at any point of the builder chain.
#[derive(Debug, Clone)]
pub struct MessagesStream {
    id: String,
    frames: Vec<SseFrame>,
    blocks: u32,
    input_tokens: u64,
    output_tokens: u64,
    cache_read: u64,
    cache_creation: u64,
}

impl MessagesStream {
    pub fn new(id: &str) -> Self {
        Self {
            id: id.to_string(),
            frames: Vec::new(),
            blocks: 0,
            input_tokens: 10,
            output_tokens: 5,
            cache_read: 0,
            cache_creation: 0,
        }
    }

    fn push(&mut self, kind: &str, mut value: Value) {
        value["type"] = json!(kind);
        self.frames.push(SseFrame::json(Some(kind), &value));
    }

    /// Any event, verbatim (`type` is filled in).
    pub fn raw(mut self, kind: &str, value: Value) -> Self {
        self.push(kind, value);
        self
    }

    fn block(mut self, start: Value, deltas: Vec<Value>) -> Self {
        let index = self.blocks;
        self.blocks += 1;
        self.push(
            "content_block_start",
            json!({"index": index, "content_block": start}),
        );
        for delta in deltas {
            self.push(
                "content_block_delta",
                json!({"index": index, "delta": delta}),
            );
        }
        self.push("content_block_stop", json!({"index": index}));
        self
    }

    /// A text block streamed in `fragments`.
    pub fn text(self, fragments: &[&str]) -> Self {
        let deltas = fragments
            .iter()
            .map(|text| json!({"type": "text_delta", "text": text}))
            .collect();
        self.block(json!({"type": "text", "text": ""}), deltas)
    }

    /// A thinking block streamed in `fragments`, then its signature.
    pub fn thinking(self, fragments: &[&str], signature: &str) -> Self {
        let mut deltas: Vec<Value> = fragments
            .iter()
            .map(|text| json!({"type": "thinking_delta", "thinking": text}))
            .collect();
        deltas.push(json!({"type": "signature_delta", "signature": signature}));
        self.block(
            json!({"type": "thinking", "thinking": "", "signature": ""}),
            deltas,
        )
    }

    /// A redacted thinking block (encrypted, no text).
    pub fn redacted_thinking(self, data: &str) -> Self {
        self.block(
            json!({"type": "redacted_thinking", "data": data}),
            Vec::new(),
        )
    }

    /// A tool_use block whose input JSON streams in `fragments`.
    pub fn tool_use(self, id: &str, name: &str, fragments: &[&str]) -> Self {
        let deltas = fragments
            .iter()
            .map(|partial| json!({"type": "input_json_delta", "partial_json": partial}))
            .collect();
        self.block(
            json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
            deltas,
        )
    }

    pub fn ping(mut self) -> Self {
        self.push("ping", json!({}));
        self
    }

    pub fn usage(mut self, input: u64, output: u64) -> Self {
        self.input_tokens = input;
        self.output_tokens = output;
        self
    }

    pub fn cache_usage(mut self, read: u64, creation: u64) -> Self {
        self.cache_read = read;
        self.cache_creation = creation;
        self
    }

    fn with_start(self) -> Vec<SseFrame> {
        let start = json!({
            "type": "message_start",
            "message": {
                "id": self.id,
                "type": "message",
                "role": "assistant",
                "model": "fake-model",
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": {
                    "input_tokens": self.input_tokens,
                    "cache_creation_input_tokens": self.cache_creation,
                    "cache_read_input_tokens": self.cache_read,
                    "output_tokens": 1,
                },
            },
        });
        let mut frames = vec![SseFrame::json(Some("message_start"), &start)];
        frames.extend(self.frames);
        frames
    }

    /// Ends with `message_delta` (stop reason, final output tokens) and
    /// `message_stop`.
    pub fn stop(mut self, reason: &str) -> FakeStream {
        let output_tokens = self.output_tokens;
        self.push(
            "message_delta",
            json!({"delta": {"stop_reason": reason, "stop_sequence": null},
                   "usage": {"output_tokens": output_tokens}}),
        );
        self.push("message_stop", json!({}));
        FakeStream::new(self.with_start())
    }

    /// Ends with an `error` event of `kind` (`overloaded_error`, ...).
    pub fn error(mut self, kind: &str, message: &str) -> FakeStream {
        self.push(
            "error",
            json!({"error": {"type": kind, "message": message}}),
        );
        FakeStream::new(self.with_start())
    }

    /// Ends without `message_stop`.
    pub fn unfinished(self) -> FakeStream {
        FakeStream::new(self.with_start())
    }

    /// A plain text answer.
    pub fn text_reply(id: &str, text: &str) -> FakeStream {
        Self::new(id).text(&[text]).stop("end_turn")
    }

    /// A response calling each `(id, name, input JSON)`.
    pub fn tool_uses_reply(id: &str, calls: &[(&str, &str, &str)]) -> FakeStream {
        let mut stream = Self::new(id);
        for (call_id, name, input) in calls {
            stream = stream.tool_use(call_id, name, &[input]);
        }
        stream.stop("tool_use")
    }
}
