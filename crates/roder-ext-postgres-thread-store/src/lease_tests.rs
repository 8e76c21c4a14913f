//! The writer lease against a real PostgreSQL: exclusivity between
//! replicas, expiry on the database's clock, fencing of a stale holder, and
//! racing appenders and acquirers of which exactly one wins.

use std::sync::Arc;
use std::time::Duration;

use roder_api::thread::ThreadStore;
use roder_api::writer_lease::WriterLeaseOutcome;
use time::OffsetDateTime;

use crate::PostgresThreadStore;
use crate::test_fixtures::*;

const LONG: Duration = Duration::from_secs(60);

async fn with_thread(store: &PostgresThreadStore, thread_id: &str) {
    store
        .create_thread(metadata(thread_id, OffsetDateTime::UNIX_EPOCH))
        .await
        .unwrap();
}

/// Sleeps on the database's clock until the thread's lease has expired
/// there (the test's own clock plays no part).
async fn wait_for_expiry_on_the_database(store: &PostgresThreadStore, thread_id: &str) {
    crate::test_support::wait_for_lease_expiry(store, thread_id)
        .await
        .unwrap();
    let status = store.writer_lease_status(thread_id).await.unwrap().unwrap();
    assert_eq!(status.expires_in, None, "{status:?}");
}

#[tokio::test]
async fn a_second_replica_is_told_who_holds_the_lease() {
    let Some((cluster, first)) = setup().await else {
        return;
    };
    let second = replica(&cluster).await;
    with_thread(&first, "t1").await;
    let asked = request("runtime-a", LONG);
    let lease = acquired(
        first
            .acquire_writer_lease("t1", asked.clone())
            .await
            .unwrap(),
    );
    assert_eq!(lease.thread_id(), "t1");
    assert_eq!(lease.last_seq_at_grant(), Some(0));

    let status = second.writer_lease_status("t1").await.unwrap().unwrap();
    assert_eq!(status.generation, lease.generation());
    assert_eq!(status.holder.as_ref(), Some(&asked.owner));
    assert!(
        status.expires_in.is_some_and(|left| left <= LONG),
        "{status:?}"
    );
    let holder = busy(
        second
            .acquire_writer_lease("t1", request("runtime-b", LONG))
            .await
            .unwrap(),
    );
    assert_eq!(holder, asked.owner);
    assert!(
        holder
            .to_string()
            .starts_with("pid 4242 on host-of-runtime-a since "),
        "{holder}"
    );
    // The same owner asking again is busy too: one lease, one writer.
    busy(
        first
            .acquire_writer_lease("t1", asked.clone())
            .await
            .unwrap(),
    );

    lease.release().await.unwrap();
    lease.release().await.unwrap();
    assert!(
        lease.renew().await.is_err(),
        "a released lease does not renew"
    );
    let next = acquired(
        second
            .acquire_writer_lease("t1", request("runtime-b", LONG))
            .await
            .unwrap(),
    );
    assert!(next.generation() > lease.generation());
    busy(first.acquire_writer_lease("t1", asked).await.unwrap());
}

#[tokio::test]
async fn a_lease_needs_an_existing_thread() {
    let Some((_cluster, store)) = setup().await else {
        return;
    };
    let error = store
        .acquire_writer_lease("ghost", request("a", LONG))
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("\"ghost\": the thread does not exist"),
        "{error}"
    );
}

#[tokio::test]
async fn expiry_is_on_the_database_clock() {
    let Some((cluster, first)) = setup().await else {
        return;
    };
    let second = replica(&cluster).await;
    with_thread(&first, "t1").await;
    let ttl = Duration::from_millis(1500);
    let lease = acquired(
        first
            .acquire_writer_lease("t1", request("a", ttl))
            .await
            .unwrap(),
    );
    // The expiry is the database's now() plus the ttl.
    let left_ms: f64 = sqlx::query_scalar(
        "SELECT (extract(epoch FROM lease_expires_at - now()) * 1000)::float8 FROM roder_threads WHERE thread_id = 't1'",
    )
    .fetch_one(first.pool())
    .await
    .unwrap();
    assert!(left_ms > 0.0 && left_ms <= 1500.0, "{left_ms}");
    busy(
        second
            .acquire_writer_lease("t1", request("b", ttl))
            .await
            .unwrap(),
    );

    // Renewing moves the expiry on.
    let before: f64 = sqlx::query_scalar(
        "SELECT extract(epoch FROM lease_expires_at)::float8 FROM roder_threads WHERE thread_id = 't1'",
    )
    .fetch_one(first.pool())
    .await
    .unwrap();
    lease.renew().await.unwrap();
    let after: f64 = sqlx::query_scalar(
        "SELECT extract(epoch FROM lease_expires_at)::float8 FROM roder_threads WHERE thread_id = 't1'",
    )
    .fetch_one(first.pool())
    .await
    .unwrap();
    assert!(after > before, "{before} -> {after}");

    wait_for_expiry_on_the_database(&first, "t1").await;
    // Expired: its holder may not append until it renews...
    let error = first
        .append_events_leased(lease.as_ref(), "t1", &events("t1", 1..=1))
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("expired or was released"),
        "{error}"
    );
    // ...and renewing works while nobody took it: nobody else wrote.
    lease.renew().await.unwrap();
    first
        .append_events_leased(lease.as_ref(), "t1", &events("t1", 1..=1))
        .await
        .unwrap();
    busy(
        second
            .acquire_writer_lease("t1", request("b", ttl))
            .await
            .unwrap(),
    );

    // Expired again, the other replica takes it over.
    wait_for_expiry_on_the_database(&first, "t1").await;
    let taken = acquired(
        second
            .acquire_writer_lease("t1", request("b", LONG))
            .await
            .unwrap(),
    );
    assert!(taken.generation() > lease.generation());
    assert_eq!(taken.last_seq_at_grant(), Some(1));
}

#[tokio::test]
async fn a_stale_generation_is_refused_after_a_takeover() {
    let Some((cluster, paused)) = setup().await else {
        return;
    };
    let other = replica(&cluster).await;
    with_thread(&paused, "t1").await;
    let stale = acquired(
        paused
            .acquire_writer_lease("t1", request("paused", Duration::from_millis(300)))
            .await
            .unwrap(),
    );
    paused
        .append_events_leased(stale.as_ref(), "t1", &events("t1", 1..=2))
        .await
        .unwrap();
    // A GC pause, a partition: the holder stops renewing past its expiry.
    wait_for_expiry_on_the_database(&paused, "t1").await;
    let current = acquired(
        other
            .acquire_writer_lease("t1", request("other", LONG))
            .await
            .unwrap(),
    );
    assert!(current.generation() > stale.generation());
    assert_eq!(current.last_seq_at_grant(), Some(2));

    // The paused holder wakes up and tries to write the next seq.
    let error = paused
        .append_events_leased(stale.as_ref(), "t1", &events("t1", 3..=3))
        .await
        .unwrap_err();
    let shown = error.to_string();
    assert!(
        shown.contains(&format!("generation {} is stale", stale.generation()))
            && shown.contains(&format!("current generation is {}", current.generation()))
            && shown.contains("host-of-other"),
        "{shown}"
    );
    let error = stale.renew().await.unwrap_err();
    assert!(error.to_string().contains("was lost"), "{error}");
    // Its release frees nothing of the new holder's.
    stale.release().await.unwrap();
    busy(
        paused
            .acquire_writer_lease("t1", request("third", LONG))
            .await
            .unwrap(),
    );
    // Nor can it write without the lease while another holds it.
    let error = paused
        .append_events("t1", &events("t1", 3..=3))
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("another writer holds its writer lease"),
        "{error}"
    );

    other
        .append_events_leased(current.as_ref(), "t1", &events("t1", 3..=4))
        .await
        .unwrap();
    let log = other.load_events("t1", 0).await.unwrap();
    assert_eq!(seqs(&log), [1, 2, 3, 4]);
    assert_eq!(log[2], event("t1", 3), "seq 3 is the new holder's");
}

#[tokio::test]
async fn a_lease_is_refused_for_another_thread_and_after_a_delete() {
    let Some((_cluster, store)) = setup().await else {
        return;
    };
    with_thread(&store, "t1").await;
    with_thread(&store, "t2").await;
    let lease = acquired(
        store
            .acquire_writer_lease("t1", request("a", LONG))
            .await
            .unwrap(),
    );
    let error = store
        .append_events_leased(lease.as_ref(), "t2", &events("t2", 1..=1))
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("is for thread \"t1\""),
        "{error}"
    );

    store.delete_thread("t1").await.unwrap();
    let error = store
        .append_events_leased(lease.as_ref(), "t1", &events("t1", 1..=1))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("does not exist"), "{error}");
    // Re-created under the old id, the thread's lease generation is new, so
    // the old holder is still fenced out.
    with_thread(&store, "t1").await;
    let fresh = acquired(
        store
            .acquire_writer_lease("t1", request("b", LONG))
            .await
            .unwrap(),
    );
    assert!(fresh.generation() > lease.generation());
    let error = store
        .append_events_leased(lease.as_ref(), "t1", &events("t1", 1..=1))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("is stale"), "{error}");
    assert!(store.load_events("t1", 0).await.unwrap().is_empty());
}

#[tokio::test]
async fn racing_replicas_get_one_lease() {
    let Some((cluster, store)) = setup().await else {
        return;
    };
    with_thread(&store, "t1").await;
    let mut replicas = Vec::new();
    for _ in 0..8 {
        replicas.push(replica(&cluster).await);
    }
    for round in 0..10 {
        let barrier = Arc::new(tokio::sync::Barrier::new(replicas.len()));
        let asks: Vec<_> = replicas
            .iter()
            .enumerate()
            .map(|(index, replica)| {
                let replica = replica.clone();
                let barrier = barrier.clone();
                tokio::spawn(async move {
                    barrier.wait().await;
                    replica
                        .acquire_writer_lease("t1", request(&format!("r{index}"), LONG))
                        .await
                        .unwrap()
                })
            })
            .collect();
        let mut granted = Vec::new();
        for ask in asks {
            if let WriterLeaseOutcome::Acquired(lease) = ask.await.unwrap() {
                granted.push(lease);
            }
        }
        assert_eq!(
            granted.len(),
            1,
            "round {round}: exactly one replica holds the lease"
        );
        granted[0].release().await.unwrap();
    }
}

#[tokio::test]
async fn concurrent_appenders_never_both_succeed() {
    let Some((cluster, store)) = setup().await else {
        return;
    };
    let mut replicas = Vec::new();
    for _ in 0..6 {
        replicas.push(replica(&cluster).await);
    }
    // Each round, every replica appends the same next seq at once (as two
    // writers numbering from one last seq would).
    for next in 1..=30u64 {
        let barrier = Arc::new(tokio::sync::Barrier::new(replicas.len()));
        let appends: Vec<_> = replicas
            .iter()
            .enumerate()
            .map(|(index, replica)| {
                let replica = replica.clone();
                let barrier = barrier.clone();
                tokio::spawn(async move {
                    let mut envelope = event("t1", next);
                    envelope.turn_id = Some(format!("writer-{index}"));
                    barrier.wait().await;
                    replica.append_events("t1", &[envelope]).await.is_ok()
                })
            })
            .collect();
        let mut won = 0;
        for append in appends {
            won += usize::from(append.await.unwrap());
        }
        assert_eq!(won, 1, "seq {next}: exactly one appender wins");
    }
    let log = store.load_events("t1", 0).await.unwrap();
    assert_eq!(seqs(&log), (1..=30).collect::<Vec<_>>());
}

#[tokio::test]
async fn leased_appends_from_two_holders_in_a_takeover_race_never_interleave() {
    let Some((cluster, first)) = setup().await else {
        return;
    };
    let second = replica(&cluster).await;
    with_thread(&first, "t1").await;
    let old = acquired(
        first
            .acquire_writer_lease("t1", request("old", Duration::from_millis(200)))
            .await
            .unwrap(),
    );
    // The old holder appends in a loop while the other replica waits for
    // the expiry and takes over; once the takeover is committed, no append
    // of the old holder lands.
    let writer = {
        let first = first.clone();
        let old = old.clone();
        tokio::spawn(async move {
            let mut next = 1;
            loop {
                let mut envelope = event("t1", next);
                envelope.turn_id = Some("old".into());
                match first
                    .append_events_leased(old.as_ref(), "t1", &[envelope])
                    .await
                {
                    Ok(()) => next += 1,
                    Err(_) => return next - 1,
                }
            }
        })
    };
    let taken = loop {
        match second
            .acquire_writer_lease("t1", request("new", LONG))
            .await
            .unwrap()
        {
            WriterLeaseOutcome::Acquired(lease) => break lease,
            _ => wait_for_expiry_on_the_database(&second, "t1").await,
        }
    };
    let old_last = writer.await.unwrap();
    assert_eq!(taken.last_seq_at_grant(), Some(old_last));
    let mut envelope = event("t1", old_last + 1);
    envelope.turn_id = Some("new".into());
    second
        .append_events_leased(taken.as_ref(), "t1", &[envelope])
        .await
        .unwrap();
    let log = second.load_events("t1", 0).await.unwrap();
    assert_eq!(seqs(&log), (1..=old_last + 1).collect::<Vec<_>>());
    let owners: Vec<_> = log.iter().map(|e| e.turn_id.clone().unwrap()).collect();
    assert!(
        owners[..owners.len() - 1]
            .iter()
            .all(|owner| owner == "old")
    );
    assert_eq!(owners.last().map(String::as_str), Some("new"));
}
