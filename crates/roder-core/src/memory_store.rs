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

    async fn append_events(&self, thread_id: &str, events: &[EventEnvelope]) -> anyhow::Result<()> {
        self.with(|threads| {
            threads
                .entry(thread_id.to_string())
                .or_default()
                .events
                .extend_from_slice(events);
        });
        Ok(())
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
