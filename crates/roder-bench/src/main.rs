//! `cargo run --release -p roder-bench -- <name>`: prints one JSON object per
//! figure (`{"bench", "figure", "value", "unit", ...context}`).
//!
//! Machine-dependent figures are reported next to a baseline measured in the
//! same run, because these machines are shared and noisy.

mod figure;
mod store;
mod tool_loop;

use anyhow::Context;

const BENCHES: &[&str] = &["tool-loop", "store"];

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let names: Vec<&str> = if args.is_empty() || args.iter().any(|arg| arg == "all") {
        BENCHES.to_vec()
    } else {
        args.iter().map(String::as_str).collect()
    };
    for name in names {
        match name {
            "tool-loop" => tool_loop::run().await.context("tool-loop")?,
            "store" => store::run().await.context("store")?,
            other => anyhow::bail!(
                "unknown benchmark \"{other}\" (available: {})",
                BENCHES.join(", ")
            ),
        }
    }
    Ok(())
}
