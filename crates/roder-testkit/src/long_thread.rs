//! A long thread written straight into a store, for what must stay fast
//! however long a thread grows (the web page opening a 10,000-event thread,
//! paging its history). Writing through the store contract is seconds
//! faster than running thousands of turns, and the log is the same shape
//! a real one has: numbered events, turns that start, talk, call a tool and
//! complete.

use roder_api::events::EventEnvelope;
use roder_api::thread::{ThreadMetadata, ThreadStore};
use serde_json::json;

/// Events per turn [`write_long_thread`] writes.
pub const EVENTS_PER_TURN: u64 = 8;

/// Creates thread `thread_id` in `store` with `turns` turns of
/// [`EVENTS_PER_TURN`] events each (after its `thread_created`): turn `n`
/// (from 1) says `question n`, calls `read_file` on `file-n.txt` (output
/// `contents of file n`), answers `answer n`. Returns the last seq.
///
/// ```no_run
/// # async fn example(store: &dyn roder_api::thread::ThreadStore) -> anyhow::Result<()> {
/// let last = roder_testkit::long_thread::write_long_thread(store, "t-long", "/w", 1250).await?;
/// assert_eq!(last, 1 + 1250 * roder_testkit::long_thread::EVENTS_PER_TURN);
/// # Ok(()) }
/// ```
pub async fn write_long_thread(
    store: &dyn ThreadStore,
    thread_id: &str,
    workspace: &str,
    turns: u64,
) -> anyhow::Result<u64> {
    let now = time::OffsetDateTime::now_utc();
    let stamp = now
        .format(&time::format_description::well_known::Rfc3339)
        .map_err(anyhow::Error::new)?;
    let metadata: ThreadMetadata = serde_json::from_value(json!({
        "thread_id": thread_id,
        "title": "a long thread",
        "workspace": workspace,
        "provider": "fake",
        "model": "m",
        "created_at": stamp,
        "updated_at": stamp,
    }))?;
    store.create_thread(metadata).await?;
    let mut seq = 0u64;
    let mut batch = Vec::new();
    let mut push =
        |batch: &mut Vec<EventEnvelope>, turn_id: Option<&str>, event: serde_json::Value| {
            seq += 1;
            let envelope = json!({
                "seq": seq,
                "timestamp": stamp,
                "thread_id": thread_id,
                "turn_id": turn_id,
                "event": event,
            });
            serde_json::from_value::<EventEnvelope>(envelope).map(|envelope| batch.push(envelope))
        };
    push(
        &mut batch,
        None,
        json!({"type": "thread_created", "thread_id": thread_id, "workspace": workspace, "runner_provider_id": null}),
    )?;
    let usage = json!({"input_tokens": 10, "output_tokens": 5, "cached_input_tokens": 0, "reasoning_tokens": 0});
    for turn in 1..=turns {
        let turn_id = format!("turn-{turn}");
        let t = Some(turn_id.as_str());
        let call_id = format!("call-{turn}");
        let arguments = json!({"path": format!("file-{turn}.txt")}).to_string();
        let base = json!({"thread_id": thread_id, "turn_id": turn_id});
        let with = |mut fields: serde_json::Value| {
            if let (Some(fields), Some(base)) = (fields.as_object_mut(), base.as_object()) {
                for (key, value) in base {
                    fields.insert(key.clone(), value.clone());
                }
            }
            fields
        };
        let item = |item: serde_json::Value| {
            with(json!({"type": "transcript_item_appended", "item": item}))
        };
        push(
            &mut batch,
            t,
            with(
                json!({"type": "turn_started", "message": format!("question {turn}"), "provider": "fake", "model": "m"}),
            ),
        )?;
        push(
            &mut batch,
            t,
            item(json!({"type": "user_message", "text": format!("question {turn}")})),
        )?;
        push(
            &mut batch,
            t,
            with(json!({"type": "inference_started", "round": 1})),
        )?;
        push(
            &mut batch,
            t,
            with(
                json!({"type": "tool_call_requested", "call_id": call_id, "tool_name": "read_file", "arguments": arguments}),
            ),
        )?;
        push(
            &mut batch,
            t,
            with(
                json!({"type": "tool_call_started", "call_id": call_id, "tool_name": "read_file"}),
            ),
        )?;
        push(
            &mut batch,
            t,
            with(
                json!({"type": "tool_call_completed", "call_id": call_id, "tool_name": "read_file", "output": format!("contents of file {turn}"), "is_error": false, "data": {}, "duration_ms": 3}),
            ),
        )?;
        push(
            &mut batch,
            t,
            item(json!({"type": "assistant_message", "text": format!("answer {turn}")})),
        )?;
        push(
            &mut batch,
            t,
            with(
                json!({"type": "turn_completed", "final_message": format!("answer {turn}"), "usage": usage, "thread_usage": usage}),
            ),
        )?;
        if batch.len() >= 2000 {
            store.append_events(thread_id, &batch).await?;
            batch.clear();
        }
    }
    store.append_events(thread_id, &batch).await?;
    Ok(seq)
}
