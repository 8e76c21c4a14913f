//! `roder runners gc`: remove this home's sandboxes whose thread is gone,
//! and say what was kept and why. `roder runners list`: this home's
//! sandboxes, their state and their thread.
//!
//! Only containers labelled with this home's id are candidates (see
//! `crate::home_id`): another home's threads are not in this home's store, so
//! judging its containers from here would remove live sandboxes.

use std::collections::HashSet;
use std::process::ExitCode;

use roder_api::thread::ThreadStore;
use roder_ext_jsonl_thread_store::store::JsonlThreadStore;
use roder_ext_runner_docker::{DockerRunnerProvider, GcEntry, GcOptions};

use crate::cli::GcArgs;
use crate::config::Settings;

pub async fn gc(settings: &Settings, args: &GcArgs) -> anyhow::Result<ExitCode> {
    crate::config::store::require_jsonl(settings, "roder runners gc")?;
    let live = live_threads(settings).await?;
    let provider = DockerRunnerProvider::default().with_home_id(&settings.home_id)?;
    let options = GcOptions {
        include_unlabelled: args.include_unlabelled,
    };
    let report = provider.gc(&live, options).await?;
    for entry in &report.removed {
        crate::outln!("{}", line("removed", entry))?;
    }
    for entry in &report.kept {
        crate::outln!("{}", line("kept", entry))?;
    }
    eprintln!(
        "roder: removed {} container(s), kept {}; home {} has {} thread(s)",
        report.removed.len(),
        report.kept.len(),
        settings.home_id,
        live.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// The ids of this home's threads.
async fn live_threads(settings: &Settings) -> anyhow::Result<HashSet<String>> {
    let store = JsonlThreadStore {
        base_path: settings.threads_dir(),
    };
    Ok(store
        .list_threads()
        .await?
        .into_iter()
        .map(|metadata| metadata.thread_id)
        .collect())
}

pub async fn list(settings: &Settings) -> anyhow::Result<ExitCode> {
    crate::config::store::require_jsonl(settings, "roder runners list")?;
    let live = live_threads(settings).await?;
    let provider = DockerRunnerProvider::default().with_home_id(&settings.home_id)?;
    let sandboxes = provider.sandboxes().await?;
    for sandbox in &sandboxes {
        let thread = match &sandbox.thread {
            Some(thread) if live.contains(thread) => format!("thread={thread}"),
            Some(thread) => format!("thread={thread} (gone: `roder runners gc` removes it)"),
            None => "thread=- (warm pool)".to_string(),
        };
        crate::outln!("{} {} {} {thread}", sandbox.id, sandbox.name, sandbox.state)?;
    }
    eprintln!(
        "roder: {} sandbox(es) of home {}",
        sandboxes.len(),
        settings.home_id
    );
    Ok(ExitCode::SUCCESS)
}

/// `removed|kept <container id> <name> thread=<id|-> home=<id|->: <why>`,
/// one line per container so scripts can `grep` and `cut` it.
fn line(action: &str, entry: &GcEntry) -> String {
    format!(
        "{action} {} {} thread={} home={}: {}",
        entry.id,
        if entry.name.is_empty() {
            "-"
        } else {
            &entry.name
        },
        entry.thread.as_deref().unwrap_or("-"),
        entry.home.as_deref().unwrap_or("-"),
        entry.verdict
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use roder_ext_runner_docker::GcVerdict;

    #[test]
    fn lines_name_the_container_thread_home_and_reason() {
        let entry = GcEntry {
            id: "c0ffee".to_string(),
            name: "roder-t.t1.abc".to_string(),
            thread: Some("t1".to_string()),
            home: Some("h2".to_string()),
            verdict: GcVerdict::OtherHome("h2".to_string()),
        };
        let text = line("kept", &entry);
        assert!(
            text.starts_with("kept c0ffee roder-t.t1.abc thread=t1 home=h2: made by another"),
            "{text}"
        );
        let bare = GcEntry {
            name: String::new(),
            thread: None,
            home: None,
            verdict: GcVerdict::Unlabelled,
            ..entry
        };
        assert!(line("kept", &bare).starts_with("kept c0ffee - thread=- home=-: it has no"));
    }
}
