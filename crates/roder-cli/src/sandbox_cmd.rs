//! `roder sandbox status`: which protections of the configured sandbox
//! policy each backend enforces on this machine, which it does not, and why.

use std::process::ExitCode;

use crate::config::Settings;

pub fn status(settings: &Settings, json: bool) -> anyhow::Result<ExitCode> {
    let workspace = std::env::current_dir()?;
    let wired = crate::wiring::runtime(settings, &workspace, |_| {})?;
    let status = wired.runtime.sandbox_status();
    if json {
        let backends: Vec<serde_json::Value> = status
            .iter()
            .map(|(backend, protections)| {
                serde_json::json!({"backend": backend, "protections": protections})
            })
            .collect();
        crate::outln!(
            "{}",
            serde_json::json!({"policy": settings.sandbox, "backends": backends})
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    crate::outln!(
        "policy: mode {:?}, mechanism {:?}, network {:?}",
        settings.sandbox.mode,
        settings.sandbox.mechanism,
        settings.sandbox.network
    )?;
    for (backend, protections) in status {
        crate::outln!("\n{backend}")?;
        for protection in protections {
            let mark = if protection.active {
                "active"
            } else {
                "NOT active"
            };
            crate::outln!(
                "  {:<20} {:<11} {}",
                protection.name,
                mark,
                protection.detail
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
