//! The one thing a wire format must supply: a [`Decoder`] from SSE events
//! to inference events. Everything else about a stream (parsing, idle
//! timeout, cancellation, retries) is [`crate::Driver`]'s.

use std::collections::VecDeque;

pub use eventsource_stream::Event;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use roder_api::inference::InferenceEvent;

use crate::classify::RetryClass;
use crate::error::shorten;

/// Where a decoder is after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Keep reading.
    More,
    /// The response is complete; `Completed` has been pushed.
    Done,
}

/// Why a decoder cannot go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The stream ended before the response's terminal event.
    Truncated,
    /// An event could not be read.
    Malformed(String),
    /// The provider reported an error inside the stream; `retry` comes
    /// from [`crate::classify`] with no HTTP status.
    Reported { message: String, retry: RetryClass },
    /// The provider said the request is longer than the model's context
    /// window ([`crate::overflow`]); `message` is its own words. Never
    /// retried: the runtime compacts and sends a shorter request.
    ContextOverflow { message: String },
}

/// One wire format's mapping from SSE events to inference events. A fresh
/// clone of the initial decoder reads each attempt.
pub trait Decoder: Clone + Send + 'static {
    /// Reads one event, pushing what it produced onto `out`. Pushes nothing
    /// when it returns an error.
    fn on_event(
        &mut self,
        event: &Event,
        out: &mut VecDeque<InferenceEvent>,
    ) -> Result<Progress, DecodeError>;

    /// The body ended. `Ok` (with `Completed` pushed) if that is an
    /// acceptable end of the response.
    fn on_eof(&mut self, out: &mut VecDeque<InferenceEvent>) -> Result<(), DecodeError>;
}

/// Runs `decoder` over a whole body delivered in `chunks`, as the driver
/// would: for decoder tests that cut bodies at every byte without a
/// network. Public (not test-only) because the decoders live in the engine
/// crates, whose tests cannot see this crate's `cfg(test)` items.
pub fn decode_chunks<D: Decoder>(
    mut decoder: D,
    chunks: Vec<Vec<u8>>,
) -> (Vec<InferenceEvent>, Result<(), DecodeError>) {
    let source = futures::stream::iter(
        chunks
            .into_iter()
            .map(|chunk| Ok::<_, std::convert::Infallible>(bytes::Bytes::from(chunk))),
    );
    let events: Vec<_> = futures::executor::block_on(source.eventsource().collect());
    let mut out = VecDeque::new();
    for event in events {
        let Ok(event) = event else {
            return (out.into(), Err(DecodeError::Malformed("bad utf-8".into())));
        };
        match decoder.on_event(&event, &mut out) {
            Ok(Progress::More) => {}
            Ok(Progress::Done) => return (out.into(), Ok(())),
            Err(error) => return (out.into(), Err(error)),
        }
    }
    let end = decoder.on_eof(&mut out);
    (out.into(), end)
}

/// At most 200 characters of `data`, for error messages that quote an
/// event a decoder could not read.
pub fn snippet(data: &str) -> String {
    shorten(data, 200)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_are_cut_at_200_characters() {
        assert_eq!(snippet("short"), "short");
        let long = "é".repeat(300);
        let cut = snippet(&long);
        assert_eq!(cut.chars().count(), 201);
        assert!(cut.ends_with('…'));
    }
}
