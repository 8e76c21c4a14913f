//! Turns a streaming HTTP response into [`InferenceEvent`]s, one SSE event
//! at a time, and recovers from a broken stream when that is safe.
//!
//! The wire formats differ only in how an SSE event maps to inference
//! events, so each engine supplies a [`Decoder`] and this module does the
//! rest: incremental parsing (eventsource-stream copes with events and
//! UTF-8 characters split across reads), the idle timeout, cancellation,
//! and the retry rule: a stream that breaks before it delivered anything is
//! requested again; once anything was delivered the runtime has already
//! published it (text) or may act on it (tool calls), so the failure is
//! reported instead of replayed. A provider's "the request is longer than
//! the context window", in the HTTP answer or inside the stream, ends the
//! request at once as `roder_api::inference::ContextOverflow`.

use std::collections::VecDeque;
use std::pin::Pin;

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use roder_api::inference::{InferenceEvent, InferenceEventStream, InferenceFailure};

use crate::decoder::{DecodeError, Decoder, Progress};
use crate::error::{ProviderError, chain};
use crate::exchange::Exchange;

type SseStream =
    Pin<Box<dyn Stream<Item = Result<Event, EventStreamError<reqwest::Error>>> + Send + 'static>>;

/// What one read of the stream came to.
enum Step {
    Continue,
    Done,
    /// Ends the stream with this item.
    Fatal(anyhow::Result<InferenceEvent>),
    /// Worth another attempt if nothing was delivered yet.
    Retryable(ProviderError),
}

/// Reads one [`Exchange`] with one [`Decoder`], retrying as allowed.
pub struct Driver<D> {
    exchange: Exchange,
    initial: D,
    decoder: D,
    body: Option<SseStream>,
    pending: VecDeque<InferenceEvent>,
    delivered: bool,
    finished: bool,
}

impl<D: Decoder> Driver<D> {
    /// Sends the request (with retries) and returns once the response
    /// headers arrived, so that errors a user must fix (key, URL, model
    /// name) come back from `stream_turn` itself.
    pub async fn open(mut exchange: Exchange, decoder: D) -> Result<Self, ProviderError> {
        let response = exchange.send().await?;
        Ok(Self {
            exchange,
            initial: decoder.clone(),
            decoder,
            body: Some(sse(response)),
            pending: VecDeque::new(),
            delivered: false,
            finished: false,
        })
    }

    /// [`Driver::open`] then [`Driver::into_stream`], with the error as an
    /// engine's `stream_turn` returns it ([`ProviderError::into_anyhow`]:
    /// a context overflow is `roder_api::inference::ContextOverflow`).
    pub async fn start(exchange: Exchange, decoder: D) -> anyhow::Result<InferenceEventStream> {
        match Self::open(exchange, decoder).await {
            Ok(driver) => Ok(driver.into_stream()),
            Err(error) => Err(error.into_anyhow()),
        }
    }

    /// The events as a stream. Dropping it drops the connection.
    pub fn into_stream(self) -> InferenceEventStream {
        futures::stream::unfold(self, |mut driver| async move {
            let item = driver.next().await?;
            Some((item, driver))
        })
        .boxed()
    }

    async fn next(&mut self) -> Option<anyhow::Result<InferenceEvent>> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                self.delivered = true;
                return Some(Ok(event));
            }
            if self.finished {
                return None;
            }
            let failure = match self.step().await {
                Step::Continue => continue,
                Step::Done => {
                    self.finished = true;
                    self.body = None;
                    continue;
                }
                Step::Fatal(item) => return Some(self.finish(item)),
                Step::Retryable(failure) => failure,
            };
            // Drop the broken connection before anything else.
            self.body = None;
            if self.delivered {
                let error = ProviderError::AfterOutput {
                    source: Box::new(failure),
                };
                return Some(self.finish(Err(error.into_anyhow())));
            }
            if let Err(error) = self.exchange.before_retry(failure, None).await {
                return Some(self.finish(Err(error.into_anyhow())));
            }
            match self.exchange.send().await {
                Ok(response) => {
                    self.body = Some(sse(response));
                    self.decoder = self.initial.clone();
                    self.pending.clear();
                }
                Err(error) => return Some(self.finish(Err(error.into_anyhow()))),
            }
        }
    }

    fn finish(&mut self, item: anyhow::Result<InferenceEvent>) -> anyhow::Result<InferenceEvent> {
        self.finished = true;
        self.body = None;
        self.pending.clear();
        item
    }

    async fn step(&mut self) -> Step {
        let idle = self.exchange.idle_timeout();
        let Some(body) = self.body.as_mut() else {
            return Step::Retryable(self.dropped("the connection is gone".to_string()));
        };
        let next = tokio::select! {
            biased;
            _ = self.exchange.cancel().cancelled() => {
                return Step::Fatal(Err(self.exchange.cancelled().into_anyhow()));
            }
            next = tokio::time::timeout(idle, body.next()) => next,
        };
        match next {
            Err(_) => {
                Step::Retryable(self.dropped(format!("no data for {} seconds", idle.as_secs_f64())))
            }
            Ok(Some(Ok(event))) => match self.decoder.on_event(&event, &mut self.pending) {
                Ok(Progress::More) => Step::Continue,
                Ok(Progress::Done) => Step::Done,
                Err(error) => self.decode_failure(error),
            },
            Ok(Some(Err(error))) => Step::Retryable(self.dropped(chain(&error))),
            Ok(None) => match self.decoder.on_eof(&mut self.pending) {
                Ok(()) => Step::Done,
                Err(error) => self.decode_failure(error),
            },
        }
    }

    fn decode_failure(&self, error: DecodeError) -> Step {
        let provider = self.exchange.provider().to_string();
        match error {
            DecodeError::Truncated => Step::Retryable(
                self.dropped("the stream ended before the response was complete".to_string()),
            ),
            DecodeError::ContextOverflow { message } => {
                Step::Fatal(Err(crate::overflow::overflow_error(message)))
            }
            DecodeError::Malformed(detail) => {
                Step::Fatal(Err(ProviderError::Protocol { provider, detail }.into()))
            }
            DecodeError::Reported { message, retry } => {
                let error = ProviderError::Reported {
                    provider,
                    message,
                    retry,
                };
                if retry.is_retryable() {
                    Step::Retryable(error)
                } else {
                    Step::Fatal(Ok(InferenceEvent::Failed(InferenceFailure {
                        message: error.to_string(),
                    })))
                }
            }
        }
    }

    fn dropped(&self, detail: String) -> ProviderError {
        ProviderError::StreamDropped {
            provider: self.exchange.provider().to_string(),
            detail,
        }
    }
}

fn sse(response: reqwest::Response) -> SseStream {
    Box::pin(crate::line_frames::whole_lines(Box::pin(response.bytes_stream())).eventsource())
}
