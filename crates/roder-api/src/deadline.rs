//! All of the deadline arithmetic, in one place.
//!
//! A turn's deadline is a budget spent by waits the runtime does not charge
//! to a command (provisioning, a provider lease), by commands, and by the
//! work after the last command (reporting it, one more model request). The
//! runtime measures what is left when it is used; these functions turn that
//! into the bounds each part gets:
//!
//! * a command: `min(requested, max(remaining_s * 1000 - 30000, 1000))` ms,
//!   from whole seconds (34 s deadline, 2.1 s spent provisioning: 31 s left,
//!   so 1000 ms);
//! * a provider lease: acquired within `min(remaining, 60 s)`, held for at
//!   most `remaining + 60 s` (unbounded without a deadline);
//! * a runner command: given up locally [`PROVIDER_REPORT_GRACE`] after its
//!   own timeout, if the provider never reports it.

use std::time::Duration;

/// Time a command tool leaves for the turn to finish after its command:
/// reporting the result and one more model request.
pub const COMMAND_FINALIZATION_RESERVE_MS: u64 = 30_000;

/// The shortest timeout a command gets under a deadline.
pub const MIN_COMMAND_TIMEOUT_MS: u64 = 1_000;

/// Longest wait for a provider lease, and the slack a lease outlives the
/// turn by.
pub const LEASE_SLACK: Duration = Duration::from_secs(60);

/// How long past a runner command's own timeout the tool waits for the
/// provider to report it before giving up on it.
pub const PROVIDER_REPORT_GRACE: Duration = Duration::from_secs(10);

/// Whole seconds in `remaining`, rounded down: what tools are told.
///
/// ```
/// use std::time::Duration;
/// use roder_api::deadline::whole_seconds;
///
/// assert_eq!(whole_seconds(Some(Duration::from_millis(31_900))), Some(31));
/// assert_eq!(whole_seconds(None), None);
/// ```
pub fn whole_seconds(remaining: Option<Duration>) -> Option<u64> {
    remaining.map(|left| left.as_secs())
}

/// The timeout a command gets: what the model asked for, capped so the turn
/// keeps [`COMMAND_FINALIZATION_RESERVE_MS`] after it, never under
/// [`MIN_COMMAND_TIMEOUT_MS`]. `None`: no deadline and nothing asked.
///
/// ```
/// use roder_api::deadline::command_timeout_ms;
///
/// assert_eq!(command_timeout_ms(Some(31), Some(120_000)), Some(1_000));
/// assert_eq!(command_timeout_ms(Some(100), Some(5_000)), Some(5_000));
/// assert_eq!(command_timeout_ms(Some(100), None), Some(70_000));
/// assert_eq!(command_timeout_ms(None, Some(5_000)), Some(5_000));
/// ```
pub fn command_timeout_ms(
    remaining_seconds: Option<u64>,
    requested_ms: Option<u64>,
) -> Option<u64> {
    let cap = remaining_seconds.map(|seconds| {
        seconds
            .saturating_mul(1_000)
            .saturating_sub(COMMAND_FINALIZATION_RESERVE_MS)
            .max(MIN_COMMAND_TIMEOUT_MS)
    });
    match (requested_ms, cap) {
        (Some(requested), Some(cap)) => Some(requested.min(cap)),
        (requested, None) => requested,
        (None, cap) => cap,
    }
}

/// How long to wait for a provider lease: `min(remaining, 60 s)`.
///
/// ```
/// use std::time::Duration;
/// use roder_api::deadline::lease_acquire_timeout;
///
/// assert_eq!(lease_acquire_timeout(Some(Duration::from_secs(5))), Duration::from_secs(5));
/// assert_eq!(lease_acquire_timeout(None), Duration::from_secs(60));
/// ```
pub fn lease_acquire_timeout(remaining: Option<Duration>) -> Duration {
    remaining.map_or(LEASE_SLACK, |left| left.min(LEASE_SLACK))
}

/// A lease's lifetime bound: `remaining + 60 s`, `None` without a deadline.
///
/// ```
/// use std::time::Duration;
/// use roder_api::deadline::lease_timeout;
///
/// assert_eq!(lease_timeout(Some(Duration::from_secs(5))), Some(Duration::from_secs(65)));
/// assert_eq!(lease_timeout(None), None);
/// ```
pub fn lease_timeout(remaining: Option<Duration>) -> Option<Duration> {
    remaining.map(|left| left + LEASE_SLACK)
}

/// When a tool gives up waiting for a runner command that has `timeout_ms`.
///
/// ```
/// use std::time::Duration;
/// use roder_api::deadline::runner_command_give_up_after;
///
/// assert_eq!(runner_command_give_up_after(Some(1_000)), Some(Duration::from_secs(11)));
/// assert_eq!(runner_command_give_up_after(None), None);
/// ```
pub fn runner_command_give_up_after(timeout_ms: Option<u64>) -> Option<Duration> {
    timeout_ms.map(|ms| Duration::from_millis(ms) + PROVIDER_REPORT_GRACE)
}
