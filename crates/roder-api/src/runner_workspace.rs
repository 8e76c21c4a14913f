//! How a provider learns the workspace a thread is bound at.
//!
//! A thread's binding names an absolute runner path (its workspace); file
//! tools resolve paths against it and commands run in it. The provider must
//! use the same root, so the runtime writes it into the destination config it
//! hands the provider (`validate_destination`, `create_session`) under
//! [`WORKSPACE_CONFIG_KEY`]. A provider that cannot honour that workspace
//! refuses it in `validate_destination`, when the thread is created.

/// The destination-config key holding the bound workspace (a string, an
/// absolute runner path).
///
/// ```
/// use roder_api::runner_workspace::{bound_workspace, WORKSPACE_CONFIG_KEY};
///
/// let config = serde_json::json!({ WORKSPACE_CONFIG_KEY: "/srv/app", "image": "x" });
/// assert_eq!(bound_workspace(&config), Some("/srv/app"));
/// assert_eq!(bound_workspace(&serde_json::json!({})), None);
/// ```
pub const WORKSPACE_CONFIG_KEY: &str = "workspace";

/// The bound workspace in a destination config, if the runtime set one.
pub fn bound_workspace(config: &serde_json::Value) -> Option<&str> {
    config.get(WORKSPACE_CONFIG_KEY)?.as_str()
}
