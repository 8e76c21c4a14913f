//! One writer per thread, across processes.
//!
//! Before this runtime writes a thread (a turn, a lifecycle operation) it
//! takes the store's writer lease for it ([`Runtime::open_writer`]). Writers
//! inside this runtime share one lease, counted in the thread's log cursor;
//! the lease is given up when the last of them is done. Taking the lease
//! also catches the thread's cached state up with the log (another process
//! may have written it since this runtime last looked) and closes a turn a
//! dead process left open, so nothing is written on a stale view.

use std::sync::Arc;

use roder_api::writer_lease::{
    ThreadWriterBusy, WriterIdentity, WriterLease, WriterLeaseOutcome, WriterLeaseRequest,
};
use tokio_util::sync::CancellationToken;

use crate::runtime::Runtime;
use crate::threads::{LogCursor, ThreadState};
use crate::turn::recovery;

/// A share of a thread's writer lease. Give it back with
/// [`release`](WriterGuard::release); dropping it gives it back from a task.
pub(crate) struct WriterGuard {
    thread: Option<Arc<ThreadState>>,
}

impl Runtime {
    /// Takes (or shares) the writer lease of `thread`, or fails with
    /// [`ThreadWriterBusy`] naming the process that holds it.
    pub(crate) async fn open_writer(
        &self,
        thread: &Arc<ThreadState>,
    ) -> anyhow::Result<WriterGuard> {
        let mut cursor = thread.log.lock().await;
        if let Some(release) = cursor.writer_release.take() {
            // The last writer's lease is still being given up: a file lock
            // held by our own dying lease would make this acquire "busy".
            let _ = release.await;
        }
        if cursor.writer_holders > 0 {
            cursor.writer_holders += 1;
            return Ok(WriterGuard {
                thread: Some(thread.clone()),
            });
        }
        let request = WriterLeaseRequest {
            owner: self.writer_identity.clone(),
            ttl: self.config.writer_lease_ttl,
        };
        let lease = match self
            .store
            .acquire_writer_lease(&thread.thread_id, request)
            .await?
        {
            WriterLeaseOutcome::Acquired(lease) => Some(lease),
            WriterLeaseOutcome::Busy(holder) => {
                return Err(ThreadWriterBusy {
                    thread_id: thread.thread_id.clone(),
                    holder,
                }
                .into());
            }
            WriterLeaseOutcome::Unsupported => None,
        };
        cursor.writer = lease.clone();
        cursor.writer_holders = 1;
        let guard = WriterGuard {
            thread: Some(thread.clone()),
        };
        if let Some(lease) = lease {
            cursor.writer_renewal = Some(self.renew_in_background(thread, lease));
        }
        // From here on the guard gives the lease back if anything fails.
        self.catch_up(&mut cursor, thread).await?;
        self.close_dead_turn(&mut cursor, thread).await?;
        drop(cursor);
        Ok(guard)
    }

    /// Applies what other processes appended since this runtime's view.
    async fn catch_up(&self, cursor: &mut LogCursor, thread: &ThreadState) -> anyhow::Result<()> {
        let known = cursor.next_seq.saturating_sub(1);
        if let Some(lease) = &cursor.writer
            && lease.last_seq_at_grant() == Some(known)
        {
            return Ok(());
        }
        for envelope in self.store.load_events(&thread.thread_id, known).await? {
            cursor.observe(&envelope);
        }
        Ok(())
    }

    /// Closes the log's last turn when it is open and no turn of this
    /// runtime is running it: the process that ran it is gone (a live one
    /// would still hold the lease).
    async fn close_dead_turn(
        &self,
        cursor: &mut LogCursor,
        thread: &ThreadState,
    ) -> anyhow::Result<()> {
        let Some(open) = cursor.turns.open_turn().cloned() else {
            return Ok(());
        };
        if thread
            .active_turn()
            .is_some_and(|active| active.turn_id == open.turn_id)
        {
            return Ok(());
        }
        tracing::warn!(
            thread_id = %thread.thread_id,
            turn_id = %open.turn_id,
            "closing a turn its process left open"
        );
        for event in recovery::closing_events(&thread.thread_id, &open) {
            self.bus
                .emit_locked(cursor, &thread.thread_id, Some(&open.turn_id), event)
                .await?;
        }
        Ok(())
    }

    /// Renews a lease every third of its ttl until cancelled. A lease that
    /// can't be renewed was lost: the thread's running turn is interrupted
    /// (a fencing store refuses its writes anyway).
    fn renew_in_background(
        &self,
        thread: &Arc<ThreadState>,
        lease: Arc<dyn WriterLease>,
    ) -> CancellationToken {
        let stop = CancellationToken::new();
        let period = self.config.writer_lease_ttl / 3;
        let thread = Arc::downgrade(thread);
        tokio::spawn(renew_until_stopped(
            lease,
            period,
            stop.clone(),
            move || {
                if let Some(active) = thread.upgrade().and_then(|thread| thread.active_turn()) {
                    active.cancellation.cancel();
                }
            },
        ));
        stop
    }
}

/// Renews `lease` every `period` until `stop`; calls `lost` when a renewal
/// fails before then. A renewal can outlast the lease's use (retried
/// through a database outage while the turn ends and gives the lease back):
/// once stopped, its outcome concerns no turn and must not cancel one
/// started since.
async fn renew_until_stopped(
    lease: Arc<dyn WriterLease>,
    period: std::time::Duration,
    stop: CancellationToken,
    lost: impl FnOnce(),
) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
        }
        let renewed = tokio::select! {
            biased;
            _ = stop.cancelled() => return,
            renewed = lease.renew() => renewed,
        };
        // Stopped while the answer came: it concerns no turn any more.
        if stop.is_cancelled() {
            return;
        }
        if let Err(error) = renewed {
            tracing::error!(
                thread_id = lease.thread_id(),
                "lost the thread's writer lease: {error:#}"
            );
            lost();
            return;
        }
    }
}

impl WriterGuard {
    /// Gives this share back while the caller holds the log lock.
    pub fn release_locked(mut self, cursor: &mut LogCursor) {
        self.thread = None;
        give_back(cursor);
    }
}

impl Drop for WriterGuard {
    /// Gives the share back at once when the log is free (the usual case: a
    /// lifecycle operation returning early), else from a task.
    fn drop(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        if let Ok(mut cursor) = thread.log.try_lock() {
            give_back(&mut cursor);
            return;
        }
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move { give_back(&mut *thread.log.lock().await) });
        }
    }
}

/// One holder fewer; at zero the lease is released (from a task: the store
/// may do I/O) and forgotten.
fn give_back(cursor: &mut LogCursor) {
    cursor.writer_holders = cursor.writer_holders.saturating_sub(1);
    if cursor.writer_holders > 0 {
        return;
    }
    if let Some(renewal) = cursor.writer_renewal.take() {
        renewal.cancel();
    }
    let Some(lease) = cursor.writer.take() else {
        return;
    };
    // Without a runtime (a guard dropped at shutdown) dropping the lease is
    // the release: a file lock closes with it, a database row expires.
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        cursor.writer_release = Some(handle.spawn(async move {
            if let Err(error) = lease.release().await {
                tracing::warn!(
                    thread_id = lease.thread_id(),
                    "could not release the thread's writer lease: {error:#}"
                );
            }
        }));
    }
}

/// This runtime's identity as a writer: a fresh id, the pid and the host.
pub(crate) fn identity() -> WriterIdentity {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown-host".to_string());
    WriterIdentity::new(uuid::Uuid::new_v4().to_string(), std::process::id(), host)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// A lease whose renewals wait for `answer` and then fail, as one
    /// retried through a database outage and answered after the lease was
    /// given back does.
    #[derive(Default)]
    struct SlowLease {
        renewals: AtomicUsize,
        answer: tokio::sync::Notify,
    }

    #[async_trait::async_trait]
    impl WriterLease for SlowLease {
        fn thread_id(&self) -> &str {
            "t"
        }
        fn generation(&self) -> u64 {
            1
        }
        async fn renew(&self) -> anyhow::Result<()> {
            self.renewals.fetch_add(1, Ordering::SeqCst);
            self.answer.notified().await;
            anyhow::bail!("lost")
        }
        async fn release(&self) -> anyhow::Result<()> {
            Ok(())
        }
    }

    async fn renewing(lease: &SlowLease) {
        while lease.renewals.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    #[tokio::test]
    async fn a_renewal_that_fails_after_the_stop_cancels_nothing() {
        let lease = Arc::new(SlowLease::default());
        let stop = CancellationToken::new();
        let lost = Arc::new(AtomicBool::new(false));
        let flag = lost.clone();
        let task = tokio::spawn(renew_until_stopped(
            lease.clone(),
            Duration::from_millis(1),
            stop.clone(),
            move || flag.store(true, Ordering::SeqCst),
        ));
        renewing(&lease).await;
        stop.cancel();
        lease.answer.notify_one();
        task.await.unwrap();
        assert!(!lost.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn a_renewal_that_fails_while_in_use_reports_the_lease_lost() {
        let lease = Arc::new(SlowLease::default());
        let lost = Arc::new(AtomicBool::new(false));
        let flag = lost.clone();
        let task = tokio::spawn(renew_until_stopped(
            lease.clone(),
            Duration::from_millis(1),
            CancellationToken::new(),
            move || flag.store(true, Ordering::SeqCst),
        ));
        renewing(&lease).await;
        lease.answer.notify_one();
        task.await.unwrap();
        assert!(lost.load(Ordering::SeqCst));
    }
}
