//! Two `roder app-server` replicas on one PostgreSQL (a throwaway cluster),
//! through the real binary: a turn started through one makes the thread
//! busy for the other; after `kill -9` of the first, the second takes the
//! thread over once the lease expires on the database's clock, closes the
//! dead turn and runs its own. A third process (this test) follows the
//! thread live from the store the whole time.

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

/// Lease ttl of both replicas: a dead replica's thread is free this soon.
const TTL_SECS: u64 = 2;

fn write_home(home: &Path, server: &FakeModelServer, store: Option<&str>) {
    write_config(home, server, None);
    let mut config = std::fs::read_to_string(home.join("config.toml")).unwrap();
    let mut top = format!("writer_lease_ttl_secs = {TTL_SECS}\n");
    if let Some(store) = store {
        top.push_str(&format!("store = \"{store}\"\n"));
    }
    config.insert_str(0, &top);
    std::fs::write(home.join("config.toml"), config).unwrap();
}

#[tokio::test]
async fn a_replica_takes_over_a_thread_after_its_holder_is_killed() {
    let Some(cluster) = TestCluster::start_or_skip().await.unwrap() else {
        return;
    };
    let url = cluster.url();
    let server = FakeModelServer::start().await.unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(workspace.path()).unwrap();
    // Two hosts: two homes, no shared files; one database.
    let (home_a, home_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_home(home_a.path(), &server, None);
    write_home(home_b.path(), &server, Some(&url));

    // Replica A selects the store by flag, B by config.toml.
    let mut a = Replica::start(home_a.path(), &root, &["--store", &url]).await;
    let mut b = Replica::start(home_b.path(), &root, &[]).await;
    let a_pid = a.child.id().unwrap();

    let thread = a.call("thread/start", json!({})).await.unwrap();
    let thread_id = thread["thread"]["threadId"].as_str().unwrap().to_string();
    let store = PostgresThreadStore::connect(&url).await.unwrap();
    let mut follower = store.follow(&thread_id, 0).await.unwrap();

    let arguments = json!({ "cmd": sleeping_tree(&root) }).to_string();
    server.push(ChatStream::tool_calls_reply(&[(
        "call-sleep",
        "exec_command",
        &arguments,
    )]));
    a.call(
        "turn/start",
        json!({"threadId": thread_id, "message": "sleep a while"}),
    )
    .await
    .unwrap();
    let pids = tree_pids(&root).await; // A's turn is running its tool
    let requests_before = server.model_requests().len();

    // B sees the thread (it is in the database) but cannot write it.
    let listed = b.call("thread/list", json!({})).await.unwrap();
    assert!(listed.to_string().contains(&thread_id), "{listed}");
    let busy = b
        .call(
            "turn/start",
            json!({"threadId": thread_id, "message": "me too"}),
        )
        .await
        .unwrap_err();
    let message = busy["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("is busy: another process is writing it")
            && message.contains(&format!("pid {a_pid}")),
        "B's refusal names A (pid {a_pid}): {busy}"
    );
    // The same busy code as a turn running on this replica.
    assert_eq!(busy["code"], -32002, "{busy}");
    assert_eq!(busy["data"]["holder"]["pid"], a_pid, "{busy}");
    assert_eq!(server.model_requests().len(), requests_before);

    // A dies mid-turn, without a word.
    send_signal(&a.child, libc::SIGKILL);
    let killed = Instant::now();
    a.child.wait().await.unwrap();
    let still_busy = b
        .call(
            "turn/start",
            json!({"threadId": thread_id, "message": "me too"}),
        )
        .await
        .unwrap_err();
    assert!(
        still_busy.to_string().contains("is busy"),
        "the lease outlives its holder until it expires: {still_busy}"
    );

    // Wait on the database's clock for the lease's expiry, then take over.
    let status = store
        .writer_lease_status(&thread_id)
        .await
        .unwrap()
        .unwrap();
    let left = status.expires_in.expect("A's lease is still live");
    assert!(left <= Duration::from_secs(TTL_SECS), "{status:?}");
    assert_eq!(status.holder.map(|holder| holder.pid), Some(a_pid));
    wait_for_lease_expiry(&store, &thread_id).await.unwrap();
    server.push(ChatStream::text_reply("Taken over."));
    let started = b
        .call(
            "turn/start",
            json!({"threadId": thread_id, "message": "carry on"}),
        )
        .await
        .unwrap_or_else(|error| panic!("B could not take the thread over: {error}"));
    let failover = killed.elapsed();
    eprintln!("failover_s {:.3}", failover.as_secs_f64());
    assert!(failover < Duration::from_secs(TTL_SECS + 5), "{failover:?}");
    let b_turn = started["turnId"]
        .as_str()
        .or_else(|| started["turn"]["turnId"].as_str())
        .map(str::to_string);

    // The follower sees everything once, in order: A's turn, its closing
    // by B, B's turn to its end.
    let mut seen = Vec::new();
    loop {
        let envelope = tokio::time::timeout(Duration::from_secs(30), follower.next())
            .await
            .expect("the thread's log stopped growing")
            .unwrap();
        let kind = serde_json::to_value(&envelope.event).unwrap()["type"]
            .as_str()
            .unwrap()
            .to_string();
        let done = kind == "turn_completed";
        seen.push((envelope.seq, kind, envelope.turn_id.clone()));
        if done {
            break;
        }
    }
    let seqs: Vec<u64> = seen.iter().map(|(seq, _, _)| *seq).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "{seen:?}"
    );
    let kinds: Vec<&str> = seen.iter().map(|(_, kind, _)| kind.as_str()).collect();
    let failed = kinds.iter().position(|kind| *kind == "turn_failed");
    let second_start = kinds.iter().rposition(|kind| *kind == "turn_started");
    assert!(
        matches!((failed, second_start), (Some(failed), Some(start)) if failed < start),
        "B closed A's dead turn before its own: {kinds:?}"
    );
    if let Some(b_turn) = b_turn {
        assert_eq!(seen.last().unwrap().2.as_deref(), Some(b_turn.as_str()));
    }
    // Nothing in the database beyond what the follower saw.
    let stored = store.load_events(&thread_id, 0).await.unwrap();
    assert_eq!(stored.len(), seen.len());

    for (_, pid) in pids {
        // SAFETY: ending the dead replica's orphaned tool processes.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
    drop(b);
}

#[tokio::test]
async fn an_unreachable_store_fails_start_up_without_showing_the_password() {
    let server = FakeModelServer::start().await.unwrap();
    let (home, workspace) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_home(home.path(), &server, None);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://roder:hunter2@127.0.0.1:{port}/roder");
    let started = roder(
        home.path(),
        workspace.path(),
        &["app-server", "--store", &url],
    )
    .await;
    assert_eq!(started.code, Some(1), "{}", started.stderr);
    assert!(
        started.stderr.contains(&format!(
            "cannot connect to Postgres at postgres://roder:***@127.0.0.1:{port}/roder"
        )) && !started.stderr.contains("hunter2"),
        "{}",
        started.stderr
    );

    let bad = roder(
        home.path(),
        workspace.path(),
        &["app-server", "--store", "mysql://root:pw@db/x"],
    )
    .await;
    assert_ne!(bad.code, Some(0));
    assert!(
        bad.stderr.contains("unknown thread store") && !bad.stderr.contains("pw@"),
        "{}",
        bad.stderr
    );

    // Commands that read the JSONL files refuse a Postgres store.
    write_home(home.path(), &server, Some(&url));
    let listed = roder(home.path(), workspace.path(), &["threads", "list"]).await;
    assert_ne!(listed.code, Some(0));
    assert!(
        listed.stderr.contains("is not supported") && !listed.stderr.contains("hunter2"),
        "{}",
        listed.stderr
    );
    let shown = roder(home.path(), workspace.path(), &["config", "show"]).await;
    assert!(
        shown.stdout.contains(&format!(
            "store = \"postgres://roder:***@127.0.0.1:{port}/roder\""
        )) && !shown.stdout.contains("hunter2"),
        "{}",
        shown.stdout
    );
}
