//! `exec-loop`: the `roder` binary end to end. `roder exec` runs against a
//! fake Chat Completions server (in this process) that scripts N
//! `exec_command` calls of `true`; the same with 0 calls is subtracted and
//! the difference divided by N. CPU comes from the kernel's accounting of
//! this process's children (the `roder` process and the commands it ran).
//! Peak RSS is `roder`'s own, measured by GNU time (`/usr/bin/time`, which
//! forks from a small process): the kernel's per-child maximum would also
//! count this benchmark's own memory, which a child spawned with vfork
//! inherits into its accounting until it execs.
//!
//! Needs the release binary: `cargo build --release -p roder-cli` (looked up
//! next to this benchmark's own executable, or at `$RODER_BIN`).

use std::path::PathBuf;
use std::time::Instant;

use roder_testkit::fake_models::{ChatStream, FakeModelServer};
use serde_json::json;

use crate::figure::{median, print, sized};

fn steps() -> usize {
    sized(50, 2)
}

fn repeats() -> usize {
    sized(5, 1)
}

pub(crate) struct Sample {
    pub(crate) wall_ms: f64,
    pub(crate) cpu_ms: f64,
    /// `roder`'s peak RSS in KiB, when GNU time is installed.
    peak_kib: Option<u64>,
}

const GNU_TIME: &str = "/usr/bin/time";

pub async fn run() -> anyhow::Result<()> {
    let roder = crate::roder_process::binary()?;
    let server = FakeModelServer::start().await?;
    let home = tempfile::tempdir()?;
    tokio::fs::write(
        home.path().join("config.toml"),
        format!(
            "model = \"fake/bench\"\n[providers.fake]\nkind = \"openai-chat\"\nbase_url = \"{}\"\n",
            server.openai_base_url()
        ),
    )
    .await?;
    let workspace = tempfile::tempdir()?;
    let mut empty = Vec::new();
    let mut full = Vec::new();
    for _ in 0..repeats() {
        empty.push(exec(&roder, &server, home.path(), workspace.path(), 0).await?);
        full.push(exec(&roder, &server, home.path(), workspace.path(), steps()).await?);
    }
    let peak_kib = full
        .iter()
        .chain(&empty)
        .filter_map(|sample| sample.peak_kib)
        .max();
    let per_step = |pick: fn(&Sample) -> f64| {
        let mut base: Vec<f64> = empty.iter().map(pick).collect();
        let mut loaded: Vec<f64> = full.iter().map(pick).collect();
        (median(&mut loaded) - median(&mut base)) / steps() as f64
    };
    let context = json!({ "steps": steps(), "repeats": repeats(), "command": "true",
        "peers": { "codex_exec_0.171_wall_ms": 71, "codex_exec_0.171_cpu_ms": 60,
                   "codex_exec_0.171_peak_rss_mb": 162, "mini_swe_agent_2.4.6_wall_ms": 59 } });
    print(
        "exec-loop",
        "wall_per_step_ms",
        per_step(|s| s.wall_ms),
        "ms",
        context.clone(),
    );
    print(
        "exec-loop",
        "cpu_per_step_ms",
        per_step(|s| s.cpu_ms),
        "ms",
        context.clone(),
    );
    match peak_kib {
        Some(kib) => print(
            "exec-loop",
            "peak_rss_mib",
            kib as f64 / 1024.0,
            "MiB",
            context,
        ),
        None => {
            eprintln!("exec-loop: peak_rss_mib needs GNU time ({GNU_TIME}; apt-get install time)")
        }
    }
    Ok(())
}

/// One `roder exec` of `steps` scripted `exec_command true` calls (also the
/// `traces` bench's step).
pub(crate) async fn exec(
    roder: &PathBuf,
    server: &FakeModelServer,
    home: &std::path::Path,
    workspace: &std::path::Path,
    steps: usize,
) -> anyhow::Result<Sample> {
    for index in 0..steps {
        let id = format!("call-{index}");
        server.push(ChatStream::tool_calls_reply(&[(
            id.as_str(),
            "exec_command",
            r#"{"cmd":"true"}"#,
        )]));
    }
    server.push(ChatStream::text_reply("done"));
    let rss_file = tempfile::NamedTempFile::new()?;
    let gnu_time = std::path::Path::new(GNU_TIME).exists();
    let mut command = if gnu_time {
        let mut command = tokio::process::Command::new(GNU_TIME);
        command
            .args(["-f", "%M", "-o"])
            .arg(rss_file.path())
            .arg(roder);
        command
    } else {
        tokio::process::Command::new(roder)
    };
    let cpu_before = crate::roder_process::children_cpu_s()? * 1000.0;
    let started = Instant::now();
    let output = command
        .args(["exec", "run true repeatedly"])
        .current_dir(workspace)
        .env("RODER_HOME", home)
        .env_remove("RODER_MODEL")
        // The `[telemetry]` table of the home decides export, not the
        // caller's environment.
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .output()
        .await?;
    let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
    let cpu_ms = crate::roder_process::children_cpu_s()? * 1000.0 - cpu_before;
    anyhow::ensure!(
        output.status.success(),
        "roder exec failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    anyhow::ensure!(
        server.remaining_replies() == 0,
        "the script was not used up"
    );
    let peak_kib = if gnu_time {
        tokio::fs::read_to_string(rss_file.path())
            .await?
            .trim()
            .parse()
            .ok()
    } else {
        None
    };
    Ok(Sample {
        wall_ms,
        cpu_ms,
        peak_kib,
    })
}
