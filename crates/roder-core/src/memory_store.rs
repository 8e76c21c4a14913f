//! A thread store that keeps everything in memory: the runtime's store when no
//! `ThreadStoreFactory` is installed (tests, ephemeral embedders). Nothing
//! survives the process.

use std::collections::HashMap;
use std::sync::Mutex;

use roder_api::events::EventEnvelope;
use roder_api::thread::{ThreadMetadata, ThreadStore};

#[derive(Default)]
pub struct MemoryThreadStore {
    threads: Mutex<HashMap<String, StoredThread>>,
}

#[derive(Default)]
struct StoredThread {
    metadata: Option<ThreadMetadata>,
    events: Vec<EventEnvelope>,
}

impl MemoryThreadStore {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, StoredThread>) -> T) -> T {
        let mut threads = self
            .threads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut threads)
    }
}

#[async_trait::async_trait]
impl ThreadStore for MemoryThreadStore {
    async fn create_thread(&self, metadata: ThreadMetadata) -> anyhow::Result<()> {
        self.with(|threads| {
            let entry = threads.entry(metadata.thread_id.clone()).or_default();
            if entry.metadata.is_some() {
                anyhow::bail!("thread \"{}\" already exists", metadata.thread_id);
            }
            entry.metadata = Some(metadata);
            Ok(())
        })
    }

    async fn update_thread_metadata(&self, metadata: ThreadMetadata) -> anyhow::Result<()> {
        let thread_id = metadata.thread_id.clone();
        self.with(|threads| {
            threads.entry(thread_id).or_default().metadata = Some(metadata);
        });
        Ok(())
    }

    async fn load_metadata(&self, thread_id: &str) -> anyhow::Result<Option<ThreadMetadata>> {
        Ok(self.with(|threads| {
            threads
                .get(thread_id)
                .and_then(|thread| thread.metadata.clone())
        }))
    }

    /// Appends `events` when they continue the log (consecutive seqs from
    /// its last one), like every Roder store; otherwise writes nothing.
    async fn append_events(&self, thread_id: &str, events: &[EventEnvelope]) -> anyhow::Result<()> {
        self.with(|threads| {
            let log = &mut threads.entry(thread_id.to_string()).or_default().events;
            let last = log.last().map_or(0, |event| event.seq);
            for (offset, event) in (1u64..).zip(events) {
                if event.seq != last + offset {
                    anyhow::bail!(
                        "append of seq {} to thread \"{thread_id}\" refused: the log ends at seq {last}",
                        event.seq
                    );
                }
            }
            log.extend_from_slice(events);
            Ok(())
        })
    }

    async fn load_events(
        &self,
        thread_id: &str,
        after_seq: u64,
    ) -> anyhow::Result<Vec<EventEnvelope>> {
        Ok(self.with(|threads| {
            threads
                .get(thread_id)
                .map(|thread| {
                    thread
                        .events
                        .iter()
                        .filter(|event| event.seq > after_seq)
                        .cloned()
                        .collect()
                })
                .unwrap_or_default()
        }))
    }

    async fn list_threads(&self) -> anyhow::Result<Vec<ThreadMetadata>> {
        let mut all: Vec<ThreadMetadata> = self.with(|threads| {
            threads
                .values()
                .filter_map(|thread| thread.metadata.clone())
                .collect()
        });
        all.sort_by_key(|metadata| std::cmp::Reverse(metadata.updated_at));
        Ok(all)
    }

    async fn delete_thread(&self, thread_id: &str) -> anyhow::Result<()> {
        self.with(|threads| threads.remove(thread_id));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roder_api::events::{RoderEvent, ThreadCreated};

    fn event(seq: u64) -> EventEnvelope {
        EventEnvelope {
            seq,
            timestamp: time::OffsetDateTime::UNIX_EPOCH,
            thread_id: "t".into(),
            turn_id: None,
            event: RoderEvent::ThreadCreated(ThreadCreated {
                thread_id: "t".into(),
                workspace: "/w".into(),
                runner_provider_id: None,
            }),
        }
    }

    #[tokio::test]
    async fn only_the_next_seq_is_appended() {
        let store = MemoryThreadStore::default();
        store
            .append_events("t", &[event(1), event(2)])
            .await
            .unwrap();
        assert!(store.append_events("t", &[event(4)]).await.is_err());
        assert!(store.append_events("t", &[event(2)]).await.is_err());
        store.append_events("t", &[event(3)]).await.unwrap();
        assert_eq!(store.load_events("t", 0).await.unwrap().len(), 3);
    }
}
