//! A server given a `ThreadFollowSource` (as each of many replicas on one
//! store is) merges what the source follows with the runtime's own events:
//! here the source re-reads the same JSONL log the runtime writes, so every
//! persisted event arrives twice at the connection's forwarder, and the
//! client must still get each seq once, in order, with the transient
//! deltas of the local bus kept.

mod support;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use roder_app_server::{FollowStream, WsServerConfig, bind_ws_following};
use roder_core::Runtime;
use roder_testkit::{final_round, tool_round};
use serde_json::json;
use support::{Client, Harness, assert_contiguous, event_type, is_transient_type, seq};

/// Follows a thread by polling the runtime's log every 5 ms.
fn polling_source(runtime: Arc<Runtime>) -> roder_app_server::SharedFollowSource {
    polling_source_every(runtime, Duration::from_millis(5))
}

/// Follows a thread by polling the runtime's log, `pause` after each read
/// that found nothing new.
fn polling_source_every(
    runtime: Arc<Runtime>,
    pause: Duration,
) -> roder_app_server::SharedFollowSource {
    Arc::new(move |thread_id: &str, after_seq: u64| -> FollowStream {
        let runtime = runtime.clone();
        let thread_id = thread_id.to_string();
        Box::pin(futures::stream::unfold(
            (after_seq, VecDeque::new()),
            move |(mut cursor, mut buffered)| {
                let runtime = runtime.clone();
                let thread_id = thread_id.clone();
                async move {
                    loop {
                        if let Some(envelope) = buffered.pop_front() {
                            let envelope: roder_api::events::EventEnvelope = envelope;
                            cursor = envelope.seq;
                            return Some((Ok(envelope), (cursor, buffered)));
                        }
                        match runtime.read_thread_events(&thread_id, cursor).await {
                            Ok(page) if !page.events.is_empty() => buffered.extend(page.events),
                            Ok(_) => tokio::time::sleep(pause).await,
                            Err(error) => return Some((Err(error), (cursor, buffered))),
                        }
                    }
                }
            },
        ))
    })
}

#[tokio::test]
async fn events_from_the_follow_source_and_the_local_bus_arrive_once_each() {
    let harness = Harness::new(vec![
        tool_round(&[("call-1", "write_file", r#"{"path":"a.txt","content":"a"}"#)]),
        tool_round(&[("call-2", "read_file", r#"{"path":"a.txt"}"#)]),
        final_round("a.txt says a"),
    ]);
    let server = bind_ws_following(
        harness.runtime.clone(),
        WsServerConfig::default(),
        Some(polling_source(harness.runtime.clone())),
    )
    .await
    .unwrap();
    let addr = server.local_addr();
    tokio::spawn(server.serve());
    let mut client = Client::ws(addr, None).await.unwrap();
    client.initialize().await;
    let started = client
        .call(
            "thread/start",
            json!({"workspace": harness.workspace_path()}),
        )
        .await;
    let thread_id = started["thread"]["threadId"].as_str().unwrap().to_string();
    client
        .call(
            "turn/start",
            json!({"threadId": thread_id, "message": "go"}),
        )
        .await;
    let notifications = client.events_until(&thread_id, "turn_completed").await;
    let persisted: Vec<u64> = notifications
        .iter()
        .filter(|n| !is_transient_type(event_type(n)))
        .map(seq)
        .collect();
    assert_contiguous(&persisted);
    assert!(
        notifications
            .iter()
            .any(|n| is_transient_type(event_type(n))),
        "the local bus's deltas still arrive"
    );
    // Nothing more arrives after the end, although the source re-reads.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let log = client.read_events(&thread_id, 0, 1000).await;
    assert_eq!(log.len(), persisted.len());
    let resumed = client
        .call(
            "thread/resume",
            json!({"threadId": thread_id, "afterSeq": 2}),
        )
        .await;
    assert_eq!(resumed["lastSeq"], persisted.len() as u64);
    let kept = client.take_kept();
    let replayed: Vec<u64> = kept
        .iter()
        .filter(|n| n["method"] == "thread/event")
        .map(seq)
        .collect();
    assert_eq!(
        replayed,
        (3..=persisted.len() as u64).collect::<Vec<_>>(),
        "no late copy from the source before or among the replay"
    );
}

/// A second runtime on the same store: another process writing the thread.
fn other_writer(harness: &Harness, answer: &str) -> Arc<Runtime> {
    let mut builder = roder_api::extension::ExtensionRegistryBuilder::new();
    builder.inference_engine(roder_testkit::ScriptedEngine::new(vec![final_round(
        answer,
    )]));
    builder.thread_store_factory(Arc::new(
        roder_ext_jsonl_thread_store::store::JsonlThreadStoreFactory {
            base_path: harness.store_dir.path().to_path_buf(),
        },
    ));
    let config = roder_core::RuntimeConfig {
        workspace: Some(harness.workspace_path()),
        ..roder_core::RuntimeConfig::default()
    };
    Arc::new(Runtime::new(builder.build().unwrap(), config).unwrap())
}

#[tokio::test]
async fn a_turn_after_another_writers_keeps_the_other_writers_events() {
    // The follower is slow (1 s between polls) and the local bus fast: this
    // server's own turn starts right after the other writer's ends, so its
    // events arrive before the follower brought the other writer's. They
    // must wait for them, not overtake them (and get them dropped).
    let harness = Harness::new(vec![final_round("mine")]);
    let server = bind_ws_following(
        harness.runtime.clone(),
        WsServerConfig::default(),
        Some(polling_source_every(
            harness.runtime.clone(),
            Duration::from_secs(1),
        )),
    )
    .await
    .unwrap();
    let addr = server.local_addr();
    tokio::spawn(server.serve());
    let mut client = Client::ws(addr, None).await.unwrap();
    client.initialize().await;
    let started = client
        .call(
            "thread/start",
            json!({"workspace": harness.workspace_path()}),
        )
        .await;
    let thread_id = started["thread"]["threadId"].as_str().unwrap().to_string();

    let other = other_writer(&harness, "theirs");
    let mut bus = other.subscribe_events();
    let mut request = roder_core::StartTurnRequest::new(&thread_id, "theirs");
    request.workspace = harness.workspace_path();
    other.start_turn(request).await.unwrap();
    support::wait_on_bus(&mut bus, &thread_id, |event| event.is_terminal()).await;
    client
        .call(
            "turn/start",
            json!({"threadId": thread_id, "message": "mine"}),
        )
        .await;

    let mut notifications = client.events_until(&thread_id, "turn_completed").await;
    notifications.extend(client.events_until(&thread_id, "turn_completed").await);
    let persisted: Vec<u64> = notifications
        .iter()
        .filter(|n| !is_transient_type(event_type(n)))
        .map(seq)
        .collect();
    assert_contiguous(&persisted);
    let log = client.read_events(&thread_id, 0, 1000).await;
    assert_eq!(log.len(), persisted.len(), "both turns, every event");
}
