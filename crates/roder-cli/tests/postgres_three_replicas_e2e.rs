//! Three `roder app-server` replicas (real processes, one home each, as on
//! three hosts) on one PostgreSQL (a throwaway cluster), driven over stdio:
//!
//! * a client starts turns on one replica and follows them live from
//!   another, then "reconnects" to the third from its last seq: every event
//!   once, in order, across both connections;
//! * a replica killed (`kill -9`) mid-turn has its thread taken over by
//!   another once the lease expires, while a client on the third follows;
//! * a replica stopped (`SIGSTOP`) past its lease expiry, then continued,
//!   writes nothing more to the thread another replica took over, and the
//!   log in the database holds each seq once, without a gap.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use roder_api::thread::ThreadStore;
use roder_ext_postgres_thread_store::PostgresThreadStore;
use roder_ext_postgres_thread_store::test_support::{TestCluster, wait_for_lease_expiry};
use roder_testkit::fake_models::{ChatStream, FakeModelServer};
use serde_json::json;
use support::replica::Replica;
use support::*;

/// Lease ttl of every replica: a dead replica's thread is free this soon.
const TTL_SECS: u64 = 2;

fn write_home(home: &Path, server: &FakeModelServer, url: &str) {
    write_config(home, server, None);
    let config = std::fs::read_to_string(home.join("config.toml")).unwrap();
    let top = format!("writer_lease_ttl_secs = {TTL_SECS}\nstore = \"{url}\"\n");
    std::fs::write(home.join("config.toml"), format!("{top}{config}")).unwrap();
}

struct Setup {
    _cluster: TestCluster,
    url: String,
    server: FakeModelServer,
    root: std::path::PathBuf,
    _dirs: Vec<tempfile::TempDir>,
    replicas: Vec<Replica>,
}

async fn three_replicas() -> Option<Setup> {
    let cluster = TestCluster::start_or_skip().await.unwrap()?;
    let url = cluster.url();
    let server = FakeModelServer::start().await.unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(workspace.path()).unwrap();
    let mut dirs = vec![workspace];
    let mut replicas = Vec::new();
    for _ in 0..3 {
        let home = tempfile::tempdir().unwrap();
        write_home(home.path(), &server, &url);
        replicas.push(Replica::start(home.path(), &root, &[]).await);
        dirs.push(home);
    }
    Some(Setup {
        _cluster: cluster,
        url,
        server,
        root,
        _dirs: dirs,
        replicas,
    })
}

fn seqs(events: &[(u64, String, String)]) -> Vec<u64> {
    events.iter().map(|(seq, _, _)| *seq).collect()
}

fn exec_reply(call_id: &str, cmd: &str) -> roder_testkit::fake_models::FakeStream {
    let arguments = json!({ "cmd": cmd }).to_string();
    ChatStream::tool_calls_reply(&[(call_id, "exec_command", &arguments)])
}

#[tokio::test]
async fn a_client_follows_turns_live_from_another_replica_and_resumes_on_a_third() {
    let Some(mut setup) = three_replicas().await else {
        return;
    };
    let (a, rest) = setup.replicas.split_first_mut().unwrap();
    let (b, rest) = rest.split_first_mut().unwrap();
    let c = &mut rest[0];

    let thread = a.call("thread/start", json!({})).await.unwrap();
    let thread_id = thread["thread"]["threadId"].as_str().unwrap().to_string();
    // A's own subscription (thread/start subscribes) is not what we watch.
    a.call("thread/unsubscribe", json!({"threadId": thread_id}))
        .await
        .unwrap();
    let resumed = b
        .call(
            "thread/resume",
            json!({"threadId": thread_id, "afterSeq": 0}),
        )
        .await
        .unwrap();
    assert_eq!(resumed["lastSeq"], 1, "{resumed}");

    // Turn 1 runs on A; B follows it live.
    setup.server.push(exec_reply("call-1", "sleep 1; echo one"));
    setup.server.push(ChatStream::text_reply("First done."));
    let turn = a
        .call(
            "turn/start",
            json!({"threadId": thread_id, "message": "one"}),
        )
        .await
        .unwrap();
    let first = b.events_until(&thread_id, "turn_completed").await;
    assert_eq!(first[0].0, 1, "the replayed thread_created: {first:?}");
    assert_eq!(first[0].1, "thread_created");
    assert_eq!(
        seqs(&first),
        (1..=first.len() as u64).collect::<Vec<_>>(),
        "B saw A's turn once, in order: {first:?}"
    );
    assert!(
        first
            .iter()
            .any(|(_, kind, _)| kind == "tool_call_completed")
    );
    assert_eq!(first.last().unwrap().2, turn["turnId"].as_str().unwrap());

    // Turn 2 runs on A with a slower tool; the client on B leaves in the
    // middle (after the tool started) and comes back on C from its last seq.
    setup.server.push(exec_reply("call-2", "sleep 2; echo two"));
    setup.server.push(ChatStream::text_reply("Second done."));
    a.call(
        "turn/start",
        json!({"threadId": thread_id, "message": "two"}),
    )
    .await
    .unwrap();
    let before = b.events_until(&thread_id, "tool_call_started").await;
    let last_seen = before.last().unwrap().0;
    // B's client is gone: from here on nothing is read from B.
    let resumed = c
        .call(
            "thread/resume",
            json!({"threadId": thread_id, "afterSeq": last_seen}),
        )
        .await
        .unwrap();
    assert!(
        resumed["lastSeq"].as_u64().unwrap() >= last_seen,
        "{resumed}"
    );
    let after = c.events_until(&thread_id, "turn_completed").await;
    let mut all = first.clone();
    all.extend(before.iter().cloned());
    all.extend(after.iter().cloned());
    assert_eq!(
        seqs(&all),
        (1..=all.len() as u64).collect::<Vec<_>>(),
        "across the reconnect nothing is lost or doubled: {all:?}"
    );
    assert!(
        after
            .iter()
            .any(|(_, kind, _)| kind == "tool_call_completed"),
        "C followed the rest of A's turn live: {after:?}"
    );

    // The database holds exactly what the clients saw.
    let store = PostgresThreadStore::connect(&setup.url).await.unwrap();
    let stored = store.load_events(&thread_id, 0).await.unwrap();
    assert_eq!(
        stored.iter().map(|event| event.seq).collect::<Vec<_>>(),
        seqs(&all)
    );
}

#[tokio::test]
async fn a_killed_replica_is_taken_over_and_a_paused_one_writes_nothing_after_its_lease() {
    let Some(mut setup) = three_replicas().await else {
        return;
    };
    let store = PostgresThreadStore::connect(&setup.url).await.unwrap();
    let (a, rest) = setup.replicas.split_first_mut().unwrap();
    let (b, rest) = rest.split_first_mut().unwrap();
    let c = &mut rest[0];

    // --- kill -9 of the replica running a turn; C watches, B takes over.
    let thread = a.call("thread/start", json!({})).await.unwrap();
    let thread_id = thread["thread"]["threadId"].as_str().unwrap().to_string();
    c.call(
        "thread/resume",
        json!({"threadId": thread_id, "afterSeq": 0}),
    )
    .await
    .unwrap();
    setup
        .server
        .push(exec_reply("call-sleep", &sleeping_tree(&setup.root)));
    a.call(
        "turn/start",
        json!({"threadId": thread_id, "message": "sleep"}),
    )
    .await
    .unwrap();
    let orphans = tree_pids(&setup.root).await;
    let watched = c.events_until(&thread_id, "tool_call_started").await;
    send_signal(&a.child, libc::SIGKILL);
    let killed = Instant::now();
    a.child.wait().await.unwrap();

    setup.server.push(ChatStream::text_reply("Taken over."));
    let started = loop {
        match b
            .call(
                "turn/start",
                json!({"threadId": thread_id, "message": "carry on"}),
            )
            .await
        {
            Ok(started) => break started,
            Err(error) => {
                assert_eq!(
                    error["code"], -32002,
                    "only busy until the lease expires: {error}"
                );
                assert!(
                    killed.elapsed() < Duration::from_secs(TTL_SECS + 5),
                    "B never took the thread over: {error}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let failover = killed.elapsed();
    eprintln!("failover_s {:.3}", failover.as_secs_f64());
    assert!(
        failover <= Duration::from_secs(TTL_SECS + 2),
        "{failover:?}"
    );
    let b_turn = started["turnId"].as_str().unwrap().to_string();
    let rest = c.events_until(&thread_id, "turn_completed").await;
    let mut all = watched.clone();
    all.extend(rest.iter().cloned());
    assert_eq!(
        seqs(&all),
        (1..=all.len() as u64).collect::<Vec<_>>(),
        "C followed A's turn, its closing and B's turn, each event once: {all:?}"
    );
    let kinds: Vec<&str> = all.iter().map(|(_, kind, _)| kind.as_str()).collect();
    let failed = kinds.iter().position(|kind| *kind == "turn_failed");
    let b_start = all
        .iter()
        .position(|(_, kind, turn)| kind == "turn_started" && *turn == b_turn);
    assert!(
        matches!((failed, b_start), (Some(failed), Some(start)) if failed < start),
        "A's dead turn is closed before B's starts: {kinds:?}"
    );
    for (_, pid) in orphans {
        // SAFETY: ending the dead replica's orphaned tool processes.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }

    // --- SIGSTOP of the replica running a turn, past its lease expiry.
    let thread = b.call("thread/start", json!({})).await.unwrap();
    let paused_thread = thread["thread"]["threadId"].as_str().unwrap().to_string();
    setup
        .server
        .push(exec_reply("call-paused", "sleep 1; echo late"));
    let paused_turn = b
        .call(
            "turn/start",
            json!({"threadId": paused_thread, "message": "slow"}),
        )
        .await
        .unwrap()["turnId"]
        .as_str()
        .unwrap()
        .to_string();
    b.events_until(&paused_thread, "tool_call_started").await;
    send_signal(&b.child, libc::SIGSTOP);
    wait_for_lease_expiry(&store, &paused_thread).await.unwrap();
    setup.server.push(ChatStream::text_reply("Mine now."));
    let c_turn = c
        .call(
            "turn/start",
            json!({"threadId": paused_thread, "message": "take it"}),
        )
        .await
        .unwrap_or_else(|error| panic!("C could not take the paused replica's thread: {error}"))
        ["turnId"]
        .as_str()
        .unwrap()
        .to_string();
    c.call(
        "thread/resume",
        json!({"threadId": paused_thread, "afterSeq": 0}),
    )
    .await
    .unwrap();
    let c_events = c.events_until(&paused_thread, "turn_completed").await;
    assert_eq!(c_events.last().unwrap().2, c_turn, "{c_events:?}");
    // B wakes up: its tool finished long ago and its lease is gone.
    send_signal(&b.child, libc::SIGCONT);
    tokio::time::sleep(Duration::from_secs(TTL_SECS + 1)).await;
    assert!(
        b.child.try_wait().unwrap().is_none(),
        "the paused replica keeps serving"
    );
    b.call("thread/read", json!({"threadId": paused_thread}))
        .await
        .unwrap();
    let stored = store.load_events(&paused_thread, 0).await.unwrap();
    let stored_seqs: Vec<u64> = stored.iter().map(|event| event.seq).collect();
    assert_eq!(
        stored_seqs,
        (1..=stored.len() as u64).collect::<Vec<_>>(),
        "each seq once, no gap"
    );
    let c_start = stored
        .iter()
        .position(|event| event.turn_id.as_deref() == Some(c_turn.as_str()))
        .unwrap();
    let kinds: Vec<String> = stored
        .iter()
        .map(|event| {
            serde_json::to_value(&event.event).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    for (index, event) in stored.iter().enumerate().skip(c_start) {
        assert_ne!(
            event.turn_id.as_deref(),
            Some(paused_turn.as_str()),
            "the paused replica wrote after the takeover: {kinds:?}"
        );
        assert_ne!(kinds[index], "tool_call_completed", "{kinds:?}");
    }
    assert_eq!(
        kinds
            .iter()
            .filter(|kind| *kind == "turn_completed")
            .count(),
        1,
        "only C's turn completed: {kinds:?}"
    );
    assert_eq!(
        stored.len(),
        c_events.len(),
        "C's follower saw every stored event once"
    );
}
