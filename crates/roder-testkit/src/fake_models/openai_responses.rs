//! Builds OpenAI Responses API streams: typed events (`response.created`,
//! `response.output_item.added`, `response.output_text.delta`,
//! `response.function_call_arguments.delta`, `response.completed`, ...)
//! with `sequence_number`s, as the API documents them.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::script::{FakeStream, SseFrame};

/// A Responses stream. Output items get output indexes in the order they
/// are added; function calls can be interleaved with
/// [`ResponsesStream::function_call_added`] / `_delta` / `_done`.
#[derive(Debug, Clone)]
pub struct ResponsesStream {
    id: String,
    frames: Vec<SseFrame>,
    sequence: u64,
    output: Vec<Value>,
    calls: HashMap<String, (usize, String, String)>,
    usage: Value,
}

impl ResponsesStream {
    pub fn new(id: &str) -> Self {
        let mut stream = Self {
            id: id.to_string(),
            frames: Vec::new(),
            sequence: 0,
            output: Vec::new(),
            calls: HashMap::new(),
            usage: usage_value(10, 5, 0, 0),
        };
        let response = stream.response("in_progress");
        stream.event("response.created", json!({"response": response}));
        let response = stream.response("in_progress");
        stream.event("response.in_progress", json!({"response": response}));
        stream
    }

    fn response(&self, status: &str) -> Value {
        json!({
            "id": self.id,
            "object": "response",
            "created_at": 1_700_000_000,
            "status": status,
            "model": "fake-model",
            "output": self.output,
        })
    }

    /// Appends an event of type `kind`; `type` and `sequence_number` are
    /// filled in.
    fn event(&mut self, kind: &str, mut value: Value) -> &mut Self {
        value["type"] = json!(kind);
        value["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        self.frames.push(SseFrame::json(Some(kind), &value));
        self
    }

    /// Any event, verbatim.
    pub fn raw(mut self, kind: &str, value: Value) -> Self {
        self.event(kind, value);
        self
    }

    /// An assistant message streamed in `fragments`.
    pub fn message(self, fragments: &[&str]) -> Self {
        self.message_item(None, fragments)
    }

    /// An assistant message with a `phase` (`commentary`, `final_answer`).
    pub fn message_with_phase(self, phase: &str, fragments: &[&str]) -> Self {
        self.message_item(Some(phase), fragments)
    }

    fn message_item(mut self, phase: Option<&str>, fragments: &[&str]) -> Self {
        let index = self.output.len();
        let item_id = format!("msg_{index}");
        let mut item = json!({
            "id": item_id, "type": "message", "status": "in_progress",
            "role": "assistant", "content": [],
        });
        if let Some(phase) = phase {
            item["phase"] = json!(phase);
        }
        self.output.push(item.clone());
        self.event(
            "response.output_item.added",
            json!({"output_index": index, "item": item}),
        );
        self.event(
            "response.content_part.added",
            json!({"item_id": item_id, "output_index": index, "content_index": 0,
                   "part": {"type": "output_text", "text": "", "annotations": []}}),
        );
        for fragment in fragments {
            self.event(
                "response.output_text.delta",
                json!({"item_id": item_id, "output_index": index, "content_index": 0,
                       "delta": fragment, "logprobs": []}),
            );
        }
        let text: String = fragments.concat();
        let part = json!({"type": "output_text", "text": text, "annotations": []});
        self.event(
            "response.output_text.done",
            json!({"item_id": item_id, "output_index": index, "content_index": 0, "text": text}),
        );
        self.event(
            "response.content_part.done",
            json!({"item_id": item_id, "output_index": index, "content_index": 0, "part": part}),
        );
        item["status"] = json!("completed");
        item["content"] = json!([part]);
        self.output[index] = item.clone();
        self.event(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        );
        self
    }

    /// An assistant message that arrives whole in `output_item.done`, with
    /// no deltas (as some compatible servers and test fixtures send it).
    pub fn message_done_only(mut self, text: &str) -> Self {
        let index = self.output.len();
        let item = json!({
            "id": format!("msg_{index}"), "type": "message", "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        });
        self.output.push(item.clone());
        self.event(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        );
        self
    }

    /// A refusal: a message whose content part is `refusal`, streamed as
    /// `response.refusal.delta`s.
    pub fn refusal(mut self, fragments: &[&str]) -> Self {
        let index = self.output.len();
        let item_id = format!("msg_{index}");
        let item = json!({"id": item_id, "type": "message", "status": "in_progress",
                          "role": "assistant", "content": []});
        self.output.push(item.clone());
        self.event(
            "response.output_item.added",
            json!({"output_index": index, "item": item}),
        );
        for fragment in fragments {
            self.event(
                "response.refusal.delta",
                json!({"item_id": item_id, "output_index": index, "content_index": 0,
                       "delta": fragment}),
            );
        }
        let refusal: String = fragments.concat();
        self.event(
            "response.refusal.done",
            json!({"item_id": item_id, "output_index": index, "content_index": 0,
                   "refusal": refusal}),
        );
        let done = json!({"id": item_id, "type": "message", "status": "completed",
                          "role": "assistant",
                          "content": [{"type": "refusal", "refusal": refusal}]});
        self.output[index] = done.clone();
        self.event(
            "response.output_item.done",
            json!({"output_index": index, "item": done}),
        );
        self
    }

    /// A reasoning item whose summary parts stream in `parts` of fragments.
    pub fn reasoning_summary(self, parts: &[&[&str]]) -> Self {
        self.reasoning_item(parts, None)
    }

    /// A reasoning item as a request with `include:
    /// ["reasoning.encrypted_content"]` gets it: its summary parts stream
    /// in `parts`, and the finished item (in `output_item.done` and in
    /// `response.completed`) carries `encrypted_content` when given.
    pub fn reasoning_item(mut self, parts: &[&[&str]], encrypted_content: Option<&str>) -> Self {
        let index = self.output.len();
        let item_id = format!("rs_{index}");
        let item = json!({"id": item_id, "type": "reasoning", "summary": []});
        self.output.push(item.clone());
        self.event(
            "response.output_item.added",
            json!({"output_index": index, "item": item}),
        );
        let mut summary = Vec::new();
        for (summary_index, fragments) in parts.iter().enumerate() {
            self.event(
                "response.reasoning_summary_part.added",
                json!({"item_id": item_id, "output_index": index, "summary_index": summary_index,
                       "part": {"type": "summary_text", "text": ""}}),
            );
            for fragment in fragments.iter() {
                self.event(
                    "response.reasoning_summary_text.delta",
                    json!({"item_id": item_id, "output_index": index,
                           "summary_index": summary_index, "delta": fragment}),
                );
            }
            let text: String = fragments.concat();
            self.event(
                "response.reasoning_summary_text.done",
                json!({"item_id": item_id, "output_index": index,
                       "summary_index": summary_index, "text": text}),
            );
            self.event(
                "response.reasoning_summary_part.done",
                json!({"item_id": item_id, "output_index": index, "summary_index": summary_index,
                       "part": {"type": "summary_text", "text": text}}),
            );
            summary.push(json!({"type": "summary_text", "text": text}));
        }
        let mut item = json!({"id": item_id, "type": "reasoning", "summary": summary});
        if let Some(encrypted) = encrypted_content {
            item["encrypted_content"] = json!(encrypted);
        }
        self.output[index] = item.clone();
        self.event(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        );
        self
    }

    /// A whole function call: added, one delta per fragment, done.
    pub fn function_call(self, call_id: &str, name: &str, fragments: &[&str]) -> Self {
        let mut stream = self.function_call_added(call_id, name);
        for fragment in fragments {
            stream = stream.function_call_delta(call_id, fragment);
        }
        stream.function_call_done(call_id)
    }

    /// `response.output_item.added` for a function call (item id `fc_CALLID`).
    pub fn function_call_added(mut self, call_id: &str, name: &str) -> Self {
        let index = self.output.len();
        let item = json!({
            "id": format!("fc_{call_id}"), "type": "function_call", "status": "in_progress",
            "call_id": call_id, "name": name, "arguments": "",
        });
        self.output.push(item.clone());
        self.calls.insert(
            call_id.to_string(),
            (index, name.to_string(), String::new()),
        );
        self.event(
            "response.output_item.added",
            json!({"output_index": index, "item": item}),
        );
        self
    }

    /// One `response.function_call_arguments.delta` of call `call_id`.
    pub fn function_call_delta(mut self, call_id: &str, fragment: &str) -> Self {
        let index = match self.calls.get_mut(call_id) {
            Some((index, _, arguments)) => {
                arguments.push_str(fragment);
                *index
            }
            None => return self,
        };
        self.event(
            "response.function_call_arguments.delta",
            json!({"item_id": format!("fc_{call_id}"), "output_index": index, "delta": fragment}),
        );
        self
    }

    /// `…function_call_arguments.done` and `…output_item.done` of `call_id`.
    pub fn function_call_done(mut self, call_id: &str) -> Self {
        let Some((index, name, arguments)) = self.calls.get(call_id).cloned() else {
            return self;
        };
        let item_id = format!("fc_{call_id}");
        self.event(
            "response.function_call_arguments.done",
            json!({"item_id": item_id, "output_index": index, "arguments": arguments}),
        );
        let item = json!({
            "id": item_id, "type": "function_call", "status": "completed",
            "call_id": call_id, "name": name, "arguments": arguments,
        });
        self.output[index] = item.clone();
        self.event(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        );
        self
    }

    pub fn usage(self, input: u64, output: u64) -> Self {
        self.usage_details(input, output, 0, 0)
    }

    pub fn usage_details(mut self, input: u64, output: u64, cached: u64, reasoning: u64) -> Self {
        self.usage = usage_value(input, output, cached, reasoning);
        self
    }

    /// Ends with `response.completed`.
    pub fn completed(mut self) -> FakeStream {
        let mut response = self.response("completed");
        response["usage"] = self.usage.clone();
        self.event("response.completed", json!({"response": response}));
        FakeStream::new(self.frames)
    }

    /// Ends with `response.incomplete` for `reason` (`max_output_tokens`).
    pub fn incomplete(mut self, reason: &str) -> FakeStream {
        let mut response = self.response("incomplete");
        response["usage"] = self.usage.clone();
        response["incomplete_details"] = json!({"reason": reason});
        self.event("response.incomplete", json!({"response": response}));
        FakeStream::new(self.frames)
    }

    /// Ends with `response.failed` carrying `code` and `message`.
    pub fn failed(mut self, code: &str, message: &str) -> FakeStream {
        let mut response = self.response("failed");
        response["error"] = json!({"code": code, "message": message});
        self.event("response.failed", json!({"response": response}));
        FakeStream::new(self.frames)
    }

    /// Ends with an `error` event.
    pub fn error(mut self, code: &str, message: &str) -> FakeStream {
        self.event(
            "error",
            json!({"code": code, "message": message, "param": null}),
        );
        FakeStream::new(self.frames)
    }

    /// Ends without a terminal event.
    pub fn unfinished(self) -> FakeStream {
        FakeStream::new(self.frames)
    }

    /// A plain text answer.
    pub fn text_reply(id: &str, text: &str) -> FakeStream {
        Self::new(id).message(&[text]).completed()
    }

    /// A response calling each `(call_id, name, arguments)`.
    pub fn tool_calls_reply(id: &str, calls: &[(&str, &str, &str)]) -> FakeStream {
        let mut stream = Self::new(id);
        for (call_id, name, arguments) in calls {
            stream = stream.function_call(call_id, name, &[arguments]);
        }
        stream.completed()
    }
}

fn usage_value(input: u64, output: u64, cached: u64, reasoning: u64) -> Value {
    json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input + output,
    })
}
