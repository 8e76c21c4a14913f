//! When a turn's deadline falls, and what is left of it now.
//!
//! Remaining time is measured when it is used (after provisioning, after a
//! lease wait), so neither is charged to the command that follows. The
//! arithmetic on it lives in `roder_api::deadline`.

use std::time::Duration;

use roder_api::deadline;
use tokio::time::Instant;

#[derive(Debug, Clone, Copy)]
pub(crate) struct TurnDeadline {
    at: Option<Instant>,
}

impl TurnDeadline {
    pub fn new(seconds: Option<u64>) -> Self {
        Self {
            at: seconds.map(|seconds| Instant::now() + Duration::from_secs(seconds)),
        }
    }

    pub fn instant(&self) -> Option<Instant> {
        self.at
    }

    pub fn remaining(&self) -> Option<Duration> {
        self.at
            .map(|at| at.saturating_duration_since(Instant::now()))
    }

    /// Whole seconds left, rounded down (34 s deadline, 2.1 s spent: 31).
    pub fn remaining_whole_seconds(&self) -> Option<u64> {
        deadline::whole_seconds(self.remaining())
    }

    /// How long to wait for a provider lease: min(remaining, 60 s).
    pub fn lease_acquire_timeout(&self) -> Duration {
        deadline::lease_acquire_timeout(self.remaining())
    }

    /// A lease's lifetime bound: remaining + 60 s, `None` without a deadline.
    pub fn lease_timeout(&self) -> Option<Duration> {
        deadline::lease_timeout(self.remaining())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn remaining_seconds_round_down_after_time_passes() {
        let deadline = TurnDeadline::new(Some(34));
        tokio::time::advance(Duration::from_millis(2_100)).await;
        assert_eq!(deadline.remaining_whole_seconds(), Some(31));
        assert_eq!(
            deadline.lease_acquire_timeout(),
            Duration::from_millis(31_900)
        );
        assert_eq!(
            deadline.lease_timeout(),
            Some(Duration::from_millis(91_900))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn no_deadline_means_default_bounds() {
        let deadline = TurnDeadline::new(None);
        assert_eq!(deadline.remaining_whole_seconds(), None);
        assert_eq!(deadline.lease_acquire_timeout(), Duration::from_secs(60));
        assert_eq!(deadline.lease_timeout(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn lease_wait_is_capped_at_sixty_seconds() {
        let deadline = TurnDeadline::new(Some(600));
        assert_eq!(deadline.lease_acquire_timeout(), Duration::from_secs(60));
    }
}
