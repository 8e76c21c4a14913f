//! The warm pool: containers created and started ahead of need, so a new
//! thread's first tool call does not wait for a container start.
//!
//! Pools are keyed by config fingerprint, not destination id: explicitly
//! bound threads each get their own destination (`thread-<id>`), yet threads
//! with the same config can use the same containers. A pool fills in
//! background tasks (at most [`MAX_PARALLEL_FILLS`] creates at a time) and
//! refills after every take. A container leaves the pool's queue under its
//! lock, so none is ever handed out twice. A failed fill stops refilling
//! that pool until it is asked for again, so a missing image does not turn
//! into a busy loop of failing creates.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;

use crate::client::Client;
use crate::config::DockerConfig;
use crate::container;
use crate::labels;

/// Most container creates one pool runs at once.
const MAX_PARALLEL_FILLS: usize = 2;

/// How long `shutdown` waits for creates in flight.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Clone)]
pub(crate) struct Pool {
    inner: Arc<Inner>,
}

struct Inner {
    client: Arc<Client>,
    /// Labels this provider instance's pool containers, so `gc` can tell
    /// them from orphans of a process that is gone.
    owner: String,
    /// The provider's home id, on every container the pool creates.
    home: Option<String>,
    state: Mutex<State>,
    /// Woken on every change of any pool.
    changed: Notify,
}

#[derive(Default)]
struct State {
    pools: HashMap<String, Entry>,
    closed: bool,
}

struct Entry {
    config: Arc<DockerConfig>,
    /// Started containers waiting to be claimed (ids).
    ready: VecDeque<String>,
    /// Creates in flight.
    filling: usize,
    /// Why the last fill failed; refilling pauses until the next `ensure`.
    failed: Option<String>,
}

impl Pool {
    pub fn new(client: Arc<Client>, owner: String, home: Option<String>) -> Self {
        Self {
            inner: Arc::new(Inner {
                client,
                owner,
                home,
                state: Mutex::new(State::default()),
                changed: Notify::new(),
            }),
        }
    }

    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes sure the pool of `config` exists and is filling toward its
    /// `pool_size`; clears a previous failure so filling is retried.
    pub fn ensure(&self, config: &DockerConfig) {
        if config.pool_size == 0 {
            return;
        }
        let fingerprint = config.fingerprint();
        {
            let mut state = self.state();
            if state.closed {
                return;
            }
            let entry = state
                .pools
                .entry(fingerprint.clone())
                .or_insert_with(|| Entry {
                    config: Arc::new(config.clone()),
                    ready: VecDeque::new(),
                    filling: 0,
                    failed: None,
                });
            entry.failed = None;
        }
        self.refill(&fingerprint);
    }

    /// Takes a ready container of `config`'s pool, if there is one, and
    /// starts refilling behind it.
    pub fn take(&self, config: &DockerConfig) -> Option<String> {
        if config.pool_size == 0 {
            return None;
        }
        let fingerprint = config.fingerprint();
        let taken = self
            .state()
            .pools
            .get_mut(&fingerprint)
            .and_then(|entry| entry.ready.pop_front());
        self.inner.changed.notify_waiters();
        self.refill(&fingerprint);
        taken
    }

    /// Ready containers in `config`'s pool.
    pub fn ready(&self, config: &DockerConfig) -> usize {
        self.state()
            .pools
            .get(&config.fingerprint())
            .map_or(0, |entry| entry.ready.len())
    }

    /// Waits until `config`'s pool holds `count` ready containers; fails
    /// with the fill error when filling failed, or after `timeout`.
    pub async fn wait_ready(
        &self,
        config: &DockerConfig,
        count: usize,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        let fingerprint = config.fingerprint();
        let wait = async {
            loop {
                let changed = self.inner.changed.notified();
                tokio::pin!(changed);
                changed.as_mut().enable();
                {
                    let state = self.state();
                    let Some(entry) = state.pools.get(&fingerprint) else {
                        anyhow::bail!("no warm pool for this config: its pool_size is 0");
                    };
                    if entry.ready.len() >= count {
                        return Ok(());
                    }
                    if let Some(error) = &entry.failed {
                        anyhow::bail!("the warm pool could not create a container: {error}");
                    }
                    if state.closed {
                        anyhow::bail!("the warm pool is shut down");
                    }
                }
                changed.await;
            }
        };
        tokio::time::timeout(timeout, wait).await.map_err(|_| {
            anyhow::anyhow!(
                "the warm pool did not reach {count} ready containers within {} s",
                timeout.as_secs()
            )
        })?
    }

    /// Starts creates until ready + in flight reaches the pool size.
    fn refill(&self, fingerprint: &str) {
        let to_start = {
            let mut state = self.state();
            if state.closed {
                return;
            }
            let Some(entry) = state.pools.get_mut(fingerprint) else {
                return;
            };
            if entry.failed.is_some() {
                return;
            }
            let missing = entry
                .config
                .pool_size
                .saturating_sub(entry.ready.len() + entry.filling);
            let to_start = missing.min(MAX_PARALLEL_FILLS.saturating_sub(entry.filling));
            entry.filling += to_start;
            (0..to_start)
                .map(|_| entry.config.clone())
                .collect::<Vec<_>>()
        };
        for config in to_start {
            let pool = self.clone();
            let fingerprint = fingerprint.to_string();
            tokio::spawn(async move { pool.fill_one(fingerprint, config).await });
        }
    }

    /// Creates one container and queues it. A container finished after
    /// `shutdown` began is removed before it stops counting as in flight,
    /// so `shutdown` returns only once nothing is left behind.
    async fn fill_one(self, fingerprint: String, config: Arc<DockerConfig>) {
        let created = self.create(&fingerprint, &config).await;
        let orphan = {
            let mut state = self.state();
            let closed = state.closed;
            match (created, state.pools.get_mut(&fingerprint)) {
                (Ok(id), Some(entry)) if !closed => {
                    entry.ready.push_back(id);
                    entry.filling -= 1;
                    None
                }
                (Ok(id), _) => Some(id),
                (Err(error), Some(entry)) => {
                    tracing::warn!("warm pool fill failed: {error:#}");
                    entry.failed = Some(format!("{error:#}"));
                    entry.filling -= 1;
                    None
                }
                (Err(_), None) => None,
            }
        };
        if let Some(id) = &orphan {
            if let Ok(docker) = self.inner.client.get().await {
                container::remove(docker, id).await.ok();
            }
            if let Some(entry) = self.state().pools.get_mut(&fingerprint) {
                entry.filling -= 1;
            }
        }
        self.inner.changed.notify_waiters();
        if orphan.is_none() {
            self.refill(&fingerprint);
        }
    }

    async fn create(&self, fingerprint: &str, config: &DockerConfig) -> anyhow::Result<String> {
        let docker = self.inner.client.get().await?;
        let mut all = container::base_labels(config, self.inner.home.as_deref());
        all.insert(labels::POOL.to_string(), fingerprint.to_string());
        all.insert(labels::POOL_OWNER.to_string(), self.inner.owner.clone());
        let name = labels::pool_name(&labels::name_suffix());
        container::create_and_start(docker, config, all, &name).await
    }

    /// Stops filling and removes every unclaimed container (also those
    /// still being created). Returns how many were removed.
    pub async fn shutdown(&self) -> anyhow::Result<usize> {
        let ready: Vec<String> = {
            let mut state = self.state();
            state.closed = true;
            state
                .pools
                .values_mut()
                .flat_map(|entry| entry.ready.drain(..))
                .collect()
        };
        self.inner.changed.notify_waiters();
        let in_flight = async {
            loop {
                let changed = self.inner.changed.notified();
                tokio::pin!(changed);
                changed.as_mut().enable();
                if self.state().pools.values().all(|entry| entry.filling == 0) {
                    return;
                }
                changed.await;
            }
        };
        let settled = tokio::time::timeout(SHUTDOWN_TIMEOUT, in_flight)
            .await
            .is_ok();
        let docker = self.inner.client.get().await?;
        for id in &ready {
            container::remove(docker, id).await?;
        }
        if !settled {
            anyhow::bail!(
                "warm pool creates were still running after {} s; `gc` removes what they leave",
                SHUTDOWN_TIMEOUT.as_secs()
            );
        }
        Ok(ready.len())
    }
}
