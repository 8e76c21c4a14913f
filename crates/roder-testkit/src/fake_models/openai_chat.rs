//! Builds OpenAI Chat Completions streams (`chat.completion.chunk` frames
//! ending with `data: [DONE]`), the format OpenAI-compatible servers share.

use serde_json::{Value, json};

use super::script::{FakeStream, SseFrame};

/// A Chat Completions stream, built chunk by chunk in the order given.
///
/// ```
/// use roder_testkit::fake_models::ChatStream;
///
/// let reply = ChatStream::new()
///     .text("Let me look.")
///     .tool_call(0, "call_1", "shell", &["{\"cmd\":", "\"ls\"}"])
///     .finish("tool_calls")
///     .usage(12, 7)
///     .done();
/// assert!(String::from_utf8(reply.body()).unwrap().ends_with("data: [DONE]\n\n"));
/// ```
#[derive(Debug, Clone)]
pub struct ChatStream {
    id: String,
    model: String,
    frames: Vec<SseFrame>,
}

impl Default for ChatStream {
    fn default() -> Self {
        Self::new()
    }
}

impl ChatStream {
    pub fn new() -> Self {
        Self::with_id("chatcmpl-fake")
    }

    pub fn with_id(id: &str) -> Self {
        let stream = Self {
            id: id.to_string(),
            model: "fake-model".to_string(),
            frames: Vec::new(),
        };
        stream.delta(json!({"role": "assistant", "content": ""}))
    }

    fn chunk(&self, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": self.model,
            "choices": choices,
        })
    }

    fn push(mut self, value: Value) -> Self {
        self.frames.push(SseFrame::json(None, &value));
        self
    }

    /// A chunk whose first choice carries `delta`.
    pub fn delta(self, delta: Value) -> Self {
        let chunk = self.chunk(json!([{
            "index": 0,
            "delta": delta,
            "logprobs": null,
            "finish_reason": null,
        }]));
        self.push(chunk)
    }

    /// A content fragment.
    pub fn text(self, fragment: &str) -> Self {
        self.delta(json!({"content": fragment}))
    }

    /// A refusal fragment (`delta.refusal`), as OpenAI streams a refusal.
    pub fn refusal(self, fragment: &str) -> Self {
        self.delta(json!({"content": null, "refusal": fragment}))
    }

    /// A reasoning fragment as DeepSeek, vLLM and llama.cpp send it
    /// (`reasoning_content`).
    pub fn reasoning(self, fragment: &str) -> Self {
        self.delta(json!({"reasoning_content": fragment}))
    }

    /// A reasoning fragment as OpenRouter and Ollama send it (`reasoning`).
    pub fn reasoning_field(self, fragment: &str) -> Self {
        self.delta(json!({"reasoning": fragment}))
    }

    /// The first chunk of call `index`: its id and name, no arguments yet.
    pub fn tool_call_start(self, index: u32, id: &str, name: &str) -> Self {
        self.delta(json!({"tool_calls": [{
            "index": index,
            "id": id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }]}))
    }

    /// One fragment of call `index`'s JSON arguments.
    pub fn tool_call_arguments(self, index: u32, fragment: &str) -> Self {
        self.delta(json!({"tool_calls": [{
            "index": index,
            "function": {"arguments": fragment},
        }]}))
    }

    /// A whole call: its start, then one chunk per argument fragment.
    pub fn tool_call(self, index: u32, id: &str, name: &str, fragments: &[&str]) -> Self {
        let mut stream = self.tool_call_start(index, id, name);
        for fragment in fragments {
            stream = stream.tool_call_arguments(index, fragment);
        }
        stream
    }

    /// The chunk with `finish_reason` (`stop`, `tool_calls`, `length`).
    pub fn finish(self, reason: &str) -> Self {
        let chunk = self.chunk(json!([{
            "index": 0,
            "delta": {},
            "logprobs": null,
            "finish_reason": reason,
        }]));
        self.push(chunk)
    }

    /// The usage chunk (`choices: []`) sent with `stream_options.include_usage`.
    pub fn usage(self, prompt: u64, completion: u64) -> Self {
        self.usage_details(prompt, completion, 0, 0)
    }

    pub fn usage_details(self, prompt: u64, completion: u64, cached: u64, reasoning: u64) -> Self {
        let mut chunk = self.chunk(json!([]));
        chunk["usage"] = json!({
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": reasoning},
        });
        self.push(chunk)
    }

    /// An in-stream error object, as OpenRouter sends when an upstream fails.
    pub fn error(self, message: &str, code: Value) -> Self {
        self.push(json!({"error": {"message": message, "code": code}}))
    }

    /// Any chunk, verbatim.
    pub fn raw(self, value: Value) -> Self {
        self.push(value)
    }

    /// Ends with `data: [DONE]`.
    pub fn done(mut self) -> FakeStream {
        self.frames.push(SseFrame::data("[DONE]"));
        FakeStream::new(self.frames)
    }

    /// Ends without `[DONE]`.
    pub fn without_done(self) -> FakeStream {
        FakeStream::new(self.frames)
    }

    /// A plain text answer with usage.
    pub fn text_reply(text: &str) -> FakeStream {
        Self::new().text(text).finish("stop").usage(10, 5).done()
    }

    /// A response calling each `(id, name, arguments)`, arguments in one piece.
    pub fn tool_calls_reply(calls: &[(&str, &str, &str)]) -> FakeStream {
        let mut stream = Self::new();
        for (index, (id, name, arguments)) in calls.iter().enumerate() {
            stream = stream.tool_call(index as u32, id, name, &[arguments]);
        }
        stream.finish("tool_calls").usage(10, 5).done()
    }
}
