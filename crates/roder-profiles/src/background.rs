//! Revalidating an archive the resolver already resolved, off the path of
//! a thread's start.
//!
//! Once a process has resolved a profile from an HTTP archive, the snapshot
//! is fixed by the archive's digest (`memo.rs`): no answer of the server
//! can change it. A later start with the same archive then uses the
//! snapshot at once and revalidates in the background (If-None-Match with
//! the recorded ETag, as `fetch.rs` does), so a start never waits on the
//! network for content it holds, and the server still sees each use and
//! can refresh the ETag. What the background fetch finds is logged: a 304
//! or a 200 of the same bytes is quiet, an unreachable server or bytes
//! that do not match the digest are warnings (the thread already started
//! from the verified copy, which is what the reference names).
//!
//! One revalidation per URL and digest is in flight at a time, and one
//! starts at most every [`MIN_INTERVAL`]: a burst of thread starts (an
//! evaluation starting hundreds) sends the server a conditional request a
//! second, not one per thread, and a slow or hanging server does not
//! collect a pile of fetches.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::archive::ArchiveRef;
use crate::cache::ArchiveCache;
use crate::fetch::{self, FetchOutcome};

/// Shortest time between two background revalidations of one archive.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// How many archives' times are kept before the finished ones are dropped.
const MAX_ARCHIVES: usize = 256;

/// When each archive's last background revalidation started, and whether
/// it is still in flight; shared by a resolver's clones.
#[derive(Debug, Clone, Default)]
pub(crate) struct Revalidations(Arc<Mutex<HashMap<(String, String), Started>>>);

#[derive(Debug, Clone, Copy)]
struct Started {
    at: Instant,
    in_flight: bool,
}

impl Revalidations {
    /// Starts revalidating `reference` from `url` on the current Tokio
    /// runtime, unless one is in flight or started less than
    /// [`MIN_INTERVAL`] ago. Returns whether it started.
    pub fn start(
        &self,
        client: reqwest::Client,
        cache: ArchiveCache,
        url: &str,
        reference: &ArchiveRef,
    ) -> bool {
        let key = (url.to_string(), reference.digest.clone());
        {
            let mut started = self.lock();
            let now = Instant::now();
            if started
                .get(&key)
                .is_some_and(|last| last.in_flight || now.duration_since(last.at) < MIN_INTERVAL)
            {
                return false;
            }
            if started.len() >= MAX_ARCHIVES {
                started.retain(|_, last| last.in_flight);
            }
            started.insert(
                key.clone(),
                Started {
                    at: now,
                    in_flight: true,
                },
            );
        }
        let (url, reference, in_flight) = (url.to_string(), reference.clone(), self.clone());
        tokio::spawn(async move {
            match fetch::fetch(&client, &cache, &url, &reference).await {
                Ok((_, FetchOutcome::CachedAfterError)) => tracing::warn!(
                    "background revalidation of profile archive {:?} ({}) failed; the cached copy stays in use",
                    reference.id,
                    fetch::redacted(&url)
                ),
                Ok(_) => {}
                Err(error) => tracing::warn!(
                    "background revalidation of profile archive {:?}: {error}; the verified copy stays in use",
                    reference.id
                ),
            }
            if let Some(started) = in_flight.lock().get_mut(&key) {
                started.in_flight = false;
            }
        });
        true
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Started>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
