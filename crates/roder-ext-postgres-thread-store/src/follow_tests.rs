//! Following a thread from another replica over LISTEN/NOTIFY, with cursor
//! replay, against a real PostgreSQL; including a listener whose
//! connection the server kills mid-stream.

use std::time::Duration;

use roder_api::events::EventEnvelope;
use roder_api::thread::ThreadStore;

use crate::test_fixtures::*;
use crate::{PostgresThreadStore, ThreadFollower};

const WAIT: Duration = Duration::from_secs(20);

async fn next_n(follower: &mut ThreadFollower, n: usize) -> Vec<EventEnvelope> {
    let mut got = Vec::new();
    while got.len() < n {
        let envelope = tokio::time::timeout(WAIT, follower.next())
            .await
            .expect("no event in time")
            .unwrap();
        got.push(envelope);
    }
    got
}

/// Nothing more arrives (the log has no more events): the follower's next
/// read returns only after this append.
async fn assert_next_is(follower: &mut ThreadFollower, writer: &PostgresThreadStore, seq: u64) {
    writer
        .append_events("t1", &events("t1", seq..=seq))
        .await
        .unwrap();
    let got = next_n(follower, 1).await;
    assert_eq!(seqs(&got), [seq], "nothing doubled, nothing skipped");
}

#[tokio::test]
async fn a_replica_follows_appends_of_another_live_and_replays_from_a_cursor() {
    let Some((cluster, writer)) = setup().await else {
        return;
    };
    let reader = replica(&cluster).await;
    writer
        .append_events("t1", &events("t1", 1..=3))
        .await
        .unwrap();

    let mut follower = reader.follow("t1", 0).await.unwrap();
    assert_eq!(
        seqs(&next_n(&mut follower, 3).await),
        [1, 2, 3],
        "replay first"
    );

    // Live: appended by the other replica while this one waits.
    let appending = {
        let writer = writer.clone();
        tokio::spawn(async move {
            for seq in 4..=40 {
                writer
                    .append_events("t1", &events("t1", seq..=seq))
                    .await
                    .unwrap();
            }
        })
    };
    let live = next_n(&mut follower, 37).await;
    appending.await.unwrap();
    assert_eq!(live, events("t1", 4..=40));
    assert_eq!(follower.cursor(), 40);

    // A client that reconnects with the last seq it saw gets the rest once.
    drop(follower);
    writer
        .append_events("t1", &events("t1", 41..=45))
        .await
        .unwrap();
    let mut again = reader.follow("t1", 40).await.unwrap();
    assert_eq!(seqs(&next_n(&mut again, 5).await), [41, 42, 43, 44, 45]);
    assert_next_is(&mut again, &writer, 46).await;
}

#[tokio::test]
async fn followers_of_other_threads_are_not_woken() {
    let Some((cluster, writer)) = setup().await else {
        return;
    };
    let reader = replica(&cluster).await;
    let mut quiet = reader.follow("other", 0).await.unwrap();
    let mut busy = reader.follow("t1", 0).await.unwrap();
    writer
        .append_events("t1", &events("t1", 1..=5))
        .await
        .unwrap();
    assert_eq!(seqs(&next_n(&mut busy, 5).await), [1, 2, 3, 4, 5]);
    // The quiet follower's wake-up was never touched.
    assert!(!quiet.wake.has_changed().unwrap());
    writer
        .append_events("other", &events("other", 1..=1))
        .await
        .unwrap();
    let got = tokio::time::timeout(WAIT, quiet.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got, event("other", 1));
}

#[tokio::test]
async fn a_lost_listener_connection_loses_no_event() {
    let Some((cluster, writer)) = setup().await else {
        return;
    };
    let reader = replica(&cluster).await;
    let mut follower = reader.follow("t1", 0).await.unwrap();
    writer
        .append_events("t1", &events("t1", 1..=2))
        .await
        .unwrap();
    assert_eq!(seqs(&next_n(&mut follower, 2).await), [1, 2]);

    // The server drops the listener's connection (a failover, a proxy
    // timeout): events appended meanwhile must still arrive.
    let killed: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'",
    )
    .fetch_all(writer.pool())
    .await
    .unwrap();
    assert_eq!(killed, [true], "one listener connection");
    writer
        .append_events("t1", &events("t1", 3..=6))
        .await
        .unwrap();
    assert_eq!(seqs(&next_n(&mut follower, 4).await), [3, 4, 5, 6]);
    assert_next_is(&mut follower, &writer, 7).await;
}

#[tokio::test]
async fn closing_the_store_ends_its_followers_with_an_error() {
    let Some((_cluster, store)) = setup().await else {
        return;
    };
    let mut follower = store.follow("t1", 0).await.unwrap();
    let waiting = tokio::spawn(async move { follower.next().await });
    store.close().await;
    let ended = tokio::time::timeout(WAIT, waiting).await.unwrap().unwrap();
    assert!(ended.is_err(), "{ended:?}");
}

#[tokio::test]
async fn follow_stream_yields_the_log_after_the_cursor_then_live_appends_and_errors_on_a_bad_id() {
    use futures::StreamExt;
    let Some((cluster, writer)) = setup().await else {
        return;
    };
    let reader = replica(&cluster).await;
    writer
        .append_events("t1", &events("t1", 1..=3))
        .await
        .unwrap();
    let mut stream = reader.follow_stream("t1", 1);
    let mut got = Vec::new();
    for _ in 0..2 {
        got.push(
            tokio::time::timeout(WAIT, stream.next())
                .await
                .unwrap()
                .unwrap()
                .unwrap(),
        );
    }
    writer
        .append_events("t1", &events("t1", 4..=5))
        .await
        .unwrap();
    for _ in 0..2 {
        got.push(
            tokio::time::timeout(WAIT, stream.next())
                .await
                .unwrap()
                .unwrap()
                .unwrap(),
        );
    }
    assert_eq!(
        seqs(&got),
        [2, 3, 4, 5],
        "after the cursor, once each, in order"
    );

    let mut bad = reader.follow_stream("../etc", 0);
    let first = tokio::time::timeout(WAIT, bad.next()).await.unwrap();
    assert!(matches!(first, Some(Err(_))), "a bad id is an error item");
    assert!(bad.next().await.is_none(), "then the stream ends");
}

#[tokio::test]
async fn a_follower_told_what_was_sent_skips_it() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    let Some((cluster, writer)) = setup().await else {
        return;
    };
    let reader = replica(&cluster).await;
    writer
        .append_events("t1", &events("t1", 1..=3))
        .await
        .unwrap();
    let sent = Arc::new(AtomicU64::new(2));
    let mut follower = reader
        .follow_after_sent("t1", 0, Some(sent.clone()))
        .await
        .unwrap();
    assert_eq!(
        seqs(&next_n(&mut follower, 1).await),
        [3],
        "1 and 2 were sent"
    );
    // The consumer got 4 and 5 from elsewhere meanwhile.
    sent.store(5, Ordering::Release);
    writer
        .append_events("t1", &events("t1", 4..=6))
        .await
        .unwrap();
    assert_eq!(seqs(&next_n(&mut follower, 1).await), [6]);
    assert_eq!(follower.cursor(), 6);
    // A notification it already covers wakes it without a result.
    writer
        .append_events("t1", &events("t1", 7..=7))
        .await
        .unwrap();
    sent.store(7, Ordering::Release);
    writer
        .append_events("t1", &events("t1", 8..=8))
        .await
        .unwrap();
    assert_eq!(seqs(&next_n(&mut follower, 1).await), [8]);
}
