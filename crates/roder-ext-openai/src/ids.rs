//! Ids for tool calls whose server sent none (some OpenAI-compatible
//! servers omit them). They must be unique across a thread's history, which
//! outlives this process, so they mix the clock with a counter.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static NEXT: AtomicU64 = AtomicU64::new(0);

pub(crate) fn synthesized_call_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or_default();
    format!("call_{nanos:x}_{}", NEXT.fetch_add(1, Ordering::Relaxed))
}
