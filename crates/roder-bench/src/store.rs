//! `store`: the JSONL thread store. Append throughput of single events, and
//! the load time of a 10,000-event thread. A baseline of reading the same
//! file's bytes is reported alongside, for scale.

use std::time::Instant;

use roder_api::events::{EventEnvelope, RoderEvent, ToolCallCompleted};
use roder_api::thread::{ThreadMetadata, ThreadStore};
use roder_ext_jsonl_thread_store::store::JsonlThreadStore;
use serde_json::json;
use time::OffsetDateTime;

use crate::figure::{median, print, sized};

fn event_count() -> u64 {
    sized(10_000, 200)
}

fn event(thread_id: &str, seq: u64) -> EventEnvelope {
    EventEnvelope {
        seq,
        timestamp: OffsetDateTime::now_utc(),
        thread_id: thread_id.to_string(),
        turn_id: Some("turn-1".to_string()),
        event: RoderEvent::ToolCallCompleted(ToolCallCompleted {
            thread_id: thread_id.to_string(),
            turn_id: "turn-1".to_string(),
            call_id: format!("call-{seq}"),
            tool_name: Some("exec_command".to_string()),
            output: Some(format!(
                "Exit code: 0\nStatus: completed\nWall time: 0.002 seconds\nOutput:\nline {seq} of output from a command that printed something moderately long\n"
            )),
            is_error: false,
            data: json!({ "exit_code": 0 }),
            duration_ms: 2,
        }),
    }
}

pub async fn run() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = JsonlThreadStore {
        base_path: dir.path().to_path_buf(),
    };
    let thread_id = "bench-thread";
    let now = OffsetDateTime::now_utc();
    store
        .create_thread(ThreadMetadata {
            thread_id: thread_id.to_string(),
            title: None,
            workspace: "/tmp".to_string(),
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
            created_at: now,
            updated_at: now,
        })
        .await?;

    let started = Instant::now();
    for seq in 1..=event_count() {
        store
            .append_events(thread_id, &[event(thread_id, seq)])
            .await?;
    }
    let append_s = started.elapsed().as_secs_f64();
    print(
        "store",
        "append_events_per_s",
        event_count() as f64 / append_s,
        "events/s",
        json!({ "events": event_count(), "one_event_per_append": true }),
    );

    let log = dir.path().join(thread_id).join("events.jsonl");
    let bytes = tokio::fs::metadata(&log).await?.len();
    let mut loads = Vec::new();
    let mut raw_reads = Vec::new();
    for _ in 0..7 {
        let started = Instant::now();
        let raw = tokio::fs::read(&log).await?;
        raw_reads.push(started.elapsed().as_secs_f64() * 1000.0);
        anyhow::ensure!(raw.len() as u64 == bytes);
        let started = Instant::now();
        let events = store.load_events(thread_id, 0).await?;
        loads.push(started.elapsed().as_secs_f64() * 1000.0);
        anyhow::ensure!(
            events.len() as u64 == event_count(),
            "loaded {} events",
            events.len()
        );
    }
    print(
        "store",
        "load_10k_events_ms",
        median(&mut loads),
        "ms",
        json!({ "events": event_count(), "file_bytes": bytes, "raw_read_ms": median(&mut raw_reads) }),
    );
    crate::store_durability::run().await
}
