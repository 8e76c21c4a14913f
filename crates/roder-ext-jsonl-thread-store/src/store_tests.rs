//! Store behaviour over a real temporary directory.

use std::time::Duration;

use roder_api::events::{RoderEvent, ThreadCreated, TurnInterrupted};
use time::OffsetDateTime;

use super::*;

fn metadata(thread_id: &str, updated_at: OffsetDateTime) -> ThreadMetadata {
    ThreadMetadata {
        thread_id: thread_id.to_string(),
        title: Some(format!("title of {thread_id}")),
        workspace: "/work/space".to_string(),
        provider: Some("mock".to_string()),
        model: Some("mock-model".to_string()),
        tool_allowlist: vec!["exec_command".to_string()],
        developer_instructions: None,
        external_tools: Vec::new(),
        runner_destination: None,
        runner_binding: None,
        runner_state: None,
        runner_idle_paused: false,
        sandbox: None,
        usage: Default::default(),
        last_compaction_seq: None,
        archived: false,
        approvals: Default::default(),
        profile: None,
        created_at: OffsetDateTime::UNIX_EPOCH,
        updated_at,
    }
}

fn event(thread_id: &str, seq: u64) -> EventEnvelope {
    let event = if seq == 1 {
        RoderEvent::ThreadCreated(ThreadCreated {
            thread_id: thread_id.to_string(),
            workspace: "/work/space".to_string(),
            runner_provider_id: None,
        })
    } else {
        RoderEvent::TurnInterrupted(TurnInterrupted {
            thread_id: thread_id.to_string(),
            turn_id: format!("turn-{seq}"),
        })
    };
    EventEnvelope {
        seq,
        timestamp: OffsetDateTime::UNIX_EPOCH + Duration::from_secs(seq),
        thread_id: thread_id.to_string(),
        turn_id: None,
        event,
    }
}

fn events(thread_id: &str, seqs: std::ops::RangeInclusive<u64>) -> Vec<EventEnvelope> {
    seqs.map(|seq| event(thread_id, seq)).collect()
}

fn store(dir: &tempfile::TempDir) -> JsonlThreadStore {
    JsonlThreadStore {
        base_path: dir.path().join("threads"),
    }
}

#[tokio::test]
async fn round_trips_metadata_and_events() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
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

    let on_disk = tokio::fs::read_to_string(dir.path().join("threads/t1/events.jsonl"))
        .await
        .unwrap();
    assert_eq!(on_disk.lines().count(), 3);
    assert!(on_disk.ends_with('\n'));
}

#[tokio::test]
async fn missing_threads_load_as_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    assert_eq!(store.load_metadata("nope").await.unwrap(), None);
    assert!(store.load_events("nope", 0).await.unwrap().is_empty());
    assert_eq!(store.load_thread("nope").await.unwrap(), None);
    assert!(store.list_threads().await.unwrap().is_empty());
}

#[tokio::test]
async fn create_refuses_an_existing_thread() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
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
async fn update_needs_an_existing_thread() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
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
async fn torn_last_line_is_skipped_and_the_thread_keeps_going() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    store
        .create_thread(metadata("t1", OffsetDateTime::UNIX_EPOCH))
        .await
        .unwrap();
    store
        .append_events("t1", &events("t1", 1..=2))
        .await
        .unwrap();

    // A crash mid-write: half of the next envelope, no newline.
    let log = dir.path().join("threads/t1/events.jsonl");
    let whole = serde_json::to_string(&event("t1", 3)).unwrap();
    let mut file = tokio::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .await
        .unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut file, &whole.as_bytes()[..whole.len() / 2])
        .await
        .unwrap();
    drop(file);

    assert_eq!(
        store.load_events("t1", 0).await.unwrap(),
        events("t1", 1..=2)
    );

    store
        .append_events("t1", &events("t1", 3..=4))
        .await
        .unwrap();
    assert_eq!(
        store.load_events("t1", 0).await.unwrap(),
        events("t1", 1..=4)
    );
    let reopened = JsonlThreadStore {
        base_path: dir.path().join("threads"),
    };
    assert_eq!(
        reopened.load_events("t1", 2).await.unwrap(),
        events("t1", 3..=4)
    );
}

#[tokio::test]
async fn unsafe_ids_are_refused_by_every_operation() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
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
    assert!(
        !tokio::fs::try_exists(dir.path().join("escape"))
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn events_of_another_thread_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    let error = store
        .append_events("t1", &events("t2", 1..=1))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("\"t2\""), "{error}");
    assert!(store.load_events("t1", 0).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_second_store_instance_sees_metadata_updates() {
    let dir = tempfile::tempdir().unwrap();
    let runtime_store = store(&dir);
    let other_store = store(&dir);
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
    let mut names = Vec::new();
    let mut entries = tokio::fs::read_dir(dir.path().join("threads/t1"))
        .await
        .unwrap();
    while let Some(entry) = entries.next_entry().await.unwrap() {
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    assert_eq!(names, vec!["metadata.json"], "no temp file is left behind");
}

#[tokio::test]
async fn readers_never_see_a_half_written_metadata_file() {
    let dir = tempfile::tempdir().unwrap();
    let writer = store(&dir);
    let reader = store(&dir);
    let mut meta = metadata("t1", OffsetDateTime::UNIX_EPOCH);
    writer.create_thread(meta.clone()).await.unwrap();

    let writing = tokio::spawn(async move {
        for round in 0..200 {
            // Varying sizes, so a torn write would show as a parse error.
            meta.title = Some("x".repeat(round * 37));
            writer.update_thread_metadata(meta.clone()).await.unwrap();
        }
    });
    let mut reads = 0;
    while !writing.is_finished() || reads == 0 {
        let loaded = reader.load_metadata("t1").await.unwrap();
        assert!(loaded.is_some(), "metadata vanished during a rewrite");
        reads += 1;
    }
    writing.await.unwrap();
    let last = reader.load_metadata("t1").await.unwrap().unwrap();
    assert_eq!(last.title.map(|title| title.len()), Some(199 * 37));
}

#[tokio::test]
async fn lists_threads_most_recently_updated_first() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    let at = |seconds| OffsetDateTime::UNIX_EPOCH + Duration::from_secs(seconds);
    store.create_thread(metadata("old", at(10))).await.unwrap();
    store.create_thread(metadata("new", at(30))).await.unwrap();
    store.create_thread(metadata("mid", at(20))).await.unwrap();
    // Not threads: events without metadata, a stray file, a hidden dir.
    store
        .append_events("orphan", &events("orphan", 1..=1))
        .await
        .unwrap();
    tokio::fs::write(dir.path().join("threads/notes.txt"), b"x")
        .await
        .unwrap();
    tokio::fs::create_dir(dir.path().join("threads/.deleted-x"))
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
}

#[tokio::test]
async fn delete_removes_the_thread_and_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
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
    let mut entries = tokio::fs::read_dir(dir.path().join("threads"))
        .await
        .unwrap();
    assert!(
        entries.next_entry().await.unwrap().is_none(),
        "nothing left behind"
    );
    // The id is free again.
    store
        .create_thread(metadata("t1", OffsetDateTime::UNIX_EPOCH))
        .await
        .unwrap();
}

#[tokio::test]
async fn factory_creates_the_base_and_opens_a_shared_view() {
    let dir = tempfile::tempdir().unwrap();
    let factory = JsonlThreadStoreFactory {
        base_path: dir.path().join("a/b/threads"),
    };
    assert_eq!(factory.id(), "jsonl");
    let opened = factory.open().unwrap();
    assert!(
        tokio::fs::metadata(dir.path().join("a/b/threads"))
            .await
            .unwrap()
            .is_dir()
    );
    opened
        .create_thread(metadata("t1", OffsetDateTime::UNIX_EPOCH))
        .await
        .unwrap();
    let direct = JsonlThreadStore::new(dir.path().join("a/b/threads"));
    assert!(direct.load_metadata("t1").await.unwrap().is_some());
}

#[tokio::test]
async fn loads_ten_thousand_events() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    let all = events("t1", 1..=10_000);
    for chunk in all.chunks(1000) {
        store.append_events("t1", chunk).await.unwrap();
    }
    let loaded = store.load_events("t1", 0).await.unwrap();
    assert_eq!(loaded.len(), 10_000);
    assert_eq!(loaded, all);
    assert_eq!(store.load_events("t1", 9_990).await.unwrap().len(), 10);
}

#[tokio::test]
async fn an_append_that_does_not_continue_the_log_is_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    store
        .append_events("t1", &events("t1", 1..=3))
        .await
        .unwrap();
    let path = dir.path().join("threads/t1/events.jsonl");
    let before = std::fs::read(&path).unwrap();

    // What two `roder exec` on one thread used to do: a second writer
    // numbering from the same last seq.
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
    assert_eq!(std::fs::read(&path).unwrap(), before);

    // Another store instance (another process) continues where it ends.
    let other = JsonlThreadStore {
        base_path: dir.path().join("threads"),
    };
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
    let seqs: Vec<u64> = store
        .load_events("t1", 0)
        .await
        .unwrap()
        .iter()
        .map(|envelope| envelope.seq)
        .collect();
    assert_eq!(seqs, vec![1, 2, 3, 4, 5, 6]);
}

#[tokio::test]
async fn a_re_created_thread_numbers_from_one_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
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

mod sync_modes {
    use super::*;
    use crate::sync::{self, SyncMode};
    use roder_api::events::ToolCallStarted;

    fn tool_call_started(thread_id: &str, seq: u64) -> EventEnvelope {
        EventEnvelope {
            seq,
            timestamp: OffsetDateTime::UNIX_EPOCH,
            thread_id: thread_id.to_string(),
            turn_id: Some("u".to_string()),
            event: RoderEvent::ToolCallStarted(ToolCallStarted {
                thread_id: thread_id.to_string(),
                turn_id: "u".to_string(),
                call_id: format!("call-{seq}"),
                tool_name: "exec_command".to_string(),
                approved_by: None,
            }),
        }
    }

    /// Appends a thread's created event, a tool call about to run, and a
    /// turn's end; returns the syncs each append made.
    async fn syncs_per_append(mode: SyncMode) -> Vec<u64> {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir);
        sync::set_mode(&store.base_path, mode);
        let log = store.base_path.join("t").join(EVENTS_FILE);
        let mut counts = Vec::new();
        for envelope in [
            event("t", 1),
            tool_call_started("t", 2),
            event("t", 3), // TurnInterrupted: a turn's end
        ] {
            let before = sync::syncs_of(&log);
            store.append_events("t", &[envelope]).await.unwrap();
            counts.push(sync::syncs_of(&log) - before);
        }
        let seqs: Vec<u64> = store
            .load_events("t", 0)
            .await
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect();
        assert_eq!(seqs, vec![1, 2, 3], "{mode:?}");
        counts
    }

    #[tokio::test]
    async fn each_mode_syncs_the_appends_it_names() {
        assert_eq!(syncs_per_append(SyncMode::None).await, vec![0, 0, 0]);
        assert_eq!(syncs_per_append(SyncMode::Turn).await, vec![0, 1, 1]);
        assert_eq!(syncs_per_append(SyncMode::Always).await, vec![1, 1, 1]);
    }

    #[test]
    fn unset_directories_use_turn_and_names_parse() {
        assert_eq!(
            sync::mode(std::path::Path::new("/nowhere/set")),
            SyncMode::Turn
        );
        for mode in [SyncMode::None, SyncMode::Turn, SyncMode::Always] {
            assert_eq!(mode.as_str().parse::<SyncMode>().unwrap(), mode);
        }
        let error = "sometimes".parse::<SyncMode>().unwrap_err().to_string();
        assert!(
            error.contains("\"sometimes\"") && error.contains("\"turn\""),
            "{error}"
        );
    }
}

mod full_disk {
    use super::*;

    use roder_testkit::tmpfs::Tmpfs;

    /// Fills `dir`'s filesystem with a file, then frees `leave` bytes of
    /// it: a write larger than that is cut short part way.
    fn fill(dir: &std::path::Path, leave: u64) -> std::path::PathBuf {
        use std::io::Write as _;
        let filler = dir.join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        let block = vec![1_u8; 4096];
        while file.write_all(&block).is_ok() {}
        let len = file.metadata().unwrap().len();
        file.set_len(len.saturating_sub(leave)).unwrap();
        filler
    }

    #[tokio::test]
    async fn a_full_disk_fails_the_append_whole_and_the_log_continues_after() {
        let Some(tmpfs) = Tmpfs::mount("1m").unwrap() else {
            return;
        };
        let store = JsonlThreadStore::new(tmpfs.path().join("threads"));
        store.append_events("t", &events("t", 1..=3)).await.unwrap();
        let before = std::fs::read(store.base_path.join("t").join(EVENTS_FILE)).unwrap();
        let filler = fill(tmpfs.path(), 8192);
        // A batch larger than the space left: the write is cut short after
        // some whole lines.
        let mut big = events("t", 4..=40);
        for envelope in &mut big {
            envelope.turn_id = Some("x".repeat(2000));
        }
        let error = format!("{:#}", store.append_events("t", &big).await.unwrap_err());
        assert!(
            error.contains("is full")
                && error.contains(&tmpfs.path().display().to_string())
                && error.contains(EVENTS_FILE),
            "{error}"
        );
        // Nothing of the batch stayed: the log is as it was, and readable.
        let log = store.base_path.join("t").join(EVENTS_FILE);
        let after = std::fs::read(&log).unwrap();
        assert!(
            after == before,
            "the log changed: {} bytes, was {}",
            after.len(),
            before.len()
        );
        assert_eq!(store.load_events("t", 0).await.unwrap().len(), 3);
        // Space freed: the same seqs go in.
        std::fs::remove_file(filler).unwrap();
        store.append_events("t", &big).await.unwrap();
        let seqs: Vec<u64> = store
            .load_events("t", 0)
            .await
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect();
        assert_eq!(seqs, (1..=40).collect::<Vec<_>>());
    }
}
