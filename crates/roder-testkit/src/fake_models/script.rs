//! The script a fake model server plays: what each reply is, how its bytes
//! are cut into writes, and how it ends.
//!
//! A streamed reply is a list of SSE frames. Tests control the byte
//! boundaries the client sees ([`Split`]) and whether the stream completes,
//! is cut off cleanly, or breaks the connection ([`Ending`]), because those
//! are exactly the cases an engine's parser and retry logic must survive.

use bytes::Bytes;
use serde_json::Value;

use super::recorded::RecordedReply;

/// One server-sent event: an optional `event:` name and its `data:` text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseFrame {
    pub event: Option<String>,
    pub data: String,
}

impl SseFrame {
    /// A frame with only `data:` (the Chat Completions style).
    pub fn data(data: impl Into<String>) -> Self {
        Self {
            event: None,
            data: data.into(),
        }
    }

    /// A frame with `event:` and `data:` (the Responses and Messages style).
    pub fn named(event: impl Into<String>, data: impl Into<String>) -> Self {
        Self {
            event: Some(event.into()),
            data: data.into(),
        }
    }

    /// A named frame whose data is `value` as compact JSON.
    pub fn json(event: Option<&str>, value: &Value) -> Self {
        Self {
            event: event.map(str::to_string),
            data: value.to_string(),
        }
    }

    /// The frame's bytes on the wire, blank line included.
    pub fn encode(&self, out: &mut Vec<u8>) {
        if let Some(event) = &self.event {
            out.extend_from_slice(b"event: ");
            out.extend_from_slice(event.as_bytes());
            out.push(b'\n');
        }
        for line in self.data.split('\n') {
            out.extend_from_slice(b"data: ");
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
        }
        out.push(b'\n');
    }
}

/// How the body of a streamed reply is cut into separate writes.
///
/// The server yields to the runtime between writes so each one is flushed on
/// its own; TCP may still merge them on the way, so parsers should also be
/// tested on in-memory splits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Split {
    /// One write per SSE frame.
    #[default]
    PerFrame,
    /// Cut at these byte offsets of the body.
    AtBytes(Vec<usize>),
    /// A write every `n` bytes.
    EveryBytes(usize),
}

/// How a streamed reply ends.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Ending {
    /// Every frame is sent and the body ends normally.
    #[default]
    Complete,
    /// Only the first `n` bytes are sent, then the connection is broken
    /// (the chunked body never terminates properly).
    DropAfterBytes(usize),
    /// Only the first `n` frames are sent, then the connection is broken.
    DropAfterFrames(usize),
    /// Only the first `n` frames are sent, then the body ends cleanly, as
    /// if the server had simply stopped.
    EndAfterFrames(usize),
}

/// A `200 text/event-stream` reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeStream {
    pub frames: Vec<SseFrame>,
    pub split: Split,
    pub ending: Ending,
}

impl FakeStream {
    pub fn new(frames: Vec<SseFrame>) -> Self {
        Self {
            frames,
            split: Split::PerFrame,
            ending: Ending::Complete,
        }
    }

    /// Cuts the body at these byte offsets.
    pub fn split_at(mut self, offsets: &[usize]) -> Self {
        self.split = Split::AtBytes(offsets.to_vec());
        self
    }

    /// Cuts the body every `n` bytes (`n` of 1 sends it byte by byte).
    pub fn split_every(mut self, n: usize) -> Self {
        self.split = Split::EveryBytes(n.max(1));
        self
    }

    /// Breaks the connection after the first `n` bytes.
    pub fn drop_after_bytes(mut self, n: usize) -> Self {
        self.ending = Ending::DropAfterBytes(n);
        self
    }

    /// Breaks the connection after the first `n` frames.
    pub fn drop_after_frames(mut self, n: usize) -> Self {
        self.ending = Ending::DropAfterFrames(n);
        self
    }

    /// Ends the body cleanly after the first `n` frames.
    pub fn end_after_frames(mut self, n: usize) -> Self {
        self.ending = Ending::EndAfterFrames(n);
        self
    }

    /// The whole body as it would be sent with [`Ending::Complete`].
    pub fn body(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for frame in &self.frames {
            frame.encode(&mut out);
        }
        out
    }

    /// Byte length of the first `frames` frames.
    pub fn offset_of_frame(&self, frames: usize) -> usize {
        let mut out = Vec::new();
        for frame in self.frames.iter().take(frames) {
            frame.encode(&mut out);
        }
        out.len()
    }

    /// The writes to make, and whether to break the connection after them.
    pub(crate) fn writes(&self) -> (Vec<Bytes>, bool) {
        let body = self.body();
        let (len, abort) = match self.ending {
            Ending::Complete => (body.len(), false),
            Ending::DropAfterBytes(n) => (n.min(body.len()), true),
            Ending::DropAfterFrames(n) => (self.offset_of_frame(n), true),
            Ending::EndAfterFrames(n) => (self.offset_of_frame(n), false),
        };
        let body = &body[..len];
        let cuts: Vec<usize> = match &self.split {
            Split::PerFrame => {
                let mut cuts = Vec::new();
                let mut offset = 0;
                for frame in &self.frames {
                    let mut encoded = Vec::new();
                    frame.encode(&mut encoded);
                    offset += encoded.len();
                    cuts.push(offset);
                }
                cuts
            }
            Split::AtBytes(offsets) => offsets.clone(),
            Split::EveryBytes(n) => (1..=body.len() / n).map(|i| i * n).collect(),
        };
        let mut cuts: Vec<usize> = cuts
            .into_iter()
            .filter(|cut| *cut > 0 && *cut < body.len())
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut writes = Vec::with_capacity(cuts.len() + 1);
        let mut start = 0;
        for cut in cuts.into_iter().chain(std::iter::once(body.len())) {
            if cut > start {
                writes.push(Bytes::copy_from_slice(&body[start..cut]));
            }
            start = cut;
        }
        (writes, abort)
    }
}

/// An error answer. Its JSON body is written in the wire format of the
/// route that receives it (OpenAI's `{"error": {...}}` or Anthropic's
/// `{"type": "error", "error": {...}}`), unless [`FakeError::raw_body`] is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeError {
    pub status: u16,
    pub message: String,
    /// The provider's error type/code; derived from the status when `None`.
    pub kind: Option<String>,
    /// `Retry-After` header value, sent as is.
    pub retry_after: Option<String>,
    /// OpenAI's `retry-after-ms` header.
    pub retry_after_ms: Option<u64>,
    pub raw_body: Option<String>,
}

impl FakeError {
    pub fn new(status: u16, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            kind: None,
            retry_after: None,
            retry_after_ms: None,
            raw_body: None,
        }
    }

    /// 429 with a `Retry-After` of `seconds`.
    pub fn rate_limited(seconds: &str) -> Self {
        Self::new(429, "Rate limit reached, please slow down").retry_after(seconds)
    }

    pub fn server_error() -> Self {
        Self::new(500, "The server had an error while processing your request")
    }

    /// OpenAI's answer to a request over the context window: HTTP 400,
    /// `invalid_request_error` with code `context_length_exceeded` (the
    /// wording of the Responses API). For the Anthropic route use
    /// [`FakeError::prompt_too_long`].
    pub fn context_length_exceeded() -> Self {
        Self::new(
            400,
            "Your input exceeds the context window of this model. Please adjust your input and try again.",
        )
        .kind("context_length_exceeded")
    }

    /// Anthropic's answer to a prompt over the context window: HTTP 400,
    /// `invalid_request_error`, "prompt is too long: N tokens > M maximum".
    pub fn prompt_too_long(tokens: u64, maximum: u64) -> Self {
        Self::new(
            400,
            format!("prompt is too long: {tokens} tokens > {maximum} maximum"),
        )
    }

    /// The context-overflow answer of Anthropic (`anthropic`) or OpenAI,
    /// for a request of `tokens` against a window of `maximum`.
    pub fn context_overflow(anthropic: bool, tokens: u64, maximum: u64) -> Self {
        if anthropic {
            Self::prompt_too_long(tokens, maximum)
        } else {
            let mut error = Self::context_length_exceeded();
            error.message = format!(
                "This model's maximum context length is {maximum} tokens. However, your messages resulted in {tokens} tokens. Please reduce the length of the messages."
            );
            error
        }
    }

    pub fn retry_after(mut self, value: impl Into<String>) -> Self {
        self.retry_after = Some(value.into());
        self
    }

    pub fn retry_after_ms(mut self, ms: u64) -> Self {
        self.retry_after_ms = Some(ms);
        self
    }

    pub fn kind(mut self, kind: impl Into<String>) -> Self {
        self.kind = Some(kind.into());
        self
    }

    pub fn raw_body(mut self, body: impl Into<String>) -> Self {
        self.raw_body = Some(body.into());
        self
    }
}

/// One scripted answer to one model request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FakeReply {
    Stream(FakeStream),
    Error(FakeError),
    /// `200 text/event-stream` headers, then nothing until the client goes
    /// away: for cancellation and timeout tests.
    Hang,
    /// A recorded answer served byte for byte.
    Recorded(RecordedReply),
}

impl From<RecordedReply> for FakeReply {
    fn from(reply: RecordedReply) -> Self {
        FakeReply::Recorded(reply)
    }
}

impl From<FakeStream> for FakeReply {
    fn from(stream: FakeStream) -> Self {
        FakeReply::Stream(stream)
    }
}

impl From<FakeError> for FakeReply {
    fn from(error: FakeError) -> Self {
        FakeReply::Error(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream() -> FakeStream {
        FakeStream::new(vec![
            SseFrame::data("{\"a\":1}"),
            SseFrame::named("x", "two\nlines"),
        ])
    }

    #[test]
    fn frames_encode_as_sse() {
        assert_eq!(
            String::from_utf8(stream().body()).unwrap(),
            "data: {\"a\":1}\n\nevent: x\ndata: two\ndata: lines\n\n"
        );
    }

    #[test]
    fn writes_cover_the_body_at_the_requested_cuts() {
        let whole = stream().body();
        let (writes, abort) = stream().split_every(3).writes();
        assert!(!abort);
        assert!(writes.iter().all(|w| w.len() <= 3));
        assert_eq!(writes.concat(), whole);

        let (writes, _) = stream().split_at(&[5, 1, 5, 999]).writes();
        let lens: Vec<usize> = writes.iter().map(|w| w.len()).collect();
        assert_eq!(lens, vec![1, 4, whole.len() - 5]);

        let (writes, _) = stream().writes();
        assert_eq!(writes.len(), 2);
    }

    #[test]
    fn endings_truncate_and_mark_aborts() {
        let first = stream().offset_of_frame(1);
        let (writes, abort) = stream().drop_after_frames(1).writes();
        assert!(abort);
        assert_eq!(writes.concat().len(), first);
        let (writes, abort) = stream().end_after_frames(1).writes();
        assert!(!abort);
        assert_eq!(writes.concat().len(), first);
        let (writes, abort) = stream().drop_after_bytes(4).writes();
        assert!(abort);
        assert_eq!(writes.concat(), b"data".to_vec());
    }
}
