//! Replies served byte for byte as a real provider sent them: recorded
//! streams and error bodies, with the recorded status and headers. The
//! scripted builders ([`super::ChatStream`] and friends) produce what this
//! project believes the APIs send; recordings check that belief.

/// A recorded HTTP answer: status, headers and body exactly as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedReply {
    pub status: u16,
    /// Sent in this order after the content type.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RecordedReply {
    /// `200 text/event-stream` with `body`.
    pub fn sse(body: impl Into<Vec<u8>>) -> Self {
        Self {
            status: 200,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    /// An `application/json` error body with `status`.
    pub fn json(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The content type the body is served with: event streams for 2xx,
    /// JSON otherwise, unless a recorded header says otherwise.
    pub fn content_type(&self) -> &str {
        self.headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("content-type"))
            .map(|(_, value)| value.as_str())
            .unwrap_or(if (200..300).contains(&self.status) {
                "text/event-stream"
            } else {
                "application/json"
            })
    }

    /// The body cut after each SSE event (each blank line), so a stream
    /// arrives event by event as it did from the provider.
    pub(crate) fn writes(&self) -> Vec<bytes::Bytes> {
        sse_event_spans(&self.body)
            .into_iter()
            .map(|(start, end)| {
                bytes::Bytes::copy_from_slice(self.body.get(start..end).unwrap_or(&[]))
            })
            .collect()
    }
}

/// Byte ranges of the SSE events of `body`, each with its terminating blank
/// line; a last event without one runs to the end. Covers the whole body.
pub fn sse_event_spans(body: &[u8]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = 0;
    let mut index = 0;
    while index < body.len() {
        let rest = body.get(index..).unwrap_or(&[]);
        let terminator = if rest.starts_with(b"\r\n\r\n") {
            4
        } else if rest.starts_with(b"\n\n") || rest.starts_with(b"\r\r") {
            2
        } else {
            0
        };
        if terminator > 0 {
            let end = index + terminator;
            spans.push((start, end));
            start = end;
            index = end;
        } else {
            index += 1;
        }
    }
    if start < body.len() {
        spans.push((start, body.len()));
    }
    spans
}

/// The `(event, data)` pairs of an SSE body, read independently of the
/// engines' parser so tests can derive what a recording carries: `data:`
/// lines joined with `\n`, comments and events without data skipped.
pub fn sse_events(body: &[u8]) -> Vec<(Option<String>, String)> {
    let text = String::from_utf8_lossy(body);
    let mut events = Vec::new();
    for block in text.replace("\r\n", "\n").split("\n\n") {
        let mut name = None;
        let mut data: Vec<&str> = Vec::new();
        for line in block.lines() {
            if let Some(value) = line.strip_prefix("event:") {
                name = Some(value.trim().to_string());
            } else if let Some(value) = line.strip_prefix("data:") {
                data.push(value.strip_prefix(' ').unwrap_or(value));
            }
        }
        if !data.is_empty() {
            events.push((name, data.join("\n")));
        }
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_cut_after_each_blank_line() {
        let body = b"event: a\ndata: 1\n\ndata: 2\r\n\r\ndata: 3";
        let spans = sse_event_spans(body);
        assert_eq!(spans, vec![(0, 18), (18, 29), (29, body.len())]);
        let reply = RecordedReply::sse(body.to_vec());
        assert_eq!(reply.writes().concat(), body.to_vec());
        assert_eq!(
            sse_events(body),
            vec![
                (Some("a".into()), "1".into()),
                (None, "2".into()),
                (None, "3".into())
            ]
        );
    }

    #[test]
    fn content_types_follow_the_status_unless_recorded() {
        assert_eq!(RecordedReply::sse("x").content_type(), "text/event-stream");
        assert_eq!(
            RecordedReply::json(429, "{}").content_type(),
            "application/json"
        );
        let custom = RecordedReply::json(500, "x").header("Content-Type", "text/plain");
        assert_eq!(custom.content_type(), "text/plain");
    }
}
