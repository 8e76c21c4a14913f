//! Thread listing, reading, paging and archiving through the protocol.

mod support;

use roder_testkit::final_round;
use serde_json::json;
use support::{Harness, event_type, is_transient_type};

#[tokio::test]
async fn thread_list_pages_without_repeats_and_hides_archived() {
    let harness = Harness::new(vec![final_round("ok")]);
    let mut client = harness.ws_client().await;
    client.initialize().await;
    let mut created = Vec::new();
    for index in 0..7 {
        let thread = client
            .call("thread/start", json!({"title": format!("thread {index}")}))
            .await;
        created.push(thread["thread"]["threadId"].as_str().unwrap().to_string());
    }
    let archived = client
        .call("thread/archive", json!({"threadId": created[0]}))
        .await;
    assert_eq!(archived["thread"]["archived"], true);

    let mut seen = Vec::new();
    let mut cursor = serde_json::Value::Null;
    loop {
        let page = client
            .call("thread/list", json!({"limit": 3, "cursor": cursor}))
            .await;
        let threads = page["threads"].as_array().unwrap();
        assert!(threads.len() <= 3);
        seen.extend(
            threads
                .iter()
                .map(|t| t["threadId"].as_str().unwrap().to_string()),
        );
        cursor = page["nextCursor"].clone();
        if cursor.is_null() {
            break;
        }
    }
    let mut expected: Vec<String> = created[1..].to_vec();
    expected.sort();
    let mut got = seen.clone();
    got.sort();
    assert_eq!(got, expected, "every unarchived thread exactly once");

    let all = client
        .call(
            "thread/list",
            json!({"includeArchived": true, "limit": 500}),
        )
        .await;
    assert_eq!(all["threads"].as_array().unwrap().len(), 7);
    assert!(all["nextCursor"].is_null());

    let bad = client
        .call_err("thread/list", json!({"cursor": "not-a-cursor"}))
        .await;
    assert_eq!(bad["data"]["field"], "cursor");
    let too_many = client.call_err("thread/list", json!({"limit": 501})).await;
    assert_eq!(too_many["data"]["field"], "limit");
}

#[tokio::test]
async fn events_page_by_cursor_and_resume_replays_the_log() {
    let harness = Harness::new(vec![final_round("hello there")]);
    let mut client = harness.stdio_client();
    client.initialize().await;
    let thread_id = client.call("thread/start", json!({})).await["thread"]["threadId"]
        .as_str()
        .unwrap()
        .to_string();
    client
        .call(
            "turn/start",
            json!({"threadId": thread_id, "message": "hi"}),
        )
        .await;
    let mut pushed = client.events_until(&thread_id, "turn_completed").await;
    // Streamed deltas are live only; the log (and a replay) has the rest.
    assert!(pushed.iter().any(|n| is_transient_type(event_type(n))));
    pushed.retain(|n| !is_transient_type(event_type(n)));

    let first = client
        .call("thread/events", json!({"threadId": thread_id, "limit": 2}))
        .await;
    assert_eq!(first["events"].as_array().unwrap().len(), 2);
    assert_eq!(first["nextCursor"], 2);
    assert_eq!(first["hasMore"], true);
    let end = pushed.len() as u64;
    let last = client
        .call(
            "thread/events",
            json!({"threadId": thread_id, "cursor": end}),
        )
        .await;
    assert_eq!(
        last,
        json!({"events": [], "nextCursor": end, "hasMore": false})
    );

    // The history in opaque pages, bounded by events and by bytes, reads
    // back exactly the log.
    let mut paged = Vec::new();
    let mut cursor = serde_json::Value::Null;
    loop {
        let page = client
            .call(
                "thread/history",
                json!({"threadId": thread_id, "cursor": cursor, "limit": 3, "maxBytes": 600}),
            )
            .await;
        let events = page["events"].as_array().unwrap().clone();
        assert!(!events.is_empty() && events.len() <= 3, "{page}");
        paged.extend(events);
        cursor = page["nextCursor"].clone();
        if cursor.is_null() {
            break;
        }
    }
    let logged = client
        .call("thread/events", json!({"threadId": thread_id}))
        .await;
    assert_eq!(&paged, logged["events"].as_array().unwrap());
    assert_eq!(paged.len() as u64, end);
    let foreign = client
        .call_err(
            "thread/history",
            json!({"threadId": thread_id, "cursor": "42"}),
        )
        .await;
    assert_eq!(foreign["code"], -32602, "{foreign}");
    let huge = client
        .call_err(
            "thread/history",
            json!({"threadId": thread_id, "maxBytes": 0}),
        )
        .await;
    assert_eq!(huge["code"], -32602, "{huge}");

    // A second connection replays everything on resume, then the answer.
    let mut other = harness.ws_client().await;
    other.initialize().await;
    let resumed = other
        .call("thread/resume", json!({"threadId": thread_id}))
        .await;
    assert_eq!(resumed["lastSeq"], end);
    assert_eq!(resumed["thread"]["threadId"], thread_id.as_str());
    let replayed = other.take_kept();
    assert_eq!(replayed, pushed);
}
