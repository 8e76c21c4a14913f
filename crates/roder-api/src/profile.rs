//! A thread's resolved agent profile, as persisted with the thread.
//!
//! A profile (one file: instructions, model, tools allowed and denied, mode,
//! sandbox narrowing, runner, MCP servers, limits) is resolved once, when a
//! thread is created, by `roder-profiles`. What it resolved to is this
//! snapshot, stored in the thread's metadata before its first turn. Later
//! turns, resumes and other processes read the snapshot and never resolve or
//! fetch the profile again, so editing the file or losing the archive server
//! changes nothing for a thread that already started.
//!
//! Nothing here can hold a secret: MCP servers name the environment
//! variables they read (`env_vars`, `bearer_token_env_var`), never values.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::inference::ReasoningEffort;
use crate::policy_mode::PolicyMode;

/// Everything a resolved profile says, plus where it came from.
///
/// ```
/// use roder_api::profile::{ProfileSnapshot, ProfileSource};
///
/// let snapshot = ProfileSnapshot {
///     selector: "reviewer".into(),
///     canonical: "reviewer".into(),
///     source: ProfileSource::File { path: "/repo/.roder/profiles/reviewer.md".into() },
///     name: "reviewer".into(),
///     instructions: "Review the diff.".into(),
///     disallowed_tools: vec!["write_file".into()],
///     ..ProfileSnapshot::default()
/// };
/// let json = serde_json::to_string(&snapshot).unwrap();
/// let back: ProfileSnapshot = serde_json::from_str(&json).unwrap();
/// assert_eq!(back, snapshot);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileSnapshot {
    /// The selector as the caller gave it (`""` for the runtime default).
    pub selector: String,
    /// The selector after normalisation (`builtin:plan`, `reviewer`, a path).
    pub canonical: String,
    pub source: ProfileSource,
    /// `sha256:<hex>` of the profile file's bytes (and its parents', in
    /// order), so two threads can tell whether they ran the same profile.
    #[serde(default)]
    pub content_digest: String,
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The whole instructions text (the file's body or `instructions`).
    #[serde(default)]
    pub instructions: String,
    /// `provider/model`; `None` keeps the runtime's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// When non-empty, the only tools offered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Deny rules (tool names, `tool:`, `exec:`, `write:`); deny wins over
    /// `tools` and every mode.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disallowed_tools: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_mode: Option<PolicyMode>,
    #[serde(default, skip_serializing_if = "ProfileSandbox::is_empty")]
    pub sandbox: ProfileSandbox,
    /// A named runner (`[runners.NAME]` in `config.toml`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mcp_servers: BTreeMap<String, ProfileMcpServer>,
    #[serde(default, skip_serializing_if = "ProfileLimits::is_empty")]
    pub limits: ProfileLimits,
    /// Each field set by the profile chain, with the place it came from
    /// (`builtin:default`, a file path, `archive:ID@sha256:..:PATH`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub origins: BTreeMap<String, String>,
    /// Fields a caller overrode at creation (`--model`), as recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<ProfileOverride>,
}

/// Where the profile was read from.
///
/// ```
/// use roder_api::profile::ProfileSource;
///
/// let file = ProfileSource::File { path: "/home/me/.roder/profiles/r.md".into() };
/// assert_eq!(serde_json::to_value(&file).unwrap()["kind"], "file");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ProfileSource {
    /// Compiled into Roder.
    #[default]
    Builtin,
    /// A file on this host.
    File { path: String },
    /// A verified profile archive.
    Archive {
        id: String,
        digest: String,
        size: u64,
        /// The member the profile came from.
        entrypoint: String,
        /// Where it was fetched from, without query or credentials; `None`
        /// for an archive embedded in the request.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
    },
}

/// How a profile narrows the configured sandbox policy. It may only take
/// away: a profile cannot turn the network on when the configuration has it
/// off.
///
/// ```
/// use roder_api::profile::ProfileSandbox;
///
/// let offline: ProfileSandbox = serde_json::from_str(r#"{"network": false}"#).unwrap();
/// assert_eq!(offline.network, Some(false));
/// assert!(ProfileSandbox::default().is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileSandbox {
    /// `Some(false)`: commands get no network, whatever the configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<bool>,
}

impl ProfileSandbox {
    pub fn is_empty(&self) -> bool {
        self.network.is_none()
    }
}

/// Bounds on a thread's turns.
///
/// ```
/// use roder_api::profile::ProfileLimits;
///
/// let limits: ProfileLimits = serde_json::from_str(r#"{"max_tool_calls": 20}"#).unwrap();
/// assert_eq!(limits.max_tool_calls, Some(20));
/// assert!(serde_json::from_str::<ProfileLimits>(r#"{"max_turns": 3}"#).is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileLimits {
    /// Seconds per turn (the smaller of this and the runtime's applies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_deadline_s: Option<u64>,
    /// Tool calls per turn; calls past it get an error result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_calls: Option<u32>,
}

impl ProfileLimits {
    pub fn is_empty(&self) -> bool {
        self.turn_deadline_s.is_none() && self.max_tool_calls.is_none()
    }
}

/// An MCP server the profile brings, shaped like `config.toml`'s
/// `[mcp_servers.NAME]`. Secrets only by the name of the variable that holds
/// them.
///
/// ```
/// use roder_api::profile::ProfileMcpServer;
///
/// let docs: ProfileMcpServer = serde_json::from_str(
///     r#"{"url": "https://mcp.example/docs", "bearer_token_env_var": "DOCS_TOKEN"}"#,
/// ).unwrap();
/// assert_eq!(docs.bearer_token_env_var.as_deref(), Some("DOCS_TOKEN"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileMcpServer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Names of host variables passed to the server (never values).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_vars: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The variable holding a bearer token for `url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token_env_var: Option<String>,
}

impl ProfileSnapshot {
    /// `declared` (a client's `mcpServers` declaration for the thread, the
    /// shape `thread/start` takes) with this profile's MCP servers added:
    /// what a server that starts only a thread's declared servers (the app
    /// server, `roder acp`) starts for a thread running as this profile. A
    /// name both declare is refused: neither is dropped silently.
    ///
    /// ```
    /// use roder_api::profile::{ProfileMcpServer, ProfileSnapshot};
    ///
    /// let profile = ProfileSnapshot {
    ///     canonical: "timekeeper".into(),
    ///     mcp_servers: [("time".to_string(), ProfileMcpServer {
    ///         command: Some("mcp-server-time".into()),
    ///         ..ProfileMcpServer::default()
    ///     })]
    ///     .into(),
    ///     ..ProfileSnapshot::default()
    /// };
    /// let both = profile.mcp_declaration(Some(serde_json::json!({"docs": {"url": "http://127.0.0.1:1/mcp"}}))).unwrap().unwrap();
    /// assert_eq!(both["time"]["command"], "mcp-server-time");
    /// assert!(profile.mcp_declaration(Some(serde_json::json!({"time": {"url": "x"}}))).is_err());
    /// ```
    pub fn mcp_declaration(
        &self,
        declared: Option<serde_json::Value>,
    ) -> Result<Option<serde_json::Value>, String> {
        use serde_json::Value;
        if self.mcp_servers.is_empty() {
            return Ok(declared);
        }
        let mut servers = match declared {
            None => serde_json::Map::new(),
            Some(Value::Object(servers)) => servers,
            Some(_) => return Err("mcpServers must be an object".into()),
        };
        for (name, server) in &self.mcp_servers {
            if servers.contains_key(name) {
                return Err(format!(
                    "profile {} declares MCP server {name:?}, which the client declares too",
                    self.canonical
                ));
            }
            let mut entry = serde_json::Map::new();
            if let Some(command) = &server.command {
                entry.insert("command".into(), Value::from(command.clone()));
                entry.insert("args".into(), Value::from(server.args.clone()));
            }
            if let Some(url) = &server.url {
                entry.insert("url".into(), Value::from(url.clone()));
            }
            if !server.env_vars.is_empty() {
                entry.insert("envVars".into(), Value::from(server.env_vars.clone()));
            }
            if let Some(variable) = &server.bearer_token_env_var {
                entry.insert("bearerTokenEnvVar".into(), Value::from(variable.clone()));
            }
            servers.insert(name.clone(), Value::Object(entry));
        }
        Ok(Some(Value::Object(servers)))
    }
}

/// A field a caller set over the profile's value.
///
/// ```
/// use roder_api::profile::ProfileOverride;
///
/// let model = ProfileOverride {
///     field: "model".into(),
///     profile_value: Some("anthropic/claude-sonnet-4-5".into()),
///     value: "openai/gpt-5".into(),
/// };
/// assert_eq!(serde_json::to_value(&model).unwrap()["field"], "model");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileOverride {
    pub field: String,
    /// The profile's value (`None`: the profile did not set it).
    #[serde(default)]
    pub profile_value: Option<String>,
    pub value: String,
}

/// What a client asks for when it starts a thread with a profile.
///
/// ```
/// use roder_api::profile::ProfileRequestSpec;
///
/// let plan = ProfileRequestSpec { selector: "builtin:plan".into(), archive: None };
/// assert_eq!(serde_json::to_string(&plan).unwrap(), r#"{"selector":"builtin:plan"}"#);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileRequestSpec {
    /// `""` (the runtime default), `builtin:NAME`, a name or a path.
    #[serde(default)]
    pub selector: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<ProfileArchiveSpec>,
}

/// A profile archive: fetched from `url`, or sent inline as base64 `data`;
/// either way checked against `digest` (`sha256:<hex>`) and `size`.
///
/// ```
/// use roder_api::profile::ProfileArchiveSpec;
///
/// let fetched: ProfileArchiveSpec = serde_json::from_str(
///     r#"{"url": "https://example.com/a.tar", "digest": "sha256:00", "size": 10}"#,
/// ).unwrap();
/// assert!(fetched.data.is_none() && fetched.id.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileArchiveSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// The archive's id (`roder-bundle.toml`); empty: whatever it says.
    #[serde(default)]
    pub id: String,
    pub digest: String,
    pub size: u64,
}

/// Resolves profiles for a runtime (installed with
/// `ExtensionRegistryBuilder::profile_resolver`; `roder-profiles` is one).
///
/// ```
/// use roder_api::profile::{ProfileRequestSpec, ProfileResolver, ProfileSnapshot};
///
/// struct Fixed;
/// #[async_trait::async_trait]
/// impl ProfileResolver for Fixed {
///     async fn resolve(&self, request: &ProfileRequestSpec, _workspace: Option<&str>) -> anyhow::Result<ProfileSnapshot> {
///         Ok(ProfileSnapshot { selector: request.selector.clone(), ..ProfileSnapshot::default() })
///     }
/// }
/// ```
#[async_trait::async_trait]
pub trait ProfileResolver: Send + Sync + 'static {
    /// The snapshot `request` resolves to for a thread whose local
    /// workspace is `workspace` (its `.roder/profiles` is searched).
    async fn resolve(
        &self,
        request: &ProfileRequestSpec,
        workspace: Option<&str>,
    ) -> anyhow::Result<ProfileSnapshot>;
}
