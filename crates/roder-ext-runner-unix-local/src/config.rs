//! The JSON a unix-local destination (or a persisted session) carries.
//!
//! The same shape serves both places: a destination's `config` and a
//! session state's `metadata` are `{"root": "/abs/dir", "env": {"K": "V"},
//! "workspace": "/abs/dir/sub"}`, because `resume_session` only gets the
//! persisted state and must rebuild the session from it alone.
//!
//! `workspace` is what the runtime adds: the thread's bound workspace
//! ([`WORKSPACE_CONFIG_KEY`]). File tools send paths relative to it and run
//! commands in it, so the session starts there. A workspace outside the
//! root cannot be honoured (the session confines everything to the root)
//! and is refused, which the runtime does when the thread is created.

use std::path::PathBuf;

use anyhow::bail;
use roder_api::runner_workspace::WORKSPACE_CONFIG_KEY;
use roder_api::sandbox_policy::{SANDBOX_CONFIG_KEY, SandboxPolicy};
use serde_json::{Map, Value};

use crate::paths::normalize;

/// Fields a config object may hold. Anything else is refused, so a typo
/// (`"rooot"`) is an error instead of a silently ignored setting.
const KNOWN_FIELDS: [&str; 4] = ["root", "env", WORKSPACE_CONFIG_KEY, SANDBOX_CONFIG_KEY];

/// A parsed unix-local destination config.
#[derive(Debug, Clone, PartialEq)]
pub struct UnixLocalConfig {
    /// Absolute, lexically normalised directory. Sessions run directly in it
    /// (not in a per-session subdirectory), so a thread bound to a workspace
    /// sees that workspace.
    pub root: PathBuf,
    /// Extra environment for every command, sorted by key; a request's own
    /// `env` is applied on top.
    pub env: Vec<(String, String)>,
    /// The thread's bound workspace, lexically normalised and inside
    /// `root`: where relative file paths and commands without a `cwd`
    /// start. `None` (no binding told us) is the root itself.
    pub workspace: Option<PathBuf>,
    /// The thread's sandbox policy ([`SANDBOX_CONFIG_KEY`], written by the
    /// runtime); `None` is [`SandboxPolicy::default()`]: enforced, network
    /// off. Kept in the state metadata so a resumed session keeps it.
    pub sandbox: Option<SandboxPolicy>,
}

impl UnixLocalConfig {
    /// Parses a destination `config`. `source` names where the JSON came
    /// from (e.g. "destination config") so errors point at the right place.
    pub fn from_json(value: &Value, source: &str) -> anyhow::Result<Self> {
        let object = match value {
            Value::Object(object) => object,
            Value::Null => bail!(
                "unix-local {source} is missing; expected an object like {{\"root\": \"/absolute/dir\"}}"
            ),
            other => bail!(
                "unix-local {source} must be an object like {{\"root\": \"/absolute/dir\"}}, got {other}"
            ),
        };
        if let Some(unknown) = object
            .keys()
            .find(|key| !KNOWN_FIELDS.contains(&key.as_str()))
        {
            bail!(
                "unix-local {source} has unknown field `{unknown}` (known fields: {})",
                KNOWN_FIELDS.join(", ")
            );
        }
        let root = parse_root(object, source)?;
        let workspace = parse_workspace(object, source, &root)?;
        Ok(Self {
            root,
            env: parse_env(object, source)?,
            workspace,
            sandbox: parse_sandbox(object, "unix-local", source)?,
        })
    }

    /// The JSON form, as stored in a session state's `metadata`. `env` is
    /// left out when empty so the common case stays `{"root": ...}`.
    pub fn to_json(&self) -> Value {
        let mut object = Map::new();
        object.insert(
            "root".to_string(),
            Value::String(self.root.display().to_string()),
        );
        if !self.env.is_empty() {
            let env = self
                .env
                .iter()
                .map(|(key, value)| (key.clone(), Value::String(value.clone())))
                .collect();
            object.insert("env".to_string(), Value::Object(env));
        }
        if let Some(workspace) = &self.workspace {
            object.insert(
                WORKSPACE_CONFIG_KEY.to_string(),
                Value::String(workspace.display().to_string()),
            );
        }
        if let Some(sandbox) = &self.sandbox
            && let Ok(sandbox) = serde_json::to_value(sandbox)
        {
            object.insert(SANDBOX_CONFIG_KEY.to_string(), sandbox);
        }
        Value::Object(object)
    }

    /// The policy its commands are confined by.
    pub fn sandbox_policy(&self) -> SandboxPolicy {
        self.sandbox.clone().unwrap_or_default()
    }
}

/// The `sandbox` field of a config: a [`SandboxPolicy`] or absent. Public
/// so the runners built on this one read it in the same words.
pub fn parse_sandbox(
    object: &Map<String, Value>,
    runner: &str,
    source: &str,
) -> anyhow::Result<Option<SandboxPolicy>> {
    match object.get(SANDBOX_CONFIG_KEY) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => serde_json::from_value(value.clone()).map(Some).map_err(|error| {
            anyhow::anyhow!(
                "{runner} {source} field `{SANDBOX_CONFIG_KEY}` is not a sandbox policy: {error} (expected e.g. {{\"mode\": \"enforce\", \"network\": \"off\"}})"
            )
        }),
    }
}

fn parse_root(object: &Map<String, Value>, source: &str) -> anyhow::Result<PathBuf> {
    let root = match object.get("root") {
        None | Some(Value::Null) => {
            bail!("unix-local {source} field `root` is required: an absolute directory path")
        }
        Some(Value::String(root)) => root,
        Some(other) => bail!(
            "unix-local {source} field `root` must be a string (an absolute directory path), got {other}"
        ),
    };
    let path = PathBuf::from(root);
    if !path.is_absolute() {
        bail!("unix-local {source} field `root` must be an absolute path, got {root:?}");
    }
    if root.contains('\0') {
        bail!("unix-local {source} field `root` contains a NUL byte: {root:?}");
    }
    Ok(normalize(&path))
}

/// The bound workspace: an absolute path that is the root or inside it
/// (lexically; the session checks symlinks on disk when it opens).
fn parse_workspace(
    object: &Map<String, Value>,
    source: &str,
    root: &std::path::Path,
) -> anyhow::Result<Option<PathBuf>> {
    let workspace = match object.get(WORKSPACE_CONFIG_KEY) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(workspace)) => workspace,
        Some(other) => bail!(
            "unix-local {source} field `{WORKSPACE_CONFIG_KEY}` must be a string (an absolute directory path), got {other}"
        ),
    };
    let path = PathBuf::from(workspace);
    if !path.is_absolute() || workspace.contains('\0') {
        bail!(
            "unix-local {source} field `{WORKSPACE_CONFIG_KEY}` must be an absolute path without NUL bytes, got {workspace:?}"
        );
    }
    let path = normalize(&path);
    if !path.starts_with(root) {
        bail!(
            "unix-local {source}: the thread is bound at workspace `{}`, which is outside the runner root `{}`; every file and command of this runner stays inside its root, so bind the thread at `{}` or a directory inside it, or set `root` to a directory that contains the workspace",
            path.display(),
            root.display(),
            root.display()
        );
    }
    Ok(Some(path))
}

fn parse_env(object: &Map<String, Value>, source: &str) -> anyhow::Result<Vec<(String, String)>> {
    let env = match object.get("env") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(env)) => env,
        Some(other) => {
            bail!("unix-local {source} field `env` must be an object of string values, got {other}")
        }
    };
    let mut pairs = Vec::with_capacity(env.len());
    for (key, value) in env {
        if key.is_empty() || key.contains('=') || key.contains('\0') {
            bail!(
                "unix-local {source} field `env` has an invalid variable name {key:?} (empty, or contains '=' or NUL)"
            );
        }
        let Value::String(value) = value else {
            bail!("unix-local {source} field `env.{key}` must be a string, got {value}");
        };
        if value.contains('\0') {
            bail!("unix-local {source} field `env.{key}` contains a NUL byte");
        }
        pairs.push((key.clone(), value.clone()));
    }
    pairs.sort();
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn error(value: Value) -> String {
        UnixLocalConfig::from_json(&value, "destination config")
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn parses_root_and_env() {
        let config = UnixLocalConfig::from_json(
            &json!({"root": "/srv/./work/../ws", "env": {"B": "2", "A": "1"}}),
            "destination config",
        )
        .unwrap();
        assert_eq!(config.root, PathBuf::from("/srv/ws"));
        assert_eq!(
            config.env,
            vec![
                ("A".to_string(), "1".to_string()),
                ("B".to_string(), "2".to_string())
            ]
        );
    }

    #[test]
    fn json_round_trips_and_omits_empty_env() {
        let plain = UnixLocalConfig::from_json(&json!({"root": "/ws"}), "x").unwrap();
        assert_eq!(plain.to_json(), json!({"root": "/ws"}));
        let with_env =
            UnixLocalConfig::from_json(&json!({"root": "/ws", "env": {"K": "V"}}), "x").unwrap();
        assert_eq!(
            UnixLocalConfig::from_json(&with_env.to_json(), "x").unwrap(),
            with_env
        );
    }

    #[test]
    fn missing_or_bad_root_names_the_field() {
        assert!(error(Value::Null).contains("missing"));
        assert!(error(json!("root")).contains("must be an object"));
        assert!(error(json!({})).contains("field `root` is required"));
        assert!(error(json!({"root": 3})).contains("field `root` must be a string"));
        let relative = error(json!({"root": "work/dir"}));
        assert!(relative.contains("field `root` must be an absolute path"));
        assert!(relative.contains("work/dir"));
    }

    #[test]
    fn the_bound_workspace_is_kept_when_inside_the_root() {
        let config = UnixLocalConfig::from_json(
            &json!({"root": "/srv/ws", "workspace": "/srv/ws/./app/"}),
            "x",
        )
        .unwrap();
        assert_eq!(config.workspace, Some(PathBuf::from("/srv/ws/app")));
        assert_eq!(
            config.to_json(),
            json!({"root": "/srv/ws", "workspace": "/srv/ws/app"})
        );
        assert_eq!(
            UnixLocalConfig::from_json(&config.to_json(), "x").unwrap(),
            config
        );
        let at_root =
            UnixLocalConfig::from_json(&json!({"root": "/srv/ws", "workspace": "/srv/ws"}), "x")
                .unwrap();
        assert_eq!(at_root.workspace, Some(PathBuf::from("/srv/ws")));
    }

    #[test]
    fn a_workspace_outside_the_root_is_refused_naming_both() {
        for outside in ["/srv/other", "/srv/ws/../other", "/srv/wsx", "/"] {
            let message = error(json!({"root": "/srv/ws", "workspace": outside}));
            assert!(
                message.contains("outside the runner root `/srv/ws`"),
                "{message}"
            );
            assert!(message.contains("bound at workspace"), "{message}");
        }
        assert!(error(json!({"root": "/ws", "workspace": "rel"})).contains("absolute path"));
        assert!(error(json!({"root": "/ws", "workspace": 1})).contains("must be a string"));
    }

    #[test]
    fn the_sandbox_policy_is_accepted_kept_and_checked() {
        let config = UnixLocalConfig::from_json(
            &json!({"root": "/ws", "sandbox": {"network": "on", "writable_roots": ["/cache"]}}),
            "x",
        )
        .unwrap();
        let policy = config.sandbox_policy();
        assert!(policy.network.allows());
        assert_eq!(policy.writable_roots, vec![PathBuf::from("/cache")]);
        assert_eq!(
            UnixLocalConfig::from_json(&config.to_json(), "x").unwrap(),
            config
        );
        let plain = UnixLocalConfig::from_json(&json!({"root": "/ws"}), "x").unwrap();
        assert_eq!(plain.sandbox_policy(), SandboxPolicy::default());
        let bad = error(json!({"root": "/ws", "sandbox": {"netwrok": "on"}}));
        assert!(
            bad.contains("field `sandbox`") && bad.contains("netwrok"),
            "{bad}"
        );
    }

    #[test]
    fn bad_env_and_unknown_fields_are_refused() {
        assert!(error(json!({"root": "/ws", "rooot": 1})).contains("unknown field `rooot`"));
        assert!(error(json!({"root": "/ws", "env": []})).contains("field `env` must be an object"));
        assert!(
            error(json!({"root": "/ws", "env": {"K": 1}})).contains("`env.K` must be a string")
        );
        assert!(
            error(json!({"root": "/ws", "env": {"A=B": "x"}})).contains("invalid variable name")
        );
    }
}
