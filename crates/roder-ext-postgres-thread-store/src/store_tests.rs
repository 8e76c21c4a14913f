//! The JSONL store's contract, against a real PostgreSQL (a throwaway
//! cluster per test): the same behaviours, where they are not about files.

use std::time::Duration;

use roder_api::thread::{ThreadMetadata, ThreadStore, ThreadStoreFactory};
use time::OffsetDateTime;

use crate::test_fixtures::*;
use crate::{PostgresThreadStore, PostgresThreadStoreFactory, schema};

#[tokio::test]
async fn round_trips_metadata_and_events() {
    let Some((_cluster, store)) = setup().await else {
        return;
    };
    let meta = metadata("t1", OffsetDateTime::UNIX_EPOCH);
    store.create_thread(meta.clone()).await.unwrap();
    store
        .append_events("t1", &events("t1", 1..=2))
        .await
        .unwrap();
    store
        .append_events("t1", &events("t1", 3..=3))
        .await
        .unwrap();
    store.append_events("t1", &[]).await.unwrap();

    assert_eq!(store.load_metadata("t1").await.unwrap(), Some(meta.clone()));
    assert_eq!(
        store.load_events("t1", 0).await.unwrap(),
        events("t1", 1..=3)
    );
    assert_eq!(
        store.load_events("t1", 2).await.unwrap(),
        events("t1", 3..=3)
    );
    assert!(store.load_events("t1", 3).await.unwrap().is_empty());

    let snapshot = store.load_thread("t1").await.unwrap().unwrap();
    assert_eq!(snapshot.metadata, Some(meta));
    assert_eq!(snapshot.last_seq(), 3);

    // Stored byte for byte as serde wrote them (pages are sized by this).
    let stored: Vec<String> = sqlx::query_scalar(
        "SELECT envelope::text FROM roder_events WHERE thread_id = 't1' ORDER BY seq",
    )
    .fetch_all(store.pool())
    .await
    .unwrap();
    let written: Vec<String> = events("t1", 1..=3)
        .iter()
        .map(|envelope| serde_json::to_string(envelope).unwrap())
        .collect();
    assert_eq!(stored, written);
}

#[tokio::test]
async fn missing_threads_load_as_nothing() {
    let Some((_cluster, store)) = setup().await else {
        return;
    };
    assert_eq!(store.load_metadata("nope").await.unwrap(), None);
    assert!(store.load_events("nope", 0).await.unwrap().is_empty());
    assert_eq!(store.load_thread("nope").await.unwrap(), None);
    assert!(store.list_threads().await.unwrap().is_empty());
    let page = store
        .load_events_page("nope", 0, 10, 1 << 20)
        .await
        .unwrap();
    assert!(page.events.is_empty() && !page.more);
}

#[tokio::test]
async fn create_refuses_an_existing_thread() {
    let Some((_cluster, store)) = setup().await else {
        return;
    };
    store
        .create_thread(metadata("t1", OffsetDateTime::UNIX_EPOCH))
        .await
        .unwrap();
    let mut second = metadata("t1", OffsetDateTime::now_utc());
    second.title = Some("other".to_string());
    let error = store.create_thread(second).await.unwrap_err();
    assert!(
        error.to_string().contains("\"t1\" already exists"),
        "{error}"
    );
    let kept = store.load_metadata("t1").await.unwrap().unwrap();
    assert_eq!(kept.title.as_deref(), Some("title of t1"));
}

#[tokio::test]
async fn concurrent_creators_of_one_thread_one_wins() {
    let Some((cluster, store)) = setup().await else {
        return;
    };
    let other = replica(&cluster).await;
    let mut first = metadata("t1", OffsetDateTime::UNIX_EPOCH);
    first.title = Some("first".into());
    let mut second = first.clone();
    second.title = Some("second".into());
    let (a, b) = tokio::join!(store.create_thread(first), other.create_thread(second));
    assert!(
        a.is_ok() != b.is_ok(),
        "exactly one creator wins: {a:?} {b:?}"
    );
    let winner = if a.is_ok() { "first" } else { "second" };
    let kept = store.load_metadata("t1").await.unwrap().unwrap();
    assert_eq!(kept.title.as_deref(), Some(winner));
}

#[tokio::test]
async fn update_needs_an_existing_thread() {
    let Some((_cluster, store)) = setup().await else {
        return;
    };
    let error = store
        .update_thread_metadata(metadata("ghost", OffsetDateTime::UNIX_EPOCH))
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("\"ghost\" does not exist"),
        "{error}"
    );
    assert_eq!(store.load_metadata("ghost").await.unwrap(), None);
}

#[tokio::test]
async fn unsafe_ids_are_refused_by_every_operation() {
    let Some((_cluster, store)) = setup().await else {
        return;
    };
    for id in ["../escape", "a/b", ".hidden", "-x", ""] {
        let quoted = format!("{id:?}");
        let errors = [
            store
                .create_thread(metadata(id, OffsetDateTime::UNIX_EPOCH))
                .await
                .unwrap_err(),
            store
                .update_thread_metadata(metadata(id, OffsetDateTime::UNIX_EPOCH))
                .await
                .unwrap_err(),
            store.load_metadata(id).await.unwrap_err(),
            store
                .append_events(id, &events(id, 1..=1))
                .await
                .unwrap_err(),
            store.load_events(id, 0).await.unwrap_err(),
            store.delete_thread(id).await.unwrap_err(),
        ];
        for error in errors {
            assert!(error.to_string().contains(&quoted), "{id}: {error}");
        }
    }
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM roder_threads")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(rows, 0);
}

#[tokio::test]
async fn events_of_another_thread_are_refused() {
    let Some((_cluster, store)) = setup().await else {
        return;
    };
    let error = store
        .append_events("t1", &events("t2", 1..=1))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("\"t2\""), "{error}");
    assert!(store.load_events("t1", 0).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_second_store_instance_sees_metadata_updates() {
    let Some((cluster, runtime_store)) = setup().await else {
        return;
    };
    let other_store = replica(&cluster).await;
    let meta = metadata("t1", OffsetDateTime::UNIX_EPOCH);
    runtime_store.create_thread(meta.clone()).await.unwrap();
    let mut updated = meta;
    updated.title = Some("renamed".to_string());
    updated.updated_at = OffsetDateTime::now_utc();
    other_store
        .update_thread_metadata(updated.clone())
        .await
        .unwrap();
    assert_eq!(
        runtime_store.load_metadata("t1").await.unwrap(),
        Some(updated)
    );
}

#[tokio::test]
async fn readers_never_see_a_half_written_metadata_row() {
    let Some((cluster, writer)) = setup().await else {
        return;
    };
    let reader = replica(&cluster).await;
    let mut meta = metadata("t1", OffsetDateTime::UNIX_EPOCH);
    writer.create_thread(meta.clone()).await.unwrap();
    let writing = tokio::spawn(async move {
        for round in 0..100 {
            meta.title = Some("x".repeat(round * 37));
            writer.update_thread_metadata(meta.clone()).await.unwrap();
        }
    });
    let mut reads = 0;
    while !writing.is_finished() || reads == 0 {
        let loaded = reader.load_metadata("t1").await.unwrap();
        let title = loaded
            .expect("metadata vanished during an update")
            .title
            .unwrap();
        assert!(
            title == "title of t1" || title.len() % 37 == 0,
            "a torn title: {} chars",
            title.len()
        );
        reads += 1;
    }
    writing.await.unwrap();
    let last = reader.load_metadata("t1").await.unwrap().unwrap();
    assert_eq!(last.title.map(|title| title.len()), Some(99 * 37));
}

#[tokio::test]
async fn lists_threads_most_recently_updated_first() {
    let Some((_cluster, store)) = setup().await else {
        return;
    };
    let at = |seconds| OffsetDateTime::UNIX_EPOCH + Duration::from_secs(seconds);
    store.create_thread(metadata("old", at(10))).await.unwrap();
    store.create_thread(metadata("new", at(30))).await.unwrap();
    store.create_thread(metadata("mid", at(20))).await.unwrap();
    // Not a thread to list: events without metadata.
    store
        .append_events("orphan", &events("orphan", 1..=1))
        .await
        .unwrap();
    let order = |threads: Vec<ThreadMetadata>| -> Vec<String> {
        threads.into_iter().map(|meta| meta.thread_id).collect()
    };
    assert_eq!(
        order(store.list_threads().await.unwrap()),
        ["new", "mid", "old"]
    );
    store
        .update_thread_metadata(metadata("old", at(40)))
        .await
        .unwrap();
    assert_eq!(
        order(store.list_threads().await.unwrap()),
        ["old", "new", "mid"]
    );
    // Metadata may follow the events: the orphan becomes a thread.
    store
        .create_thread(metadata("orphan", at(50)))
        .await
        .unwrap();
    assert_eq!(store.list_threads().await.unwrap()[0].thread_id, "orphan");
    assert_eq!(store.load_events("orphan", 0).await.unwrap().len(), 1);
}

#[tokio::test]
async fn delete_removes_the_thread_and_is_idempotent() {
    let Some((_cluster, store)) = setup().await else {
        return;
    };
    store
        .create_thread(metadata("t1", OffsetDateTime::UNIX_EPOCH))
        .await
        .unwrap();
    store
        .append_events("t1", &events("t1", 1..=2))
        .await
        .unwrap();
    store.delete_thread("t1").await.unwrap();
    assert_eq!(store.load_thread("t1").await.unwrap(), None);
    assert!(store.list_threads().await.unwrap().is_empty());
    store.delete_thread("t1").await.unwrap();
    let left: i64 = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM roder_threads) + (SELECT count(*) FROM roder_events)
              + (SELECT count(*) FROM roder_thread_metadata)",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert_eq!(left, 0, "nothing left behind");
    store
        .create_thread(metadata("t1", OffsetDateTime::UNIX_EPOCH))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_re_created_thread_numbers_from_one_again() {
    let Some((_cluster, store)) = setup().await else {
        return;
    };
    store
        .append_events("t1", &events("t1", 1..=2))
        .await
        .unwrap();
    store.delete_thread("t1").await.unwrap();
    store
        .append_events("t1", &events("t1", 1..=1))
        .await
        .unwrap();
    assert_eq!(
        store.load_events("t1", 0).await.unwrap(),
        events("t1", 1..=1)
    );
}

#[tokio::test]
async fn factory_opens_a_shared_view() {
    let Some((cluster, _store)) = setup().await else {
        return;
    };
    let factory = PostgresThreadStoreFactory::connect(&cluster.url())
        .await
        .unwrap();
    assert_eq!(factory.id(), "postgres");
    let opened = factory.open().unwrap();
    opened
        .create_thread(metadata("t1", OffsetDateTime::UNIX_EPOCH))
        .await
        .unwrap();
    let direct = replica(&cluster).await;
    assert!(direct.load_metadata("t1").await.unwrap().is_some());
}

#[tokio::test]
async fn loads_ten_thousand_events_and_pages_them() {
    let Some((_cluster, store)) = setup().await else {
        return;
    };
    let all = events("t1", 1..=10_000);
    for chunk in all.chunks(1000) {
        store.append_events("t1", chunk).await.unwrap();
    }
    let loaded = store.load_events("t1", 0).await.unwrap();
    assert_eq!(loaded, all);
    assert_eq!(store.load_events("t1", 9_990).await.unwrap().len(), 10);

    let page = store.load_events_page("t1", 0, 100, 1 << 20).await.unwrap();
    assert_eq!(seqs(&page.events), (1..=100).collect::<Vec<_>>());
    assert!(page.more);
    let last = store
        .load_events_page("t1", 9_995, 100, 1 << 20)
        .await
        .unwrap();
    assert_eq!(seqs(&last.events), (9_996..=10_000).collect::<Vec<_>>());
    assert!(!last.more);
    let exact = store
        .load_events_page("t1", 9_990, 10, 1 << 20)
        .await
        .unwrap();
    assert_eq!(exact.events.len(), 10);
    assert!(!exact.more, "nothing follows the last event");
}

#[tokio::test]
async fn pages_are_bounded_by_bytes_like_page_of() {
    let Some((_cluster, store)) = setup().await else {
        return;
    };
    let all = events("t1", 1..=50);
    store.append_events("t1", &all).await.unwrap();
    // The store's page must be the in-memory reference's, at every bound.
    for max_bytes in [0, 1, 150, 400, 1_000, 5_000, 1 << 20] {
        for max_items in [1, 3, 50, 100] {
            for after in [0, 10, 49, 50] {
                let from_store = store
                    .load_events_page("t1", after, max_items, max_bytes)
                    .await
                    .unwrap();
                let rest: Vec<_> = all.iter().filter(|e| e.seq > after).cloned().collect();
                let reference = roder_api::thread::page_of(rest, max_items, max_bytes);
                assert_eq!(from_store, reference, "{after} {max_items} {max_bytes}");
            }
        }
    }
}

#[tokio::test]
async fn an_append_that_does_not_continue_the_log_is_refused_whole() {
    let Some((cluster, store)) = setup().await else {
        return;
    };
    store
        .append_events("t1", &events("t1", 1..=3))
        .await
        .unwrap();
    let error = store
        .append_events("t1", &events("t1", 2..=4))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("append of seq 2 to thread \"t1\" refused")
            && error.contains("ends at seq 3"),
        "{error}"
    );
    let error = store
        .append_events("t1", &events("t1", 5..=5))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("append of seq 5"), "{error}");
    let mut gap = events("t1", 4..=4);
    gap.push(event("t1", 6));
    let error = store
        .append_events("t1", &gap)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("seq 6 follows seq 4 in one batch"),
        "{error}"
    );
    assert_eq!(seqs(&store.load_events("t1", 0).await.unwrap()), [1, 2, 3]);

    // Another replica continues where the log ends.
    let other = replica(&cluster).await;
    other
        .append_events("t1", &events("t1", 4..=5))
        .await
        .unwrap();
    let error = store
        .append_events("t1", &events("t1", 4..=4))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("ends at seq 5"), "{error}");
    store
        .append_events("t1", &events("t1", 6..=6))
        .await
        .unwrap();
    assert_eq!(
        seqs(&store.load_events("t1", 0).await.unwrap()),
        [1, 2, 3, 4, 5, 6]
    );
}

#[tokio::test]
async fn replicas_starting_together_migrate_once() {
    let Some((cluster, _)) = setup().await else {
        return;
    };
    let url = cluster.create_database("fresh").await.unwrap();
    let starts: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { PostgresThreadStore::connect(&url).await })
        })
        .collect();
    for start in starts {
        start.await.unwrap().unwrap();
    }
    let store = PostgresThreadStore::connect(&url).await.unwrap();
    let versions: Vec<i64> =
        sqlx::query_scalar("SELECT version FROM roder_schema_migrations ORDER BY version")
            .fetch_all(store.pool())
            .await
            .unwrap();
    assert_eq!(versions, (1..=schema::latest_version()).collect::<Vec<_>>());

    // A database a newer roder migrated is refused, not used.
    sqlx::query("INSERT INTO roder_schema_migrations (version, name) VALUES (9999, 'future')")
        .execute(store.pool())
        .await
        .unwrap();
    let error = PostgresThreadStore::connect(&url).await.unwrap_err();
    assert!(
        format!("{error:#}").contains("version 9999, newer than this build knows"),
        "{error:#}"
    );
}

#[tokio::test]
async fn an_unreachable_database_is_a_clear_error_without_the_password() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://roder:hunter2@127.0.0.1:{port}/roder");
    let options = crate::PostgresStoreOptions {
        acquire_timeout: Duration::from_secs(2),
        ..Default::default()
    };
    let error = PostgresThreadStore::connect_with(&url, options)
        .await
        .unwrap_err();
    let shown = format!("{error:#}");
    assert!(
        shown.contains(&format!(
            "cannot connect to Postgres at postgres://roder:***@127.0.0.1:{port}/roder"
        )),
        "{shown}"
    );
    assert!(!shown.contains("hunter2"), "{shown}");
}

#[tokio::test]
async fn a_lazy_store_connects_and_migrates_on_its_first_call() {
    let Some((cluster, _)) = setup().await else {
        return;
    };
    let url = cluster.create_database("lazy").await.unwrap();
    let factory = PostgresThreadStoreFactory::lazy(&url).unwrap();
    let store = factory.open().unwrap();
    store
        .create_thread(metadata("t1", OffsetDateTime::UNIX_EPOCH))
        .await
        .unwrap();
    let direct = PostgresThreadStore::connect(&url).await.unwrap();
    assert!(direct.load_metadata("t1").await.unwrap().is_some());

    let error = PostgresThreadStoreFactory::lazy("mysql://x").unwrap_err();
    assert!(
        error.to_string().contains("invalid Postgres URL"),
        "{error}"
    );
    // Unreachable: each call fails, naming where it tried.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let options = crate::PostgresStoreOptions {
        acquire_timeout: Duration::from_secs(1),
        ..Default::default()
    };
    let down = PostgresThreadStore::connect_lazy(
        &format!("postgres://roder:pw@127.0.0.1:{port}/roder"),
        options,
    )
    .unwrap();
    let error = down.list_threads().await.unwrap_err();
    let shown = format!("{error:#}");
    assert!(
        shown.contains(&format!("postgres://roder@127.0.0.1:{port}/roder")),
        "{shown}"
    );
    assert!(!shown.contains("pw@"), "{shown}");
}
