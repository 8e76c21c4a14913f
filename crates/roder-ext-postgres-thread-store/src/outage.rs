//! Riding out a database restart within a writer lease.
//!
//! When the server restarts (or a connection is cut) during a turn, the
//! pool's connections fail and new ones are refused for a while. A leased
//! append or a renewal is then tried again, with a growing pause, until
//! the lease's own expiry as this process last saw it (its grant or last
//! renewal plus the ttl): within that time nobody else can have taken the
//! thread, and after it the database refuses the append itself (stale or
//! expired), so retrying longer would only delay a clean failure.
//!
//! Only errors that say the connection or the server went away are tried
//! again; a refusal (`RD00x`), a constraint or a bad statement is final.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// First pause between tries; doubled up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(50);
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// Whether `error` says the connection or the server went away (the
/// statement may or may not have committed).
pub(crate) fn is_transient(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_) => true,
        sqlx::Error::Database(database) => database.code().is_some_and(|code| {
            // Class 08: connection exceptions; 57P01..03: the server is
            // shutting down, crashed, or not accepting connections yet.
            code.starts_with("08") || matches!(code.as_ref(), "57P01" | "57P02" | "57P03")
        }),
        _ => false,
    }
}

/// Runs `attempt` until it succeeds, fails with a final error, or
/// `deadline` passes. `on_retry` is told of each transient failure.
pub(crate) async fn retry_until<T, F, Fut>(
    deadline: Instant,
    what: &str,
    mut attempt: F,
) -> (Result<T, sqlx::Error>, bool)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, sqlx::Error>>,
{
    let mut pause = FIRST_PAUSE;
    let mut retried = false;
    loop {
        match attempt().await {
            Err(error) if is_transient(&error) && Instant::now() + pause < deadline => {
                tracing::warn!("{what}: the database is unreachable ({error}); trying again");
                retried = true;
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
            }
            outcome => return (outcome, retried),
        }
    }
}

/// Keyed by the lease object's address: unique among the leases alive in
/// this process (generations are not, across databases), and the same
/// whether the lease is seen as itself or as a `dyn WriterLease`.
type Deadlines = Mutex<HashMap<usize, Instant>>;

fn deadlines() -> &'static Deadlines {
    static DEADLINES: OnceLock<Deadlines> = OnceLock::new();
    DEADLINES.get_or_init(Deadlines::default)
}

/// The registry key of the lease at `lease`.
pub(crate) fn key_of<T: ?Sized>(lease: &T) -> usize {
    std::ptr::from_ref(lease).cast::<()>() as usize
}

/// Records that the lease at `key` is good until at least `until` (a
/// grant or renewal that started at `until - ttl`).
pub(crate) fn lease_good_until(key: usize, until: Instant) {
    deadlines()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(key, until);
}

/// Forgets a released or dropped lease.
pub(crate) fn forget_lease(key: usize) {
    deadlines()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&key);
}

/// Until when a leased append under the lease at `key` is tried again:
/// the lease's expiry as this process knows it, or now for a lease it does
/// not know (no retry).
pub(crate) fn retry_deadline(key: usize) -> Instant {
    deadlines()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
        .copied()
        .unwrap_or_else(Instant::now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_errors_are_transient_and_others_final() {
        assert!(is_transient(&sqlx::Error::PoolTimedOut));
        assert!(is_transient(&sqlx::Error::Io(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset
        ))));
        assert!(!is_transient(&sqlx::Error::RowNotFound));
        assert!(!is_transient(&sqlx::Error::PoolClosed));
    }

    #[tokio::test]
    async fn retries_stop_at_the_deadline_and_on_final_errors() {
        let mut tries = 0;
        let deadline = Instant::now() + Duration::from_millis(300);
        let (outcome, retried) = retry_until(deadline, "test", || {
            tries += 1;
            async { Err::<(), _>(sqlx::Error::PoolTimedOut) }
        })
        .await;
        assert!(
            outcome.is_err() && retried && tries > 1 && tries < 10,
            "{tries}"
        );
        assert!(Instant::now() <= deadline + Duration::from_millis(100));
        let mut tries = 0;
        let (outcome, retried) = retry_until(deadline, "test", || {
            tries += 1;
            async { Err::<(), _>(sqlx::Error::RowNotFound) }
        })
        .await;
        assert!(outcome.is_err() && !retried && tries == 1);
    }

    #[test]
    fn unknown_leases_get_no_retry_and_known_ones_their_expiry() {
        let until = Instant::now() + Duration::from_secs(30);
        let lease = String::from("a lease");
        lease_good_until(key_of(&lease), until);
        assert_eq!(retry_deadline(key_of(&lease)), until);
        forget_lease(key_of(&lease));
        assert!(retry_deadline(key_of(&lease)) <= Instant::now());
    }
}
