//! `roder runners gc`: remove sandboxes whose thread is gone.

use std::collections::HashSet;
use std::process::ExitCode;

use roder_api::thread::ThreadStore;
use roder_ext_jsonl_thread_store::store::JsonlThreadStore;
use roder_ext_runner_docker::DockerRunnerProvider;

use crate::config::Settings;

pub async fn gc(settings: &Settings) -> anyhow::Result<ExitCode> {
    let store = JsonlThreadStore {
        base_path: settings.threads_dir(),
    };
    let live: HashSet<String> = store
        .list_threads()
        .await?
        .into_iter()
        .map(|metadata| metadata.thread_id)
        .collect();
    let removed = DockerRunnerProvider::default().gc(&live).await?;
    for container in &removed {
        println!("removed {container}");
    }
    eprintln!(
        "roder: removed {} container(s); {} thread(s) still exist",
        removed.len(),
        live.len()
    );
    Ok(ExitCode::SUCCESS)
}
