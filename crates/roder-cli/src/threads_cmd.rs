//! `roder threads list|show`: read the store; no model or key needed.
//! `delete` and `compact` run a runtime (`compact` asks the thread's model
//! for a summary).

use std::process::ExitCode;

use roder_api::thread::ThreadStore;
use roder_api::transcript::TranscriptItem;
use roder_ext_jsonl_thread_store::store::JsonlThreadStore;

use crate::config::Settings;
use crate::wiring;

fn store(settings: &Settings) -> JsonlThreadStore {
    JsonlThreadStore {
        base_path: settings.threads_dir(),
    }
}

pub async fn list(settings: &Settings) -> anyhow::Result<ExitCode> {
    crate::config::store::require_jsonl(settings, "roder threads list")?;
    let store = store(settings);
    let threads = store.list_threads().await?;
    if threads.is_empty() {
        eprintln!("no threads in {}", settings.threads_dir().display());
    }
    for metadata in threads {
        let first_message = store
            .load_thread(&metadata.thread_id)
            .await?
            .and_then(|snapshot| {
                snapshot
                    .transcript()
                    .into_iter()
                    .find_map(|item| match item {
                        TranscriptItem::UserMessage { text, .. } => Some(text),
                        _ => None,
                    })
            })
            .unwrap_or_default();
        let updated = metadata
            .updated_at
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        crate::outln!(
            "{}  {}  {}  {}",
            metadata.thread_id,
            updated,
            metadata.workspace,
            first_message.lines().next().unwrap_or_default()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn show(settings: &Settings, thread_id: &str) -> anyhow::Result<ExitCode> {
    crate::config::store::require_jsonl(settings, "roder threads show")?;
    let snapshot = store(settings)
        .load_thread(thread_id)
        .await?
        .ok_or_else(|| anyhow::anyhow!("thread \"{thread_id}\" does not exist"))?;
    if let Some(metadata) = &snapshot.metadata {
        crate::outln!(
            "thread {}  workspace {}",
            metadata.thread_id,
            metadata.workspace
        )?;
    }
    if let Some(binding) = snapshot
        .metadata
        .as_ref()
        .and_then(|metadata| metadata.runner_binding.as_ref())
    {
        crate::outln!(
            "runner {}  works in {}",
            binding.destination.provider_id,
            binding.workspace.display()
        )?;
    }
    for item in snapshot.transcript() {
        match item {
            TranscriptItem::UserMessage { text, .. } => crate::outln!("\nuser: {text}")?,
            TranscriptItem::AssistantMessage { text } => crate::outln!("\nassistant: {text}")?,
            TranscriptItem::Reasoning { .. } => {}
            TranscriptItem::ToolCall {
                name, arguments, ..
            } => crate::outln!("  → {name} {arguments}")?,
            TranscriptItem::ToolResult {
                name,
                output,
                is_error,
                ..
            } => {
                let mark = if is_error { "✗" } else { "✓" };
                let first = output.lines().next().unwrap_or_default();
                crate::outln!("  {mark} {name}: {first}")?;
            }
        }
    }
    crate::rewind_cmd::print_targets(&snapshot.events)?;
    Ok(ExitCode::SUCCESS)
}

pub async fn delete(settings: &Settings, thread_id: &str) -> anyhow::Result<ExitCode> {
    let workspace = std::env::current_dir()?;
    let wired = wiring::runtime(settings, &workspace, |_| {})?;
    let outcome = wired.runtime.delete_thread(thread_id).await;
    wired.shutdown().await;
    outcome?;
    eprintln!("roder: deleted thread {thread_id}");
    Ok(ExitCode::SUCCESS)
}

/// Compacts a thread between turns; prints what it did on stderr.
pub async fn compact(settings: &Settings, thread_id: &str) -> anyhow::Result<ExitCode> {
    let workspace = std::env::current_dir()?;
    let wired = wiring::runtime(settings, &workspace, |_| {})?;
    let outcome = wired.runtime.compact_thread(thread_id).await;
    wired.shutdown().await;
    let compacted = outcome?;
    eprintln!(
        "roder: compacted thread {thread_id}: {} items replaced, about {} -> {} tokens",
        compacted.replaced_items, compacted.tokens_before, compacted.tokens_after
    );
    crate::outln!("{}", compacted.summary)?;
    Ok(ExitCode::SUCCESS)
}
