//! `roder threads export ID --format atif`: a saved thread as a document
//! other tools read. ATIF (Agent Trajectory Interchange Format) is what
//! Harbor's viewer, analysers and dataset exports take as an agent's
//! `trajectory.json`; the conversion lives in `roder-atif`.

use std::process::ExitCode;

use roder_api::thread::ThreadStore;
use roder_ext_jsonl_thread_store::store::JsonlThreadStore;

use crate::cli::ExportFormat;
use crate::config::Settings;

pub async fn export(
    settings: &Settings,
    thread_id: &str,
    format: ExportFormat,
) -> anyhow::Result<ExitCode> {
    crate::config::store::require_jsonl(settings, "roder threads export")?;
    let store = JsonlThreadStore {
        base_path: settings.threads_dir(),
    };
    let snapshot = store
        .load_thread(thread_id)
        .await?
        .ok_or_else(|| anyhow::anyhow!("thread \"{thread_id}\" does not exist"))?;
    let document = match format {
        ExportFormat::Atif => {
            let agent = roder_atif::AgentInfo {
                name: "roder".to_string(),
                version: env!("CARGO_PKG_VERSION").to_string(),
            };
            let trajectory = roder_atif::trajectory(thread_id, &snapshot.events, agent)?;
            serde_json::to_string_pretty(&trajectory)?
        }
    };
    crate::outln!("{document}")?;
    Ok(ExitCode::SUCCESS)
}
