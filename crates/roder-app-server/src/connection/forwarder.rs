//! The task that turns a thread's events into `thread/event` notifications
//! for one connection.
//!
//! Live events come from two places: the server's router (`fanout`), which
//! hands this connection the runtime's events of the threads it follows and
//! of no other, and, when the server has a follow source (many replicas on
//! one store), a follower per subscribed thread reading what any process
//! appends. Subscribing routes the thread here first, then reads its
//! persisted log after the client's cursor, then lets live events through
//! that are newer than what was sent. Events are persisted before they are
//! broadcast or followed, so together they hold every event exactly once,
//! in `seq` order: whichever source brings a seq first sends it, the other's
//! copy is dropped.
//!
//! Live events never wait for the client: when its queue is full (or its
//! inbox at the router overflowed), every subscription is dropped and the
//! client gets a -32008 error naming the last seq queued per thread. It
//! resumes with `thread/resume` or `thread/events` from the last seq it
//! received.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use roder_api::events::{EventEnvelope, RoderEvent};
use roder_core::{ApproverGuard, Runtime};
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

use super::approver::Approver;
use super::fanout::{Fanout, Inbox};
use crate::convert;
use crate::error::{RpcError, codes};
use crate::follow::{SentCursor, SharedFollowSource};
use crate::protocol::{
    APPROVAL_REQUEST, APPROVAL_RESOLVED, LaggedData, ServerMessage, THREAD_EVENT, ThreadCursor,
};

/// Events a connection's store followers may hold before they wait for the
/// forwarder (they read the log, so waiting loses nothing).
const FOLLOWED_QUEUE: usize = 256;

/// Wait before following a thread again after the follow source failed.
const REFOLLOW_BACKOFF: Duration = Duration::from_millis(500);

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
    fanout: Arc<Fanout>,
    inbox: Inbox,
    commands: mpsc::Receiver<Command>,
    outgoing: mpsc::Sender<ServerMessage>,
    /// Subscribed threads and the last seq queued for each.
    delivered: BTreeMap<String, u64>,
    /// The store followers of subscribed threads (with a follow source).
    followers: HashMap<String, AbortHandle>,
    /// `delivered` of the followed threads, shared with their followers.
    sent: HashMap<String, SentCursor>,
    followed_tx: mpsc::Sender<EventEnvelope>,
    followed: mpsc::Receiver<EventEnvelope>,
    /// Whether the client answers approvals, and what it was asked.
    approver: Arc<Approver>,
    /// While the client answers approvals: its attachment to each thread it
    /// follows.
    attached: HashMap<String, ApproverGuard>,
    /// Asks this client was sent and has not seen resolved.
    asked: HashSet<String>,
}

impl Forwarder {
    pub fn new(
        runtime: Arc<Runtime>,
        fanout: Arc<Fanout>,
        commands: mpsc::Receiver<Command>,
        outgoing: mpsc::Sender<ServerMessage>,
        inbox_capacity: usize,
        approver: Arc<Approver>,
    ) -> Self {
        let (followed_tx, followed) = mpsc::channel(FOLLOWED_QUEUE);
        Self {
            inbox: fanout.inbox(inbox_capacity),
            fanout,
            runtime,
            commands,
            outgoing,
            delivered: BTreeMap::new(),
            followers: HashMap::new(),
            sent: HashMap::new(),
            followed_tx,
            followed,
            approver,
            attached: HashMap::new(),
            asked: HashSet::new(),
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
                () = self.inbox.lag.wait() => {
                    self.drop_subscriptions("the server's event buffer").await
                }
                event = self.inbox.events.recv() => match event {
                    Some(envelope) => self.forward(&envelope, Source::Local).await,
                    None => return,
                },
                event = self.followed.recv() => match event {
                    Some(envelope) => self.forward(&envelope, Source::Store).await,
                    None => return,
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
                let was = self.delivered.remove(&thread_id).is_some();
                self.stop_following(&thread_id);
                let _ = done.send(was);
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
        // Routed before the read: what is broadcast from now on reaches
        // the inbox, what was broadcast before is in the log already.
        self.fanout.add(&thread_id, &self.inbox);
        if self.approver.answers() && !self.attached.contains_key(&thread_id) {
            self.attached
                .insert(thread_id.clone(), self.runtime.attach_approver(&thread_id));
        }
        let page = match self.runtime.read_thread_events(&thread_id, after_seq).await {
            Ok(page) => page,
            Err(error) => {
                if !self.delivered.contains_key(&thread_id) {
                    self.fanout.remove(&thread_id, self.inbox.id);
                    self.attached.remove(&thread_id);
                }
                return Err(SubscribeError::Runtime(error));
            }
        };
        // Stop live forwarding while the log is sent, so nothing overtakes it.
        self.delivered.remove(&thread_id);
        if let Some(follower) = self.followers.remove(&thread_id) {
            follower.abort();
        }
        let mut last = after_seq;
        for envelope in &page.events {
            for message in std::iter::once(notification(envelope)).chain(self.approvals(envelope)) {
                self.outgoing
                    .send(message)
                    .await
                    .map_err(|_| SubscribeError::Gone)?;
            }
            last = envelope.seq;
        }
        if let Some(source) = self.fanout.follow_source() {
            let sent = Arc::new(AtomicU64::new(last));
            self.sent.insert(thread_id.clone(), sent.clone());
            let follower = tokio::spawn(follow_store(
                source.clone(),
                thread_id.clone(),
                last,
                sent,
                self.followed_tx.clone(),
            ));
            self.followers
                .insert(thread_id.clone(), follower.abort_handle());
        }
        self.delivered.insert(thread_id, last);
        Ok(last)
    }

    /// What an approver is sent after `envelope`: the `approval/request`
    /// of an ask still pending (live, or replayed to a client that
    /// subscribes while it waits), and `approval/resolved` for an ask it
    /// was sent.
    fn approvals(&mut self, envelope: &EventEnvelope) -> Option<ServerMessage> {
        if !self.approver.answers() {
            return None;
        }
        match &envelope.event {
            RoderEvent::ApprovalRequested(ask)
                if self.runtime.is_approval_pending(&ask.approval_id)
                    && self.asked.insert(ask.approval_id.clone()) =>
            {
                let params = serde_json::to_value(convert::approval_request(ask)).ok()?;
                let id = self.approver.request(&ask.approval_id);
                Some(ServerMessage::request(id, APPROVAL_REQUEST, params))
            }
            RoderEvent::ApprovalResolved(resolved) if self.asked.remove(&resolved.approval_id) => {
                let params = serde_json::to_value(convert::approval_resolved(resolved)).ok()?;
                Some(ServerMessage::notification(APPROVAL_RESOLVED, params))
            }
            _ => None,
        }
    }

    fn stop_following(&mut self, thread_id: &str) {
        self.attached.remove(thread_id);
        self.fanout.remove(thread_id, self.inbox.id);
        self.sent.remove(thread_id);
        if let Some(follower) = self.followers.remove(thread_id) {
            follower.abort();
        }
    }

    async fn forward(&mut self, envelope: &EventEnvelope, source: Source) -> Result<(), Gone> {
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
        // With a store follower, the local bus is only a shortcut: it lacks
        // what other processes wrote (a thread this replica took over has
        // their events before its own), so a local event that does not
        // continue what was sent waits for the follower, which has every
        // event in order. Without one, the local bus is the whole log.
        let ahead = matches!(source, Source::Local)
            && self.followers.contains_key(&envelope.thread_id)
            && if transient {
                envelope.seq > *delivered
            } else {
                envelope.seq > *delivered + 1
            };
        if stale || ahead {
            return Ok(());
        }
        match self.outgoing.try_send(notification(envelope)) {
            Ok(()) => {
                if !transient {
                    *delivered = envelope.seq;
                    if let Some(sent) = self.sent.get(&envelope.thread_id) {
                        sent.store(envelope.seq, Ordering::Release);
                    }
                }
            }
            Err(TrySendError::Full(_)) => return self.drop_subscriptions("its queue").await,
            Err(TrySendError::Closed(_)) => return Err(Gone),
        }
        let Some(message) = self.approvals(envelope) else {
            return Ok(());
        };
        match self.outgoing.try_send(message) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => self.drop_subscriptions("its queue").await,
            Err(TrySendError::Closed(_)) => Err(Gone),
        }
    }

    /// Drops every subscription and tells the client where each stopped. The
    /// error waits for room behind what is already queued, so it arrives
    /// after the last notification it reports.
    async fn drop_subscriptions(&mut self, what_overflowed: &str) -> Result<(), Gone> {
        let dropped = std::mem::take(&mut self.delivered);
        for thread_id in dropped.keys() {
            self.stop_following(thread_id);
        }
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

impl Drop for Forwarder {
    /// The connection closed: nothing is routed to it any more.
    fn drop(&mut self) {
        let threads: Vec<String> = self.delivered.keys().cloned().collect();
        for thread_id in threads {
            self.stop_following(&thread_id);
        }
        for (_, follower) in self.followers.drain() {
            follower.abort();
        }
    }
}

/// Follows `thread_id` in the store from `cursor` until aborted, following
/// again from the last seq received whenever the source fails.
async fn follow_store(
    source: SharedFollowSource,
    thread_id: String,
    mut cursor: u64,
    sent: SentCursor,
    sender: mpsc::Sender<EventEnvelope>,
) {
    loop {
        let mut stream = source.follow_after_sent(&thread_id, cursor, sent.clone());
        while let Some(item) = stream.next().await {
            match item {
                Ok(envelope) if envelope.seq <= cursor => {}
                Ok(envelope) => {
                    cursor = envelope.seq;
                    if sender.send(envelope).await.is_err() {
                        return;
                    }
                }
                Err(error) => {
                    tracing::warn!(
                        thread_id,
                        "following the thread in the store failed: {error:#}; following again"
                    );
                    break;
                }
            }
        }
        tokio::time::sleep(REFOLLOW_BACKOFF).await;
    }
}

/// Where a live event came from.
#[derive(Clone, Copy)]
enum Source {
    /// The router (this process's runtime).
    Local,
    /// The thread's follower in the store (any process).
    Store,
}

enum SubscribeError {
    Runtime(anyhow::Error),
    Gone,
}

fn notification(envelope: &EventEnvelope) -> ServerMessage {
    let params = serde_json::to_value(convert::thread_event(envelope)).unwrap_or_default();
    ServerMessage::notification(THREAD_EVENT, params)
}
