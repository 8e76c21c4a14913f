//! Signed thinking blocks, remembered so they can be sent back.
//!
//! With extended thinking on, the API requires the thinking blocks of the
//! assistant turn that made tool calls to come back, unmodified and with
//! their signatures, when the tool results are sent. The transcript keeps
//! only reasoning *text* (`TranscriptItem::Reasoning`), so the engine
//! remembers the signed blocks of its recent responses, keyed by exactly
//! the reasoning text it streamed for them (which is what the runtime
//! records). A thread resumed by another process misses this cache; the
//! request then goes without thinking (see `request.rs`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;

/// Responses remembered; an agent loop needs only the latest few.
const CAPACITY: usize = 64;

/// (reasoning text, signed blocks), oldest first.
type Entries = VecDeque<(String, Vec<Value>)>;

#[derive(Debug, Clone, Default)]
pub(crate) struct ThinkingCache {
    entries: Arc<Mutex<Entries>>,
}

impl ThinkingCache {
    fn lock(&self) -> MutexGuard<'_, Entries> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn insert(&self, reasoning: String, blocks: Vec<Value>) {
        if reasoning.is_empty() || blocks.is_empty() {
            return;
        }
        let mut entries = self.lock();
        entries.retain(|(key, _)| *key != reasoning);
        if entries.len() >= CAPACITY {
            entries.pop_front();
        }
        entries.push_back((reasoning, blocks));
    }

    pub fn get(&self, reasoning: &str) -> Option<Vec<Value>> {
        self.lock()
            .iter()
            .rev()
            .find(|(key, _)| key == reasoning)
            .map(|(_, blocks)| blocks.clone())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn remembers_recent_blocks_by_text() {
        let cache = ThinkingCache::default();
        cache.insert("a".into(), vec![json!({"type": "thinking"})]);
        cache.insert(String::new(), vec![json!({})]);
        assert!(cache.get("a").is_some());
        assert!(cache.get("").is_none());
        for i in 0..CAPACITY {
            cache.insert(format!("k{i}"), vec![json!(i)]);
        }
        assert!(cache.get("a").is_none(), "oldest entry evicted");
        assert_eq!(cache.get("k3"), Some(vec![json!(3)]));
    }
}
