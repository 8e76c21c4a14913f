//! The JSON a git-worktree destination (or a persisted session) carries.
//!
//! A destination's `config` is what the runtime's runner selection holds:
//! `{"worktree_id": "wt-1", "relative_cwd": "sub/dir" | null,
//! "repository": "/repo", "selector": "HEAD"}`. Only the id and the
//! working directory matter to a session; the repository and selector are
//! accepted as a readable note of where the worktree came from (the record
//! is the source of truth). A session state's `metadata` holds the id and
//! the working directory, which is all `resume_session` needs.
//!
//! The runtime adds the thread's bound workspace under
//! [`WORKSPACE_CONFIG_KEY`]. A session works in the checkout's
//! `relative_cwd`, so a binding at any other directory cannot be honoured;
//! the provider compares the two (see `provider.rs`).

use std::path::PathBuf;

use anyhow::bail;
use roder_api::runner_idle::ON_IDLE_CONFIG_KEY;
use roder_api::runner_workspace::WORKSPACE_CONFIG_KEY;
use roder_api::sandbox_policy::{SANDBOX_CONFIG_KEY, SandboxPolicy};
use roder_ext_runner_unix_local::config::parse_sandbox;
use serde_json::{Map, Value};

/// Fields a config may hold. Anything else is refused, so a typo
/// (`"worktree"`) is an error instead of a silently ignored setting.
const KNOWN_FIELDS: [&str; 7] = [
    "worktree_id",
    "relative_cwd",
    "repository",
    "selector",
    WORKSPACE_CONFIG_KEY,
    SANDBOX_CONFIG_KEY,
    // The runtime's (`roder_api::runner_idle`); this provider ignores it.
    ON_IDLE_CONFIG_KEY,
];

/// Which worktree a session works in, and where inside it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WorktreeConfig {
    pub(crate) worktree_id: String,
    /// Relative to the checkout; `None` is the checkout itself.
    pub(crate) relative_cwd: Option<PathBuf>,
    /// The thread's bound workspace (absolute), when the runtime passed
    /// one; it must be the claimed working directory. Not part of the
    /// state metadata: a session that opened has already matched it.
    pub(crate) workspace: Option<PathBuf>,
    /// The thread's sandbox policy ([`SANDBOX_CONFIG_KEY`]); `None` is
    /// [`SandboxPolicy::default()`]. Kept in the state metadata, so a
    /// resumed session keeps it.
    pub(crate) sandbox: Option<SandboxPolicy>,
}

impl WorktreeConfig {
    /// Parses a destination `config` or a state's `metadata`. `source`
    /// names where the JSON came from so errors point at the right place.
    pub(crate) fn from_json(value: &Value, source: &str) -> anyhow::Result<Self> {
        let object = match value {
            Value::Object(object) => object,
            Value::Null => bail!(
                "git-worktree {source} is missing; expected an object like {{\"worktree_id\": \"wt-1\"}}"
            ),
            other => bail!(
                "git-worktree {source} must be an object like {{\"worktree_id\": \"wt-1\"}}, got {other}"
            ),
        };
        if let Some(unknown) = object
            .keys()
            .find(|key| !KNOWN_FIELDS.contains(&key.as_str()))
        {
            bail!(
                "git-worktree {source} has unknown field `{unknown}` (known fields: {})",
                KNOWN_FIELDS.join(", ")
            );
        }
        let worktree_id = match object.get("worktree_id") {
            Some(Value::String(id)) => id.clone(),
            None | Some(Value::Null) => bail!(
                "git-worktree {source} field `worktree_id` is required: the id of a materialized worktree"
            ),
            Some(other) => {
                bail!("git-worktree {source} field `worktree_id` must be a string, got {other}")
            }
        };
        crate::id::validate(&worktree_id)?;
        let relative_cwd = match object.get("relative_cwd") {
            None | Some(Value::Null) => None,
            Some(Value::String(path)) if path.is_empty() => None,
            Some(Value::String(path)) => Some(PathBuf::from(path)),
            Some(other) => bail!(
                "git-worktree {source} field `relative_cwd` must be a string or null, got {other}"
            ),
        };
        let workspace = match object.get(WORKSPACE_CONFIG_KEY) {
            None | Some(Value::Null) => None,
            Some(Value::String(path)) if PathBuf::from(path).is_absolute() => {
                Some(PathBuf::from(path))
            }
            Some(other) => bail!(
                "git-worktree {source} field `{WORKSPACE_CONFIG_KEY}` must be an absolute path, got {other}"
            ),
        };
        for note in ["repository", "selector"] {
            if let Some(value) = object.get(note)
                && !(value.is_string() || value.is_null())
            {
                bail!("git-worktree {source} field `{note}` must be a string, got {value}");
            }
        }
        Ok(Self {
            worktree_id,
            relative_cwd,
            workspace,
            sandbox: parse_sandbox(object, "git-worktree", source)?,
        })
    }

    /// The JSON form stored in a session state's `metadata`.
    pub(crate) fn to_json(&self) -> Value {
        let mut object = Map::new();
        object.insert(
            "worktree_id".to_string(),
            Value::String(self.worktree_id.clone()),
        );
        if let Some(relative_cwd) = &self.relative_cwd {
            object.insert(
                "relative_cwd".to_string(),
                Value::String(relative_cwd.display().to_string()),
            );
        }
        if let Some(sandbox) = &self.sandbox
            && let Ok(sandbox) = serde_json::to_value(sandbox)
        {
            object.insert(SANDBOX_CONFIG_KEY.to_string(), sandbox);
        }
        Value::Object(object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn error(value: Value) -> String {
        WorktreeConfig::from_json(&value, "destination config")
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn parses_the_runtime_selection_config() {
        let config = WorktreeConfig::from_json(
            &json!({"worktree_id": "wt-1", "relative_cwd": "src", "repository": "/r", "selector": "HEAD"}),
            "x",
        )
        .unwrap();
        assert_eq!(config.worktree_id, "wt-1");
        assert_eq!(config.relative_cwd, Some(PathBuf::from("src")));
        let plain =
            WorktreeConfig::from_json(&json!({"worktree_id": "a", "relative_cwd": null}), "x")
                .unwrap();
        assert_eq!(plain.relative_cwd, None);
        assert_eq!(plain.to_json(), json!({"worktree_id": "a"}));
        assert_eq!(
            WorktreeConfig::from_json(&config.to_json(), "x").unwrap(),
            config
        );
        let bound = WorktreeConfig::from_json(
            &json!({"worktree_id": "a", "workspace": "/w/a/checkout"}),
            "x",
        )
        .unwrap();
        assert_eq!(bound.workspace, Some(PathBuf::from("/w/a/checkout")));
        assert_eq!(bound.to_json(), json!({"worktree_id": "a"}));
    }

    #[test]
    fn the_sandbox_policy_is_accepted_and_kept_in_the_state() {
        let config = WorktreeConfig::from_json(
            &json!({"worktree_id": "a", "sandbox": {"mechanism": "bubblewrap"}}),
            "x",
        )
        .unwrap();
        assert_eq!(
            config.sandbox.as_ref().map(|policy| policy.mechanism),
            Some(roder_api::sandbox_policy::HostMechanism::Bubblewrap)
        );
        assert_eq!(
            WorktreeConfig::from_json(&config.to_json(), "x").unwrap(),
            config
        );
        assert!(
            error(json!({"worktree_id": "a", "sandbox": {"mode": "off"}})).contains("`sandbox`")
        );
    }

    #[test]
    fn bad_configs_name_the_field() {
        assert!(error(Value::Null).contains("missing"));
        assert!(error(json!([])).contains("must be an object"));
        assert!(error(json!({})).contains("`worktree_id` is required"));
        assert!(error(json!({"worktree_id": 1})).contains("must be a string"));
        assert!(error(json!({"worktree_id": "../x"})).contains("must not start with '.'"));
        assert!(error(json!({"worktree_id": "a", "root": "/"})).contains("unknown field `root`"));
        assert!(error(json!({"worktree_id": "a", "relative_cwd": 3})).contains("relative_cwd"));
        assert!(error(json!({"worktree_id": "a", "selector": {}})).contains("`selector`"));
        assert!(error(json!({"worktree_id": "a", "workspace": "rel"})).contains("`workspace`"));
        assert!(error(json!({"worktree_id": "a", "workspace": 1})).contains("`workspace`"));
    }
}
