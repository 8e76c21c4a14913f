//! The checks a runner provider makes on the destinations and session states
//! the runtime hands it, public so that runners built on this one (the
//! git-worktree runner) refuse the same things in the same words.

use anyhow::bail;
use roder_api::remote_runner::{RunnerDestination, RunnerSessionState};
use serde_json::Value;

/// A destination's config, once the destination is known to be for
/// `provider_id` and to carry no default manifest: a host-directory session
/// copies and mounts nothing, so entries or mounts would be silently ignored.
/// `instead` tells the user where the files come from with this runner.
pub fn destination_config<'a>(
    destination: &'a RunnerDestination,
    provider_id: &str,
    instead: &str,
) -> anyhow::Result<&'a Value> {
    check_provider(
        &destination.provider_id,
        provider_id,
        &format!("destination `{}`", destination.id),
    )?;
    let manifest = &destination.default_manifest;
    if !manifest.entries.is_empty() || !manifest.mounts.is_empty() {
        bail!(
            "destination `{}`: {provider_id} does not support manifest entries or mounts; {instead}",
            destination.id
        );
    }
    Ok(&destination.config)
}

/// A persisted session state's metadata, once the state is known to be
/// `provider_id`'s.
pub fn state_metadata<'a>(
    state: &'a RunnerSessionState,
    provider_id: &str,
) -> anyhow::Result<&'a Value> {
    check_provider(
        &state.provider_id,
        provider_id,
        &format!("session `{}`", state.session_id),
    )?;
    Ok(&state.metadata)
}

/// The state of a host-directory session. It never has a snapshot, and
/// `metadata` must be enough to rebuild the session: `resume_session`
/// receives nothing else.
pub fn session_state(
    provider_id: &str,
    session_id: String,
    destination_id: String,
    metadata: Value,
) -> RunnerSessionState {
    RunnerSessionState {
        provider_id: provider_id.to_string(),
        session_id,
        destination_id,
        snapshot: None,
        metadata,
    }
}

/// The runtime routes by provider id, so a mismatch is a wiring bug; the
/// error names both ids.
fn check_provider(actual: &str, expected: &str, what: &str) -> anyhow::Result<()> {
    if actual != expected {
        bail!("{what} is for runner provider `{actual}`, not `{expected}`");
    }
    Ok(())
}
