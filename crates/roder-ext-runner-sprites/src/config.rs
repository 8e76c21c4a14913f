//! The destination config (`RunnerDestination::config`) and the session state
//! persisted with a thread.
//!
//! Both are stored in plain JSON with the thread, so neither ever holds the
//! API token: that comes from the environment when a session starts. Unknown
//! keys are rejected rather than ignored, because a misspelt `cleanup` that
//! silently fell back to the default would delete a sprite the user meant to
//! keep.

use roder_api::runner_workspace::WORKSPACE_CONFIG_KEY;
use roder_api::sandbox_policy::{SANDBOX_CONFIG_KEY, SandboxPolicy};
use serde_json::{Map, Value, json};

use crate::error::SpritesError;
use crate::sandbox::parse_policy;

/// Where sessions run commands unless the config says otherwise.
pub const DEFAULT_WORKING_DIR: &str = "/home/sprite/workspace";
/// Prefix of generated sprite names.
pub const DEFAULT_NAME_PREFIX: &str = "roder";

const KNOWN_KEYS: &[&str] = &[
    "sprite_name",
    "sprite_name_prefix",
    "cleanup",
    "working_dir",
    "base_url",
    WORKSPACE_CONFIG_KEY,
    SANDBOX_CONFIG_KEY,
];

/// Longest sprite name accepted. Sprite URLs are `https://<name>-<org>.sprites.app`,
/// so a name must fit in a DNS label; the API's own limit is not documented.
const MAX_NAME_LEN: usize = 63;
/// Length of the random suffix of generated names.
const SUFFIX_LEN: usize = 8;

/// What happens to the sprite when the session is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cleanup {
    /// `DELETE` the sprite on close (the default for generated names).
    DeleteOnClose,
    /// Leave the sprite running; it hibernates by itself when idle.
    Keep,
}

impl Cleanup {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Cleanup::DeleteOnClose => "delete-on-close",
            Cleanup::Keep => "keep",
        }
    }

    fn parse(value: &str) -> Result<Self, SpritesError> {
        match value {
            "delete-on-close" => Ok(Cleanup::DeleteOnClose),
            "keep" => Ok(Cleanup::Keep),
            other => Err(SpritesError::Config(format!(
                "cleanup must be \"delete-on-close\" or \"keep\", got \"{other}\""
            ))),
        }
    }
}

/// A parsed, validated destination config.
#[derive(Debug, Clone, PartialEq)]
pub struct SpritesConfig {
    /// Use (or create) exactly this sprite instead of generating a name.
    pub sprite_name: Option<String>,
    /// Prefix of generated names: `<prefix>-<8 hex chars>`.
    pub sprite_name_prefix: String,
    /// Defaults to `delete-on-close` for generated sprites and to `keep` when
    /// `sprite_name` names one, so adopting an existing sprite never deletes
    /// it unless the config asks for that explicitly.
    pub cleanup: Cleanup,
    /// The workspace root: absolute, in the sprite. Files resolve and
    /// commands run here. It is the thread's bound workspace (config key
    /// `workspace`, written by the runtime) when there is one, else
    /// `working_dir`, else [`DEFAULT_WORKING_DIR`]; a `working_dir` that
    /// differs from the bound workspace is refused.
    pub working_dir: String,
    /// API base URL without a trailing slash.
    pub base_url: String,
    /// The sandbox policy (config key `sandbox`, written by the runtime from
    /// the thread's or the runner's policy); the default (enforce, network
    /// off) when the config has none.
    pub sandbox: SandboxPolicy,
}

impl SpritesConfig {
    /// Parses `config` (`null` or an object). `default_base_url` applies when
    /// the config has no `base_url`.
    pub fn parse(config: &Value, default_base_url: &str) -> Result<Self, SpritesError> {
        let empty = Map::new();
        let map = match config {
            Value::Null => &empty,
            Value::Object(map) => map,
            other => {
                return Err(SpritesError::Config(format!(
                    "the destination config must be a JSON object, got {other}"
                )));
            }
        };
        let unknown: Vec<&str> = map
            .keys()
            .map(String::as_str)
            .filter(|key| !KNOWN_KEYS.contains(key))
            .collect();
        if !unknown.is_empty() {
            return Err(SpritesError::Config(format!(
                "unknown key{} {} (known keys: {})",
                if unknown.len() == 1 { "" } else { "s" },
                unknown
                    .iter()
                    .map(|k| format!("\"{k}\""))
                    .collect::<Vec<_>>()
                    .join(", "),
                KNOWN_KEYS.join(", ")
            )));
        }

        let sprite_name = string_field(map, "sprite_name")?
            .map(|name| validate_sprite_name(&name).map(|()| name))
            .transpose()?;
        let sprite_name_prefix = match string_field(map, "sprite_name_prefix")? {
            Some(prefix) => normalize_prefix(&prefix)?,
            None => DEFAULT_NAME_PREFIX.to_string(),
        };
        let cleanup = match string_field(map, "cleanup")? {
            Some(value) => Cleanup::parse(&value)?,
            None if sprite_name.is_some() => Cleanup::Keep,
            None => Cleanup::DeleteOnClose,
        };
        let configured = string_field(map, "working_dir")?
            .map(|dir| normalize_working_dir("working_dir", &dir))
            .transpose()?;
        let bound = string_field(map, WORKSPACE_CONFIG_KEY)?
            .map(|dir| normalize_working_dir(WORKSPACE_CONFIG_KEY, &dir))
            .transpose()?;
        let working_dir = match (bound, configured) {
            (Some(bound), Some(configured)) if bound != configured => {
                return Err(SpritesError::Config(format!(
                    "working_dir \"{configured}\" is not the workspace the thread is bound at (\"{bound}\"); the sprite must resolve files and run commands in that one root, so set working_dir to \"{bound}\" or leave it out"
                )));
            }
            (Some(root), _) | (None, Some(root)) => root,
            (None, None) => DEFAULT_WORKING_DIR.to_string(),
        };
        let base_url = match string_field(map, "base_url")? {
            Some(url) => normalize_base_url(&url)?,
            None => normalize_base_url(default_base_url)?,
        };
        let sandbox = parse_policy(map.get(SANDBOX_CONFIG_KEY))?;
        Ok(Self {
            sprite_name,
            sprite_name_prefix,
            cleanup,
            working_dir,
            base_url,
            sandbox,
        })
    }

    /// A fresh name: `<prefix>-<8 random hex chars>`.
    pub fn generate_name(&self) -> String {
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        format!("{}-{}", self.sprite_name_prefix, &suffix[..SUFFIX_LEN])
    }
}

/// What a session persists so it can be resumed or rejoined: no secrets.
/// The sandbox policy is kept so a resumed session sets the same network
/// policy and sends the same environment (its `env.set` values come from the
/// config, which is persisted with the thread anyway).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PersistedSession {
    pub name: String,
    pub working_dir: String,
    pub base_url: String,
    pub cleanup: Cleanup,
    pub sandbox: SandboxPolicy,
}

impl PersistedSession {
    pub(crate) fn to_value(&self) -> Value {
        json!({
            "name": self.name,
            "working_dir": self.working_dir,
            "base_url": self.base_url,
            "cleanup": self.cleanup.as_str(),
            SANDBOX_CONFIG_KEY: serde_json::to_value(&self.sandbox).unwrap_or(Value::Null),
        })
    }

    /// Reads session metadata; `session_id` (the sprite name) fills in a
    /// missing `name`, and missing fields fall back to the defaults (for
    /// `sandbox`, the default policy: enforce, network off).
    pub(crate) fn from_state(
        session_id: &str,
        metadata: &Value,
        default_base_url: &str,
    ) -> Result<Self, SpritesError> {
        let empty = Map::new();
        let map = metadata.as_object().unwrap_or(&empty);
        let name = string_field(map, "name")?.unwrap_or_else(|| session_id.to_string());
        validate_sprite_name(&name)?;
        let working_dir = match string_field(map, "working_dir")? {
            Some(dir) => normalize_working_dir("working_dir", &dir)?,
            None => DEFAULT_WORKING_DIR.to_string(),
        };
        let base_url = normalize_base_url(
            string_field(map, "base_url")?
                .as_deref()
                .unwrap_or(default_base_url),
        )?;
        let cleanup = match string_field(map, "cleanup")? {
            Some(value) => Cleanup::parse(&value)?,
            None => Cleanup::Keep,
        };
        let sandbox = parse_policy(map.get(SANDBOX_CONFIG_KEY))?;
        Ok(Self {
            name,
            working_dir,
            base_url,
            cleanup,
            sandbox,
        })
    }
}

fn string_field(map: &Map<String, Value>, key: &str) -> Result<Option<String>, SpritesError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(SpritesError::Config(format!(
            "{key} must be a string, got {other}"
        ))),
    }
}

/// Sprite names are lowercase letters, digits and hyphens (they become part
/// of a hostname), start with a letter or digit and do not end with a hyphen.
pub(crate) fn validate_sprite_name(name: &str) -> Result<(), SpritesError> {
    let bad = |why: &str| {
        Err(SpritesError::Config(format!(
            "sprite_name \"{name}\" is not a valid sprite name: {why}"
        )))
    };
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return bad(&format!("it must be 1 to {MAX_NAME_LEN} characters long"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return bad(&format!(
            "'{c}' is not allowed (use lowercase letters, digits and '-')"
        ));
    }
    if name.starts_with('-') || name.ends_with('-') {
        return bad("it must not start or end with '-'");
    }
    Ok(())
}

/// Lowercases the prefix and drops trailing hyphens, then checks that the
/// generated names will be valid.
fn normalize_prefix(prefix: &str) -> Result<String, SpritesError> {
    let normalized = prefix
        .to_ascii_lowercase()
        .trim_end_matches('-')
        .to_string();
    let max = MAX_NAME_LEN - 1 - SUFFIX_LEN;
    if normalized.is_empty() || normalized.len() > max {
        return Err(SpritesError::Config(format!(
            "sprite_name_prefix \"{prefix}\" must be 1 to {max} characters long"
        )));
    }
    validate_sprite_name(&normalized).map_err(|_| {
        SpritesError::Config(format!(
            "sprite_name_prefix \"{prefix}\" may only hold letters, digits and '-' and must not start with '-'"
        ))
    })?;
    Ok(normalized)
}

/// An absolute path without `..` or NUL, without its trailing `/`.
fn normalize_working_dir(key: &str, dir: &str) -> Result<String, SpritesError> {
    if !dir.starts_with('/') {
        return Err(SpritesError::Config(format!(
            "{key} \"{dir}\" must be an absolute path in the sprite (e.g. {DEFAULT_WORKING_DIR})"
        )));
    }
    if dir.contains('\0') || dir.split('/').any(|part| part == "..") {
        return Err(SpritesError::Config(format!(
            "{key} \"{dir}\" must not contain '..' or NUL"
        )));
    }
    let mut normalized = String::with_capacity(dir.len());
    for part in dir.split('/').filter(|p| !p.is_empty() && *p != ".") {
        normalized.push('/');
        normalized.push_str(part);
    }
    if normalized.is_empty() {
        normalized.push('/');
    }
    Ok(normalized)
}

fn normalize_base_url(url: &str) -> Result<String, SpritesError> {
    let trimmed = url.trim().trim_end_matches('/');
    let valid_scheme = trimmed.starts_with("https://") || trimmed.starts_with("http://");
    let has_host = trimmed
        .split("://")
        .nth(1)
        .is_some_and(|rest| !rest.is_empty());
    if !valid_scheme || !has_host || trimmed.contains(['?', '#']) {
        return Err(SpritesError::Config(format!(
            "base_url \"{url}\" must be an http(s) URL without query or fragment, e.g. https://api.sprites.dev"
        )));
    }
    Ok(trimmed.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "https://api.sprites.dev";

    fn parse(config: Value) -> Result<SpritesConfig, SpritesError> {
        SpritesConfig::parse(&config, BASE)
    }

    #[test]
    fn defaults_apply_to_an_empty_config() {
        for config in [Value::Null, json!({})] {
            let parsed = parse(config).unwrap();
            assert_eq!(
                parsed,
                SpritesConfig {
                    sprite_name: None,
                    sprite_name_prefix: "roder".into(),
                    cleanup: Cleanup::DeleteOnClose,
                    working_dir: DEFAULT_WORKING_DIR.into(),
                    base_url: BASE.into(),
                    sandbox: SandboxPolicy::default(),
                }
            );
        }
    }

    #[test]
    fn reads_every_key() {
        let parsed = parse(json!({
            "sprite_name": "my-box",
            "sprite_name_prefix": "Team-",
            "cleanup": "delete-on-close",
            "working_dir": "/srv/app/",
            "base_url": "http://127.0.0.1:9/",
            "sandbox": {"network": "on", "env": {"pass": ["CARGO_HOME"]}},
        }))
        .unwrap();
        assert_eq!(parsed.sprite_name.as_deref(), Some("my-box"));
        assert_eq!(parsed.sprite_name_prefix, "team");
        assert_eq!(parsed.cleanup, Cleanup::DeleteOnClose);
        assert_eq!(parsed.working_dir, "/srv/app");
        assert_eq!(parsed.base_url, "http://127.0.0.1:9");
        assert!(parsed.sandbox.network.allows());
        assert_eq!(parsed.sandbox.env.pass, vec!["CARGO_HOME".to_string()]);
    }

    #[test]
    fn the_bound_workspace_is_the_root() {
        let bound = parse(json!({ "workspace": "/srv/app" })).unwrap();
        assert_eq!(bound.working_dir, "/srv/app");
        let same = parse(json!({ "workspace": "/srv/app/", "working_dir": "/srv//app" })).unwrap();
        assert_eq!(same.working_dir, "/srv/app");
        let err = parse(json!({ "workspace": "/srv/app", "working_dir": "/home/sprite/w" }))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("working_dir \"/home/sprite/w\" is not the workspace the thread is bound at (\"/srv/app\")"),
            "{err}"
        );
        assert!(err.contains("set working_dir to \"/srv/app\""), "{err}");
        let err = parse(json!({ "workspace": "relative" }))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("workspace \"relative\" must be an absolute path"),
            "{err}"
        );
        let err = parse(json!({ "workspace": 3 })).unwrap_err().to_string();
        assert!(err.contains("workspace must be a string"), "{err}");
    }

    #[test]
    fn a_named_sprite_is_kept_unless_asked() {
        assert_eq!(
            parse(json!({"sprite_name": "mine"})).unwrap().cleanup,
            Cleanup::Keep
        );
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = parse(json!({"cleanupp": "keep", "token": "x"}))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown keys \"cleanupp\", \"token\""),
            "{err}"
        );
        assert!(err.contains("known keys: sprite_name"), "{err}");
    }

    #[test]
    fn bad_values_are_named() {
        let cases = [
            (json!({"cleanup": "nuke"}), "\"nuke\""),
            (json!({"cleanup": 1}), "cleanup must be a string"),
            (json!({"working_dir": "work"}), "must be an absolute path"),
            (json!({"working_dir": "/a/../b"}), "'..'"),
            (json!({"base_url": "ftp://x"}), "base_url \"ftp://x\""),
            (json!({"base_url": "https://"}), "base_url"),
            (json!({"sprite_name": "Bad_Name"}), "'B' is not allowed"),
            (json!({"sprite_name": "-x"}), "must not start or end"),
            (
                json!({"sprite_name_prefix": "a b"}),
                "sprite_name_prefix \"a b\"",
            ),
            (json!({"sprite_name_prefix": "---"}), "1 to 54"),
            (json!("roder"), "must be a JSON object"),
            (
                json!({"sandbox": {"network": "maybe"}}),
                "sandbox is not a sandbox policy",
            ),
            (json!({"sandbox": "off"}), "sandbox is not a sandbox policy"),
        ];
        for (config, needle) in cases {
            let err = parse(config.clone()).unwrap_err().to_string();
            assert!(err.contains(needle), "{config}: {err}");
        }
    }

    #[test]
    fn generated_names_are_valid_and_distinct() {
        let config = parse(json!({"sprite_name_prefix": "roder-core-live"})).unwrap();
        let a = config.generate_name();
        let b = config.generate_name();
        assert_ne!(a, b);
        assert!(a.starts_with("roder-core-live-"));
        assert_eq!(a.len(), "roder-core-live-".len() + SUFFIX_LEN);
        validate_sprite_name(&a).unwrap();
        let long = parse(json!({"sprite_name_prefix": "p".repeat(54)})).unwrap();
        validate_sprite_name(&long.generate_name()).unwrap();
    }

    #[test]
    fn persisted_state_round_trips_without_secrets() {
        let persisted = PersistedSession {
            name: "roder-1234abcd".into(),
            working_dir: "/home/sprite/w".into(),
            base_url: BASE.into(),
            cleanup: Cleanup::DeleteOnClose,
            sandbox: parse_policy(Some(&json!({"network": "on", "limits": {"cpus": 1.5}})))
                .unwrap(),
        };
        let value = persisted.to_value();
        let mut keys: Vec<_> = value.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(
            keys,
            vec!["base_url", "cleanup", "name", "sandbox", "working_dir"]
        );
        assert_eq!(
            PersistedSession::from_state("ignored", &value, "http://other").unwrap(),
            persisted
        );
        let minimal = PersistedSession::from_state("roder-x", &Value::Null, BASE).unwrap();
        assert_eq!(minimal.name, "roder-x");
        assert_eq!(minimal.cleanup, Cleanup::Keep);
        assert_eq!(minimal.sandbox, SandboxPolicy::default());
        assert!(
            PersistedSession::from_state("roder-x", &json!({"sandbox": {"x": 1}}), BASE).is_err()
        );
        assert!(PersistedSession::from_state("../etc", &Value::Null, BASE).is_err());
    }
}
