//! Following a thread live from any replica: LISTEN/NOTIFY for the wake-up,
//! the log itself for the events.
//!
//! Every append notifies channel [`CHANNEL`] with `"<thread_id> <last_seq>"`
//! in its own transaction, so the notification is delivered at commit and
//! only then. A replica runs one listener connection (started by its first
//! follower) and routes each notification to the followers of that thread
//! alone: a replica with no follower of a thread does nothing for it but
//! parse one short payload. A follower never takes events from the
//! notification: it reads the log after its cursor, so nothing is lost or
//! doubled, whatever is coalesced, dropped or delivered twice. A lost
//! listener connection wakes every follower to re-read from its cursor
//! once the listener is back (LISTEN is re-issued before that).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, bail};
use roder_api::events::EventEnvelope;
use roder_api::thread::ThreadStore;
use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::watch;

use crate::store::PostgresThreadStore;
use crate::thread_id;

/// The channel appends notify.
pub const CHANNEL: &str = "roder_events";

/// How many events a follower reads per query.
const PAGE_ITEMS: usize = 512;
const PAGE_BYTES: usize = 8 * 1024 * 1024;

/// Wait before listening again after the listener failed.
const RELISTEN_BACKOFF: Duration = Duration::from_millis(500);

type Routes = Arc<Mutex<HashMap<String, watch::Sender<WakeUp>>>>;

/// What a follower is woken with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct WakeUp {
    /// The greatest `last_seq` notified for the thread.
    notified_seq: u64,
    /// Moves when everyone must re-read whatever was notified (the listener
    /// was lost, or a payload did not parse).
    rereads: u64,
}

/// A replica's one listener and its routes; started by the first follower.
pub(crate) struct Follower {
    pool: PgPool,
    hub: tokio::sync::Mutex<Option<Hub>>,
}

struct Hub {
    routes: Routes,
    task: tokio::task::JoinHandle<()>,
}

impl Follower {
    pub(crate) fn new(pool: PgPool) -> Self {
        Self {
            pool,
            hub: tokio::sync::Mutex::new(None),
        }
    }

    /// The wake-up of `thread_id`; the listener is listening when this
    /// returns, so a read of the log after it misses nothing.
    async fn subscribe(&self, thread_id: &str) -> anyhow::Result<watch::Receiver<WakeUp>> {
        let mut hub = self.hub.lock().await;
        if hub.as_ref().is_none_or(|hub| hub.task.is_finished()) {
            let mut listener = PgListener::connect_with(&self.pool)
                .await
                .context("cannot open the Postgres listener connection")?;
            listener
                .listen(CHANNEL)
                .await
                .with_context(|| format!("cannot LISTEN on {CHANNEL}"))?;
            let routes = Routes::default();
            let task = tokio::spawn(listen(listener, routes.clone(), self.pool.clone()));
            *hub = Some(Hub { routes, task });
        }
        let Some(hub) = hub.as_ref() else {
            bail!("the Postgres listener is not running");
        };
        let mut routes = hub.routes.lock().unwrap_or_else(PoisonError::into_inner);
        routes.retain(|_, sender| sender.receiver_count() > 0);
        let sender = routes
            .entry(thread_id.to_string())
            .or_insert_with(|| watch::channel(WakeUp::default()).0);
        Ok(sender.subscribe())
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        if let Some(hub) = self.hub.get_mut().take() {
            hub.task.abort();
        }
    }
}

/// Routes notifications to followers until the store is dropped or its
/// pool closed (followers then get an error from `next`).
async fn listen(listener: PgListener, routes: Routes, pool: PgPool) {
    route(listener, &routes, &pool).await;
    // Dropping the senders ends every follower's wait with an error.
    routes
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
}

async fn route(mut listener: PgListener, routes: &Routes, pool: &PgPool) {
    loop {
        if pool.is_closed() {
            return;
        }
        match listener.try_recv().await {
            Ok(Some(notification)) => {
                let payload = notification.payload();
                let (thread, seq) = match payload.rsplit_once(' ') {
                    Some((thread, seq)) => (thread, seq.parse::<u64>().ok()),
                    None => (payload, None),
                };
                let routes = routes.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some(sender) = routes.get(thread) {
                    sender.send_modify(|wake| match seq {
                        Some(seq) => wake.notified_seq = wake.notified_seq.max(seq),
                        None => wake.rereads = wake.rereads.wrapping_add(1),
                    });
                }
            }
            // The connection was lost and is back, LISTENing again: what
            // was notified in between is gone, so everyone re-reads.
            Ok(None) => wake_all(routes),
            Err(error) => {
                tracing::warn!("the Postgres listener failed: {error}; listening again");
                loop {
                    tokio::time::sleep(RELISTEN_BACKOFF).await;
                    if pool.is_closed() {
                        return;
                    }
                    // Any statement reconnects the listener and re-LISTENs.
                    if sqlx::query("SELECT 1").execute(&mut listener).await.is_ok() {
                        break;
                    }
                }
                wake_all(routes);
            }
        }
    }
}

fn wake_all(routes: &Routes) {
    for sender in routes
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .values()
    {
        sender.send_modify(|wake| wake.rereads = wake.rereads.wrapping_add(1));
    }
}

/// Follows one thread's log from a cursor: every event with a greater seq,
/// in order, each once, as they are appended by any replica.
pub struct ThreadFollower {
    store: PostgresThreadStore,
    thread_id: String,
    cursor: u64,
    pub(crate) wake: watch::Receiver<WakeUp>,
    /// `wake.rereads` when last looked at.
    rereads: u64,
    /// Whether the log may hold events after the cursor not read yet.
    must_read: bool,
    /// What the consumer already has from elsewhere (see
    /// [`PostgresThreadStore::follow_after_sent`]).
    sent: Option<Arc<AtomicU64>>,
    buffered: VecDeque<EventEnvelope>,
}

impl std::fmt::Debug for ThreadFollower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadFollower")
            .field("thread_id", &self.thread_id)
            .field("cursor", &self.cursor)
            .finish_non_exhaustive()
    }
}

impl PostgresThreadStore {
    /// Follows `thread_id` from `after_seq` (0: from its start). A client
    /// that reconnects passes the last seq it saw and gets the rest, once.
    pub async fn follow(&self, thread_id: &str, after_seq: u64) -> anyhow::Result<ThreadFollower> {
        self.follow_after_sent(thread_id, after_seq, None).await
    }

    /// [`follow`](Self::follow) for a consumer that also gets some events
    /// from elsewhere (the app server's own bus, for a thread its replica
    /// writes): `sent` is the last seq it already has, every one before it
    /// included, and only grows. The follower then skips the events at or
    /// below it and does not read the log for a notification it covers.
    pub async fn follow_after_sent(
        &self,
        thread_id: &str,
        after_seq: u64,
        sent: Option<Arc<AtomicU64>>,
    ) -> anyhow::Result<ThreadFollower> {
        thread_id::validate(thread_id)?;
        self.ready().await?;
        let mut wake = self.follower.subscribe(thread_id).await?;
        // The first read below is a replay: mark the current wake-ups seen.
        let rereads = wake.borrow_and_update().rereads;
        Ok(ThreadFollower {
            store: self.clone(),
            thread_id: thread_id.to_string(),
            cursor: after_seq,
            wake,
            rereads,
            must_read: true,
            sent,
            buffered: VecDeque::new(),
        })
    }
}

impl PostgresThreadStore {
    /// [`follow`](Self::follow) as a stream (what the app server's follow
    /// source takes): the events in order; an error (then the end) when
    /// following fails, after which the caller follows again from the last
    /// seq it received.
    pub fn follow_stream(
        &self,
        thread_id: &str,
        after_seq: u64,
    ) -> futures::stream::BoxStream<'static, anyhow::Result<EventEnvelope>> {
        self.follow_stream_after_sent(thread_id, after_seq, None)
    }

    /// [`follow_after_sent`](Self::follow_after_sent) as a stream.
    pub fn follow_stream_after_sent(
        &self,
        thread_id: &str,
        after_seq: u64,
        sent: Option<Arc<AtomicU64>>,
    ) -> futures::stream::BoxStream<'static, anyhow::Result<EventEnvelope>> {
        let store = self.clone();
        let thread_id = thread_id.to_string();
        let follower = async move { store.follow_after_sent(&thread_id, after_seq, sent).await };
        Box::pin(futures::stream::unfold(
            Some(FollowState::Starting(Box::pin(follower))),
            |state| async move {
                let mut follower = match state? {
                    FollowState::Starting(start) => match start.await {
                        Ok(follower) => follower,
                        Err(error) => return Some((Err(error), None)),
                    },
                    FollowState::Following(follower) => follower,
                };
                match follower.next().await {
                    Ok(envelope) => Some((Ok(envelope), Some(FollowState::Following(follower)))),
                    Err(error) => Some((Err(error), None)),
                }
            },
        ))
    }
}

enum FollowState {
    Starting(futures::future::BoxFuture<'static, anyhow::Result<ThreadFollower>>),
    Following(ThreadFollower),
}

impl ThreadFollower {
    /// The seq of the last event returned (or the starting cursor).
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// The next event after the cursor; waits for one to be appended.
    pub async fn next(&mut self) -> anyhow::Result<EventEnvelope> {
        loop {
            let sent = self.sent_seq();
            if sent > self.cursor {
                self.cursor = sent;
                self.buffered.retain(|envelope| envelope.seq > sent);
            }
            if let Some(envelope) = self.buffered.pop_front() {
                self.cursor = envelope.seq;
                return Ok(envelope);
            }
            if self.must_read {
                let page = self
                    .store
                    .load_events_page(&self.thread_id, self.cursor, PAGE_ITEMS, PAGE_BYTES)
                    .await?;
                // Wake-ups were marked seen before this read, so a later
                // append wakes the wait below; only a cut page needs more.
                self.must_read = page.more;
                if !page.events.is_empty() {
                    self.buffered.extend(page.events);
                    continue;
                }
            }
            self.wake.changed().await.with_context(|| {
                format!(
                    "stopped following thread \"{}\": the store's listener is gone",
                    self.thread_id
                )
            })?;
            let wake = *self.wake.borrow_and_update();
            self.must_read = wake.rereads != self.rereads
                || wake.notified_seq > self.cursor.max(self.sent_seq());
            self.rereads = wake.rereads;
        }
    }

    fn sent_seq(&self) -> u64 {
        self.sent
            .as_ref()
            .map_or(0, |sent| sent.load(Ordering::Acquire))
    }
}
