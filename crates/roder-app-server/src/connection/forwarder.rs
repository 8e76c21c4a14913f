//! The task that turns runtime events into `thread/event` notifications for
//! the threads one connection is subscribed to.
//!
//! It follows the runtime's broadcast from the moment the connection opens.
//! Subscribing reads the thread's persisted log after the client's cursor
//! first, then lets live events through that are newer than what the log
//! read returned. Events are persisted before they are broadcast, so the two
//! together hold every event exactly once, in `seq` order.
//!
//! Live events never wait for the client: when its queue is full (or the
//! broadcast outran this task), every subscription is dropped and the client
//! gets a -32008 error naming the last seq queued per thread. It resumes
//! with `thread/resume` or `thread/events` from the last seq it received.

use std::collections::BTreeMap;
use std::sync::Arc;

use roder_api::events::EventEnvelope;
use roder_core::Runtime;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::convert;
use crate::error::{RpcError, codes};
use crate::protocol::{LaggedData, ServerMessage, THREAD_EVENT, ThreadCursor};

/// What handlers ask of the forwarder.
pub(crate) enum Command {
    Subscribe {
        thread_id: String,
        after_seq: u64,
        /// The last seq sent from the log (or `after_seq` when none).
        done: oneshot::Sender<anyhow::Result<u64>>,
    },
    Unsubscribe {
        thread_id: String,
        /// Whether the connection was subscribed.
        done: oneshot::Sender<bool>,
    },
}

/// The client went away; nothing more to do.
struct Gone;

pub(crate) struct Forwarder {
    runtime: Arc<Runtime>,
    events: broadcast::Receiver<EventEnvelope>,
    commands: mpsc::Receiver<Command>,
    outgoing: mpsc::Sender<ServerMessage>,
    /// Subscribed threads and the last seq queued for each.
    delivered: BTreeMap<String, u64>,
}

impl Forwarder {
    /// Subscribes to the runtime's events now, so nothing emitted after this
    /// call can be missed by a later subscription.
    pub fn new(
        runtime: Arc<Runtime>,
        commands: mpsc::Receiver<Command>,
        outgoing: mpsc::Sender<ServerMessage>,
    ) -> Self {
        Self {
            events: runtime.subscribe_events(),
            runtime,
            commands,
            outgoing,
            delivered: BTreeMap::new(),
        }
    }

    pub async fn run(mut self) {
        loop {
            let step = tokio::select! {
                // Commands first: a subscriber waits for its answer.
                biased;
                command = self.commands.recv() => match command {
                    Some(command) => self.apply(command).await,
                    None => return,
                },
                event = self.events.recv() => match event {
                    Ok(envelope) => self.forward(envelope).await,
                    Err(RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "client fell behind the event bus");
                        self.drop_subscriptions("the server's event buffer").await
                    }
                    Err(RecvError::Closed) => return,
                },
            };
            if step.is_err() {
                return;
            }
        }
    }

    async fn apply(&mut self, command: Command) -> Result<(), Gone> {
        match command {
            Command::Subscribe {
                thread_id,
                after_seq,
                done,
            } => {
                let result = self.subscribe(thread_id, after_seq).await;
                let gone = matches!(result, Err(SubscribeError::Gone));
                let _ = done.send(result.map_err(|error| match error {
                    SubscribeError::Runtime(error) => error,
                    SubscribeError::Gone => anyhow::anyhow!("the client disconnected"),
                }));
                if gone { Err(Gone) } else { Ok(()) }
            }
            Command::Unsubscribe { thread_id, done } => {
                let _ = done.send(self.delivered.remove(&thread_id).is_some());
                Ok(())
            }
        }
    }

    /// Sends the thread's log after `after_seq`, then follows it live. The
    /// log part waits for room in the queue: the client asked for it and is
    /// waiting for the answer, so it is reading.
    async fn subscribe(
        &mut self,
        thread_id: String,
        after_seq: u64,
    ) -> Result<u64, SubscribeError> {
        let page = self
            .runtime
            .read_thread_events(&thread_id, after_seq)
            .await
            .map_err(SubscribeError::Runtime)?;
        // Stop live forwarding while the log is sent, so nothing overtakes it.
        self.delivered.remove(&thread_id);
        let mut last = after_seq;
        for envelope in &page.events {
            self.outgoing
                .send(notification(envelope))
                .await
                .map_err(|_| SubscribeError::Gone)?;
            last = envelope.seq;
        }
        self.delivered.insert(thread_id, last);
        Ok(last)
    }

    async fn forward(&mut self, envelope: EventEnvelope) -> Result<(), Gone> {
        let Some(delivered) = self.delivered.get_mut(&envelope.thread_id) else {
            return Ok(());
        };
        // A transient event (a streamed delta) carries the seq of the
        // persisted event before it and is never in the log: it is live
        // unless something after it was already sent.
        let transient = envelope.event.is_transient();
        let stale = if transient {
            envelope.seq < *delivered
        } else {
            envelope.seq <= *delivered
        };
        if stale {
            return Ok(());
        }
        match self.outgoing.try_send(notification(&envelope)) {
            Ok(()) => {
                if !transient {
                    *delivered = envelope.seq;
                }
                Ok(())
            }
            Err(TrySendError::Full(_)) => self.drop_subscriptions("its queue").await,
            Err(TrySendError::Closed(_)) => Err(Gone),
        }
    }

    /// Drops every subscription and tells the client where each stopped. The
    /// error waits for room behind what is already queued, so it arrives
    /// after the last notification it reports.
    async fn drop_subscriptions(&mut self, what_overflowed: &str) -> Result<(), Gone> {
        let dropped = std::mem::take(&mut self.delivered);
        if dropped.is_empty() {
            return Ok(());
        }
        let data = LaggedData {
            threads: dropped
                .into_iter()
                .map(|(thread_id, last_seq)| ThreadCursor {
                    thread_id,
                    last_seq,
                })
                .collect(),
        };
        let error = RpcError::new(
            codes::CLIENT_LAGGED,
            format!(
                "the client read too slowly and {what_overflowed} overflowed: its subscriptions were dropped; resume each thread with thread/resume (or thread/events) from the last seq received"
            ),
        )
        .with_data(serde_json::to_value(&data).unwrap_or_default());
        self.outgoing
            .send(ServerMessage::error(None, error.into_object()))
            .await
            .map_err(|_| Gone)
    }
}

enum SubscribeError {
    Runtime(anyhow::Error),
    Gone,
}

fn notification(envelope: &EventEnvelope) -> ServerMessage {
    let params = serde_json::to_value(convert::thread_event(envelope)).unwrap_or_default();
    ServerMessage::notification(THREAD_EVENT, params)
}
