//! `roder threads rollback ID --turn N` and `roder threads fork ID [--turn
//! N]`: a thread back to the end of a turn, workspace included, or a new
//! thread (with its own copy of the workspace) from there. The fork's
//! thread id is the only thing on stdout, so scripts can capture it.

use std::process::ExitCode;

use roder_api::events::EventEnvelope;
use roder_core::RewindTarget;

use crate::config::Settings;
use crate::wiring;

pub async fn rollback(settings: &Settings, thread_id: &str, turn: u32) -> anyhow::Result<ExitCode> {
    let workspace = std::env::current_dir()?;
    let wired = wiring::runtime(settings, &workspace, |_| {})?;
    let outcome = wired.runtime.rollback_thread(thread_id, turn).await;
    wired.shutdown().await;
    let rolled_back = outcome?;
    eprintln!(
        "roder: thread {thread_id} is back at the end of turn {turn} ({} turns undone; workspace restored from checkpoint {})",
        rolled_back.rolled_back_turns.len(),
        rolled_back.checkpoint.id
    );
    Ok(ExitCode::SUCCESS)
}

pub async fn fork(
    settings: &Settings,
    thread_id: &str,
    turn: Option<u32>,
) -> anyhow::Result<ExitCode> {
    let workspace = std::env::current_dir()?;
    let wired = wiring::runtime(settings, &workspace, |_| {})?;
    let outcome = wired.runtime.fork_thread(thread_id, turn).await;
    wired.shutdown().await;
    let fork = outcome?;
    let at = turn.map_or("its current turn".to_string(), |turn| {
        format!("turn {turn}")
    });
    let place = match &fork.runner_binding {
        Some(binding) => format!("works in {}", binding.workspace.display()),
        None => format!("works in {}", fork.workspace),
    };
    eprintln!(
        "roder: forked thread {thread_id} at {at} into thread {} ({place})",
        fork.thread_id
    );
    crate::outln!("{}", fork.thread_id)?;
    Ok(ExitCode::SUCCESS)
}

/// For `roder threads show`: the turns the thread can go back to.
pub fn print_targets(events: &[EventEnvelope]) -> std::io::Result<()> {
    let targets: Vec<RewindTarget> = roder_core::rewind_targets_of(events);
    if targets.is_empty() {
        return Ok(());
    }
    crate::outln!("\nrewind targets (roder threads rollback ID --turn N):")?;
    for target in targets {
        let message = target
            .message
            .as_deref()
            .and_then(|message| message.lines().next())
            .unwrap_or(if target.turn == 0 {
                "(before the first turn)"
            } else {
                ""
            });
        let short: String = target.checkpoint.id.chars().take(12).collect();
        crate::outln!("  turn {}  checkpoint {short}  {message}", target.turn)?;
    }
    Ok(())
}
