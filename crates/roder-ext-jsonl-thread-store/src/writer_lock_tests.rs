//! The writer lease over real files, with real processes where the point is
//! processes: a holder in another process, a `kill -9`, a spawned child.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use roder_api::events::{EventEnvelope, RoderEvent, TurnInterrupted};
use roder_api::thread::{ThreadMetadata, ThreadStore};
use roder_api::writer_lease::{
    WriterIdentity, WriterLease, WriterLeaseOutcome, WriterLeaseRequest,
};
use time::OffsetDateTime;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::JsonlThreadStore;

/// Set in the environment of [`holder_process`]: the store's base path.
const HOLDER_BASE_ENV: &str = "RODER_JSONL_TEST_LEASE_HOLDER_BASE";
/// What [`holder_process`] prints once it holds the lease.
const HELD_LINE: &str = "writer lease held";
const WAIT: Duration = Duration::from_secs(30);

/// Tests run in parallel threads of one process, and a child being spawned
/// holds a copy of every open file of the process until its `exec` closes
/// them. A test that spawns holds this for writing until its child has
/// exec'ed; a test that gives a lease up and expects to take it again at once
/// holds it for reading, so no other test's child briefly keeps its lock.
static SPAWNING: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

fn store(base: &std::path::Path) -> JsonlThreadStore {
    JsonlThreadStore {
        base_path: base.to_path_buf(),
    }
}

fn request(owner: &str, pid: u32, host: &str) -> WriterLeaseRequest {
    WriterLeaseRequest {
        owner: WriterIdentity::new(owner, pid, host),
        ttl: Duration::from_secs(30),
    }
}

fn metadata(thread_id: &str) -> ThreadMetadata {
    ThreadMetadata {
        thread_id: thread_id.to_string(),
        title: None,
        workspace: "/work/space".to_string(),
        provider: None,
        model: None,
        tool_allowlist: Vec::new(),
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
        updated_at: OffsetDateTime::UNIX_EPOCH,
    }
}

fn event(thread_id: &str, seq: u64) -> EventEnvelope {
    EventEnvelope {
        seq,
        timestamp: OffsetDateTime::UNIX_EPOCH,
        thread_id: thread_id.to_string(),
        turn_id: None,
        event: RoderEvent::TurnInterrupted(TurnInterrupted {
            thread_id: thread_id.to_string(),
            turn_id: format!("turn-{seq}"),
        }),
    }
}

async fn with_thread(thread_id: &str) -> (tempfile::TempDir, JsonlThreadStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    store.create_thread(metadata(thread_id)).await.unwrap();
    (dir, store)
}

fn acquired(outcome: WriterLeaseOutcome) -> Arc<dyn WriterLease> {
    match outcome {
        WriterLeaseOutcome::Acquired(lease) => lease,
        other => panic!("expected the lease, got {other:?}"),
    }
}

fn busy(outcome: WriterLeaseOutcome) -> WriterIdentity {
    match outcome {
        WriterLeaseOutcome::Busy(holder) => holder,
        other => panic!("expected busy, got {other:?}"),
    }
}

#[tokio::test]
async fn a_second_store_instance_is_told_who_holds_the_lease() {
    let _no_spawns = SPAWNING.read().await;
    let (dir, first) = with_thread("t1").await;
    let second = store(dir.path());
    let held_by = request("runtime-a", 4242, "box-a");
    let lease = acquired(
        first
            .acquire_writer_lease("t1", held_by.clone())
            .await
            .unwrap(),
    );
    assert_eq!(lease.thread_id(), "t1");
    assert_eq!(lease.generation(), 1);

    let holder = busy(
        second
            .acquire_writer_lease("t1", request("runtime-b", 7, "box-b"))
            .await
            .unwrap(),
    );
    assert_eq!(holder, held_by.owner);
    assert!(
        holder.to_string().starts_with("pid 4242 on box-a since "),
        "{holder}"
    );
    // Two runtimes in one process conflict too, even over one instance.
    busy(
        first
            .acquire_writer_lease("t1", request("runtime-c", 7, "box-b"))
            .await
            .unwrap(),
    );

    lease.release().await.unwrap();
    lease.release().await.unwrap();
    let record = std::fs::read_to_string(dir.path().join("t1/writer.lock")).unwrap();
    assert!(record.contains("\"holder\":null"), "{record}");
    let after_release = acquired(
        second
            .acquire_writer_lease("t1", request("runtime-b", 7, "box-b"))
            .await
            .unwrap(),
    );
    assert_eq!(after_release.generation(), 2);
    drop(after_release);
    let after_drop = acquired(
        first
            .acquire_writer_lease("t1", request("runtime-a", 4242, "box-a"))
            .await
            .unwrap(),
    );
    assert_eq!(after_drop.generation(), 3);
}

#[tokio::test]
async fn leases_of_different_threads_are_independent() {
    let (_dir, store) = with_thread("t1").await;
    store.create_thread(metadata("t2")).await.unwrap();
    let _one = acquired(
        store
            .acquire_writer_lease("t1", request("a", 1, "h"))
            .await
            .unwrap(),
    );
    let two = acquired(
        store
            .acquire_writer_lease("t2", request("b", 2, "h"))
            .await
            .unwrap(),
    );
    assert_eq!(two.generation(), 1);
}

#[tokio::test]
async fn a_thread_that_does_not_exist_has_no_lease() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let error = store
        .acquire_writer_lease("ghost", request("a", 1, "h"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("thread \"ghost\"") && error.contains("does not exist"),
        "{error}"
    );
    assert!(!dir.path().join("ghost").exists());
    let error = store
        .acquire_writer_lease("../x", request("a", 1, "h"))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("invalid thread id"), "{error}");
}

#[tokio::test]
async fn an_unreadable_holder_record_still_means_busy() {
    let _no_spawns = SPAWNING.read().await;
    let (dir, store) = with_thread("t1").await;
    let path = dir.path().join("t1/writer.lock");
    std::fs::write(&path, b"{\"generation\":3,\"hol").unwrap();
    let foreign = std::fs::File::open(&path).unwrap();
    foreign.try_lock().unwrap();
    let holder = busy(
        store
            .acquire_writer_lease("t1", request("a", 1, "h"))
            .await
            .unwrap(),
    );
    assert_eq!((holder.pid, holder.owner_id.as_str()), (0, "unknown"));
    assert!(holder.host.contains("unknown host"), "{}", holder.host);
    drop(foreign);
    // The torn record lost the count; granting still works.
    acquired(
        store
            .acquire_writer_lease("t1", request("a", 1, "h"))
            .await
            .unwrap(),
    );
}

#[tokio::test]
async fn the_lease_knows_where_the_log_ended() {
    let _no_spawns = SPAWNING.read().await;
    let (_dir, store) = with_thread("t1").await;
    let empty = acquired(
        store
            .acquire_writer_lease("t1", request("a", 1, "h"))
            .await
            .unwrap(),
    );
    assert_eq!(empty.last_seq_at_grant(), Some(0));
    let batch: Vec<EventEnvelope> = (1..=3).map(|seq| event("t1", seq)).collect();
    store
        .append_events_leased(empty.as_ref(), "t1", &batch)
        .await
        .unwrap();
    empty.release().await.unwrap();
    let three = acquired(
        store
            .acquire_writer_lease("t1", request("a", 1, "h"))
            .await
            .unwrap(),
    );
    assert_eq!(three.last_seq_at_grant(), Some(3));
}

#[tokio::test]
async fn appends_need_a_lease_that_is_still_held() {
    let (dir, store) = with_thread("t1").await;
    store.create_thread(metadata("t2")).await.unwrap();
    let lease = acquired(
        store
            .acquire_writer_lease("t1", request("a", 1, "h"))
            .await
            .unwrap(),
    );
    lease.renew().await.unwrap();
    store
        .append_events_leased(lease.as_ref(), "t1", &[event("t1", 1)])
        .await
        .unwrap();

    let error = store
        .append_events_leased(lease.as_ref(), "t2", &[event("t2", 1)])
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("lease given is for thread \"t1\""),
        "{error}"
    );

    let elsewhere = tempfile::tempdir().unwrap();
    let other_store = store_with_thread(elsewhere.path(), "t1").await;
    let error = other_store
        .append_events_leased(lease.as_ref(), "t1", &[event("t1", 1)])
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("is not held over"), "{error}");

    lease.release().await.unwrap();
    let error = lease.renew().await.unwrap_err().to_string();
    assert!(error.contains("was released"), "{error}");
    let before = std::fs::read(dir.path().join("t1/events.jsonl")).unwrap();
    let error = store
        .append_events_leased(lease.as_ref(), "t1", &[event("t1", 2)])
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("writer lease (generation 1) is not held"),
        "{error}"
    );
    assert_eq!(
        std::fs::read(dir.path().join("t1/events.jsonl")).unwrap(),
        before
    );
}

async fn store_with_thread(base: &std::path::Path, thread_id: &str) -> JsonlThreadStore {
    let store = store(base);
    store.create_thread(metadata(thread_id)).await.unwrap();
    store
}

/// A child process (a tool's command) must not inherit the lock: the lock
/// file is opened close-on-exec. The child says when it runs (its `exec` is
/// done, so it closed what it did not inherit) and keeps running.
#[tokio::test]
async fn a_spawned_command_does_not_keep_the_lease() {
    let _spawning = SPAWNING.write().await;
    let (dir, store) = with_thread("t1").await;
    let lease = acquired(
        store
            .acquire_writer_lease("t1", request("a", 1, "h"))
            .await
            .unwrap(),
    );
    let mut child = tokio::process::Command::new("sh")
        .args(["-c", "echo running; exec sleep 30"])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(WAIT, lines.next_line())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.as_deref(), Some("running"));
    drop(lease);
    let again = self::store(dir.path())
        .acquire_writer_lease("t1", request("b", 2, "h"))
        .await
        .unwrap();
    child.kill().await.unwrap();
    acquired(again);
}

#[tokio::test]
async fn a_holder_in_another_process_makes_it_busy_until_it_dies() {
    let spawning = SPAWNING.write().await;
    let (dir, store) = with_thread("t1").await;
    let mut holder = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "writer_lock::tests::holder_process",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HOLDER_BASE_ENV, dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let holder_pid = holder.id().unwrap();
    let mut lines = BufReader::new(holder.stdout.take().unwrap()).lines();
    tokio::time::timeout(WAIT, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains(HELD_LINE) {
                return;
            }
        }
        panic!("the holder process exited without taking the lease");
    })
    .await
    .unwrap();
    drop(spawning);

    let named = busy(
        store
            .acquire_writer_lease("t1", request("here", std::process::id(), "h"))
            .await
            .unwrap(),
    );
    assert_eq!(named.pid, holder_pid);
    assert_eq!(named.host, "holder-host");
    holder.kill().await.unwrap();
    holder.wait().await.unwrap();
    let lease = acquired(
        store
            .acquire_writer_lease("t1", request("here", std::process::id(), "h"))
            .await
            .unwrap(),
    );
    assert_eq!(lease.generation(), 2);
}

/// Not a test of its own: the process that holds the lease for
/// [`a_holder_in_another_process_makes_it_busy_until_it_dies`]. Holds it
/// until its stdin closes or it is killed.
#[test]
#[ignore = "helper process, run by a_holder_in_another_process_makes_it_busy_until_it_dies"]
fn holder_process() {
    let base = std::env::var_os(HOLDER_BASE_ENV).expect("run by the lease test");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let lease = runtime.block_on(async {
        acquired(
            store(std::path::Path::new(&base))
                .acquire_writer_lease("t1", request("child", std::process::id(), "holder-host"))
                .await
                .unwrap(),
        )
    });
    println!("{HELD_LINE}");
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    drop(lease);
}
