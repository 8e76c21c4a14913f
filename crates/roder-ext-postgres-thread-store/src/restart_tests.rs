//! The Postgres server restarts in the middle of a writer's turn while two
//! other replicas follow the thread: the writer's leased appends and its
//! renewal ride out the outage (`outage.rs`), nothing is lost or written
//! twice, and both followers end up with every seq once, in order. A lease
//! that lapses during a longer outage fails its append cleanly, and the
//! thread is writable again afterwards.

use std::time::{Duration, Instant};

use roder_api::thread::ThreadStore;
use time::OffsetDateTime;

use crate::test_fixtures::*;
use crate::{PostgresStoreOptions, PostgresThreadStore};

/// Follows `thread` on `replica` until `last` arrives, following again
/// from its cursor whenever following fails (the server went away).
async fn follow_to(replica: PostgresThreadStore, thread: &'static str, last: u64) -> Vec<u64> {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut got: Vec<u64> = Vec::new();
    while got.last().copied() != Some(last) {
        assert!(Instant::now() < deadline, "follower stuck at {got:?}");
        let cursor = got.last().copied().unwrap_or(0);
        let mut follower = match replica.follow(thread, cursor).await {
            Ok(follower) => follower,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        while got.last().copied() != Some(last) {
            match tokio::time::timeout(Duration::from_secs(30), follower.next()).await {
                Ok(Ok(envelope)) => got.push(envelope.seq),
                Ok(Err(_)) => break,
                Err(_) => panic!("no event within 30 s; got {got:?}"),
            }
        }
    }
    got
}

#[tokio::test]
async fn a_restart_mid_turn_loses_and_doubles_nothing_and_followers_resume() {
    let Some((mut cluster, writer)) = setup().await else {
        return;
    };
    let replicas = [replica(&cluster).await, replica(&cluster).await];
    writer
        .create_thread(metadata("t1", OffsetDateTime::UNIX_EPOCH))
        .await
        .unwrap();
    let lease = acquired(
        writer
            .acquire_writer_lease("t1", request("writer", Duration::from_secs(30)))
            .await
            .unwrap(),
    );
    const LAST: u64 = 60;
    let followers: Vec<_> = replicas
        .iter()
        .map(|replica| tokio::spawn(follow_to(replica.clone(), "t1", LAST)))
        .collect();

    for seq in 1..=20 {
        writer
            .append_events_leased(lease.as_ref(), "t1", &events("t1", seq..=seq))
            .await
            .unwrap();
    }
    // The server goes down for a second and comes back while the turn
    // goes on appending.
    // The next append meets the server down; it comes back a second later.
    cluster.shut_down().await.unwrap();
    let outage = Instant::now();
    let restart = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        cluster.start_again().await.unwrap();
        cluster
    });
    for seq in 21..=LAST {
        writer
            .append_events_leased(lease.as_ref(), "t1", &events("t1", seq..=seq))
            .await
            .unwrap_or_else(|error| panic!("append of seq {seq}: {error:#}"));
        if seq % 10 == 0 {
            lease.renew().await.unwrap();
        }
    }
    assert!(
        outage.elapsed() >= Duration::from_millis(500),
        "the appends waited for the server to come back"
    );
    let cluster = restart.await.unwrap();
    assert!(
        cluster.log().contains("database system was shut down at"),
        "the server did restart:\n{}",
        cluster.log()
    );
    let stored = seqs(&writer.load_events("t1", 0).await.unwrap());
    assert_eq!(
        stored,
        (1..=LAST).collect::<Vec<_>>(),
        "nothing lost or doubled"
    );
    for follower in followers {
        assert_eq!(follower.await.unwrap(), (1..=LAST).collect::<Vec<_>>());
    }
    lease.release().await.unwrap();
}

#[tokio::test]
async fn an_outage_longer_than_the_lease_fails_the_append_cleanly() {
    let Some((mut cluster, _)) = setup().await else {
        return;
    };
    let options = PostgresStoreOptions {
        acquire_timeout: Duration::from_secs(1),
        ..Default::default()
    };
    let writer = PostgresThreadStore::connect_with(&cluster.url(), options)
        .await
        .unwrap();
    writer
        .create_thread(metadata("t2", OffsetDateTime::UNIX_EPOCH))
        .await
        .unwrap();
    let lease = acquired(
        writer
            .acquire_writer_lease("t2", request("writer", Duration::from_secs(2)))
            .await
            .unwrap(),
    );
    writer
        .append_events_leased(lease.as_ref(), "t2", &events("t2", 1..=1))
        .await
        .unwrap();
    // Down for twice the lease's ttl.
    cluster.shut_down().await.unwrap();
    let restart = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(4)).await;
        cluster.start_again().await.unwrap();
        cluster
    });
    let started = Instant::now();
    let error = writer
        .append_events_leased(lease.as_ref(), "t2", &events("t2", 2..=2))
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "gave up at the lease's expiry, not later: {:?}",
        started.elapsed()
    );
    let _cluster = restart.await.unwrap();
    let shown = format!("{error:#}");
    assert!(shown.contains("cannot append to thread \"t2\""), "{shown}");
    // Back up: the lapsed lease is refused (once the pool has a live
    // connection again), a new one writes seq 2 once.
    let mut refusal = String::new();
    for _ in 0..50 {
        refusal = writer
            .append_events_leased(lease.as_ref(), "t2", &events("t2", 2..=2))
            .await
            .map_err(|error| format!("{error:#}"))
            .unwrap_err();
        if refusal.contains("expired") || refusal.contains("stale") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        refusal.contains("expired") || refusal.contains("stale"),
        "{refusal}"
    );
    let again = acquired(
        writer
            .acquire_writer_lease("t2", request("writer-again", Duration::from_secs(30)))
            .await
            .unwrap(),
    );
    writer
        .append_events_leased(again.as_ref(), "t2", &events("t2", 2..=2))
        .await
        .unwrap();
    assert_eq!(seqs(&writer.load_events("t2", 0).await.unwrap()), [1, 2]);
}
