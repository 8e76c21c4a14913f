//! The PostgreSQL server under a replica set restarts in the middle of a
//! turn. Three `roder app-server` replicas (real processes, one home each)
//! share one throwaway cluster: A runs the turn, B and C follow the thread
//! from the store (LISTEN/NOTIFY). The server goes down while A's tool is
//! running, so the append that records the tool's result meets it down,
//! and comes back seconds later. The turn completes; A, B and C each saw
//! every event once, in order; the database holds exactly that.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use roder_api::thread::ThreadStore;
use roder_ext_postgres_thread_store::PostgresThreadStore;
use roder_ext_postgres_thread_store::test_support::TestCluster;
use roder_testkit::fake_models::{ChatStream, FakeModelServer};
use serde_json::json;
use support::replica::Replica;
use support::*;

/// The writer lease outlives the outage, as a default-configured one
/// (30 s) does: the appends ride it out instead of failing the turn.
const TTL_SECS: u64 = 30;
/// How long the server stays down: the outage the issue saw fail a turn
/// with "pool timed out", longer than the tool (so the result's append
/// meets the server down) and than a lease renewal's interval (ttl / 3).
const OUTAGE: Duration = Duration::from_secs(12);

fn write_home(home: &Path, server: &FakeModelServer, url: &str) {
    write_config(home, server, None);
    let config = std::fs::read_to_string(home.join("config.toml")).unwrap();
    let top = format!("writer_lease_ttl_secs = {TTL_SECS}\nstore = \"{url}\"\n");
    std::fs::write(home.join("config.toml"), format!("{top}{config}")).unwrap();
}

fn exec_reply(call_id: &str, cmd: &str) -> roder_testkit::fake_models::FakeStream {
    let arguments = json!({ "cmd": cmd }).to_string();
    ChatStream::tool_calls_reply(&[(call_id, "exec_command", &arguments)])
}

fn seqs(events: &[(u64, String, String)]) -> Vec<u64> {
    events.iter().map(|(seq, _, _)| *seq).collect()
}

fn kinds(events: &[(u64, String, String)]) -> Vec<&str> {
    events.iter().map(|(_, kind, _)| kind.as_str()).collect()
}

#[tokio::test]
async fn a_postgres_restart_mid_turn_loses_and_doubles_nothing_on_any_replica() {
    let Some(mut cluster) = TestCluster::start_or_skip().await.unwrap() else {
        return;
    };
    let url = cluster.url();
    let server = FakeModelServer::start().await.unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(workspace.path()).unwrap();
    let mut homes = Vec::new();
    let mut replicas = Vec::new();
    for _ in 0..3 {
        let home = tempfile::tempdir().unwrap();
        write_home(home.path(), &server, &url);
        replicas.push(Replica::start(home.path(), &root, &[]).await);
        homes.push(home);
    }
    let [a, b, c] = &mut replicas[..] else {
        unreachable!("three replicas")
    };

    // A creates the thread (thread/start subscribes it from the first
    // event); B and C follow it from the store.
    let thread = a.call("thread/start", json!({})).await.unwrap();
    let thread_id = thread["thread"]["threadId"].as_str().unwrap().to_string();
    for follower in [&mut *b, &mut *c] {
        follower
            .call(
                "thread/resume",
                json!({"threadId": thread_id, "afterSeq": 0}),
            )
            .await
            .unwrap();
    }

    server.push(exec_reply("call-down", "sleep 1; echo while-down"));
    server.push(exec_reply("call-up", "echo after-restart"));
    server.push(ChatStream::text_reply("Done despite the restart."));
    let turn = a
        .call(
            "turn/start",
            json!({"threadId": thread_id, "message": "work through it"}),
        )
        .await
        .unwrap();
    let turn_id = turn["turnId"].as_str().unwrap().to_string();

    // The first tool is running (B saw it start): the server goes down.
    let mut b_seen = b.events_until(&thread_id, "tool_call_started").await;
    cluster.shut_down().await.unwrap();
    let down = Instant::now();
    tokio::time::sleep(OUTAGE).await;
    cluster.start_again().await.unwrap();
    assert!(
        cluster.log().contains("database system was shut down at"),
        "the server restarted on its data:\n{}",
        cluster.log()
    );

    b_seen.extend(b.events_until(&thread_id, "turn_completed").await);
    let a_seen = a.events_until(&thread_id, "turn_completed").await;
    let c_seen = c.events_until(&thread_id, "turn_completed").await;
    eprintln!(
        "turn completed {:.1} s after the server went down",
        down.elapsed().as_secs_f64()
    );

    for (name, seen) in [("A", &a_seen), ("B", &b_seen), ("C", &c_seen)] {
        assert_eq!(
            seqs(seen),
            (1..=seen.len() as u64).collect::<Vec<_>>(),
            "{name} saw every event once, in order: {seen:?}"
        );
        assert_eq!(
            seen.last().map(|(_, _, turn)| turn.as_str()),
            Some(turn_id.as_str()),
            "{name}: {seen:?}"
        );
    }
    assert_eq!(a_seen, b_seen, "A and B saw the same events");
    assert_eq!(a_seen, c_seen, "A and C saw the same events");
    let kinds = kinds(&a_seen);
    assert_eq!(
        kinds
            .iter()
            .filter(|kind| **kind == "tool_call_completed")
            .count(),
        2,
        "both tools ran and were recorded, once each: {kinds:?}"
    );
    assert!(
        !kinds.contains(&"turn_failed"),
        "the turn rode out the restart: {kinds:?}"
    );

    // The database holds exactly what the replicas saw.
    let store = PostgresThreadStore::connect(&url).await.unwrap();
    let stored = store.load_events(&thread_id, 0).await.unwrap();
    assert_eq!(
        stored.iter().map(|event| event.seq).collect::<Vec<_>>(),
        seqs(&a_seen)
    );
    let results: Vec<String> = stored
        .iter()
        .filter_map(|event| {
            let value = serde_json::to_value(&event.event).unwrap();
            (value["type"] == "tool_call_completed").then(|| value.to_string())
        })
        .collect();
    assert!(
        results[0].contains("while-down") && results[1].contains("after-restart"),
        "{results:?}"
    );

    // The thread goes on: a next turn on A, followed by B and C.
    server.push(ChatStream::text_reply("Next."));
    a.call(
        "turn/start",
        json!({"threadId": thread_id, "message": "next"}),
    )
    .await
    .unwrap();
    let next: Vec<_> = [a, b, c]
        .into_iter()
        .map(|replica| replica.events_until(&thread_id, "turn_completed"))
        .collect();
    let next = futures::future::join_all(next).await;
    for seen in &next {
        assert_eq!(
            seen.first().map(|(seq, _, _)| *seq),
            Some(a_seen.len() as u64 + 1)
        );
        assert_eq!(seen, &next[0]);
    }
}
