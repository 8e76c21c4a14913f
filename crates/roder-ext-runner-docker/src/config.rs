//! The JSON a docker destination carries, parsed and checked.
//!
//! The config is persisted with the thread (it is the binding's destination
//! config), so it describes the container and never holds secrets. Unknown
//! fields are refused, so a typo (`"imgae"`) is an error instead of a
//! silently ignored setting.
//!
//! The runtime adds the thread's bound workspace under
//! [`WORKSPACE_CONFIG_KEY`]; it becomes the container's working root (see
//! [`DockerConfig::workdir`]), and a `workdir` that names another directory
//! is refused, because file tools and commands must share one root.

use std::collections::BTreeMap;
use std::path::{Component, Path};

use anyhow::bail;
use roder_api::runner_idle::ON_IDLE_CONFIG_KEY;
use roder_api::runner_workspace::WORKSPACE_CONFIG_KEY;
use roder_api::sandbox_policy::{
    BASE_ENV, KNOWN_CREDENTIAL_VARS, SANDBOX_CONFIG_KEY, SandboxMode, SandboxPolicy,
};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::labels::LABEL_PREFIX;

/// Where commands and relative file paths land when the config names none.
pub const DEFAULT_WORKDIR: &str = "/workspace";

/// Network of a container when the config names none: no network at all.
pub const DEFAULT_NETWORK: &str = "none";

/// Most pre-created containers one destination config may keep warm.
pub const MAX_POOL_SIZE: usize = 32;

const KNOWN_FIELDS: [&str; 18] = [
    "image",
    WORKSPACE_CONFIG_KEY,
    "workdir",
    "working_dir",
    "env",
    "cpus",
    "memory",
    "network",
    "ports",
    "mounts",
    "cleanup",
    "labels",
    "pool_size",
    SANDBOX_CONFIG_KEY,
    "user",
    "checkpoints",
    "executor",
    // The runtime's (`roder_api::runner_idle`); this provider ignores it.
    ON_IDLE_CONFIG_KEY,
];

/// What `close` does with the container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Cleanup {
    /// Remove the container when the session closes (the default).
    #[serde(rename = "delete-on-close")]
    DeleteOnClose,
    /// Leave it running; `gc` removes it once its thread is gone.
    #[serde(rename = "keep")]
    Keep,
}

impl Cleanup {
    pub fn as_str(self) -> &'static str {
        match self {
            Cleanup::DeleteOnClose => "delete-on-close",
            Cleanup::Keep => "keep",
        }
    }

    /// Parses the value of a container's cleanup label; anything unknown
    /// is treated as `delete-on-close`, the default.
    pub fn from_label(value: Option<&str>) -> Self {
        match value {
            Some("keep") => Cleanup::Keep,
            _ => Cleanup::DeleteOnClose,
        }
    }
}

/// Whether turns take workspace checkpoints (the `checkpoints` field).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Checkpoints {
    /// No checkpoints (the default): a commit per turn costs time and disk.
    #[default]
    Off,
    /// A container commit at the start of every turn (`"per_turn"`), so the
    /// thread can be rolled back or forked (`crate::checkpoint`).
    PerTurn,
}

/// How commands and files reach the container (the `executor` field).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ExecutorMode {
    /// Through the sandbox executor, started once per session, where it
    /// can run; plain execs and the archive API, with a note, where not.
    #[default]
    Auto,
    /// Always plain execs and the archive API (`"off"`).
    Off,
}

/// A host directory bind-mounted into the container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BindMount {
    /// Absolute host path; must exist (Docker refuses missing bind sources).
    pub source: String,
    /// Absolute path in the container.
    pub target: String,
    pub read_only: bool,
}

/// A parsed docker destination config.
///
/// Serialized (fields in declaration order, maps sorted) it is the input of
/// the warm-pool fingerprint, so two configs that would create the same
/// container share a pool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DockerConfig {
    /// Image reference; must be present locally (this runner never pulls).
    pub image: String,
    /// Absolute container path: the working directory of commands without a
    /// `cwd` and the base of relative file paths. It is the thread's bound
    /// workspace when the runtime passed one (tools send file paths relative
    /// to it and run commands in it), else `workdir`/`working_dir`, else
    /// [`DEFAULT_WORKDIR`]. Docker creates it when the container starts.
    pub workdir: String,
    /// Container environment, sorted by name: the config's `env`, then the
    /// policy's `env.pass` (from this process's environment, but never
    /// [`BASE_ENV`]: the image has its own `PATH` and `HOME`) and
    /// `env.set`. Never a [`KNOWN_CREDENTIAL_VARS`] name.
    pub env: Vec<(String, String)>,
    /// CPU limit in cores (`NanoCpus`).
    pub cpus: Option<f64>,
    /// Memory limit in bytes.
    pub memory: Option<i64>,
    /// `none`, `bridge`, `host` or a network name, as the config gives it;
    /// the container's network follows from it and the policy (see
    /// [`crate::sandbox::Confinement`]).
    pub network: Option<String>,
    /// Container TCP ports published on 127.0.0.1 at ephemeral host ports.
    pub ports: Vec<u16>,
    pub mounts: Vec<BindMount>,
    pub cleanup: Cleanup,
    /// Extra labels, sorted; `dev.roder.*` keys are reserved.
    pub labels: BTreeMap<String, String>,
    /// Pre-created containers kept warm for this config (0: no pool).
    pub pool_size: usize,
    /// The policy the container enforces: the config's `sandbox` (the
    /// runtime writes a thread's own there), else the default one (enforce,
    /// network off). Part of the fingerprint, so a pool never hands a
    /// container of one policy to a thread of another.
    pub sandbox: SandboxPolicy,
    /// `uid` or `uid:gid` (numeric) commands and the container run as;
    /// `None` keeps the image's user.
    pub user: Option<String>,
    /// Per-turn checkpoints. Not part of the fingerprint: it does not shape
    /// the container.
    #[serde(skip)]
    pub checkpoints: Checkpoints,
    /// Whether the session uses the sandbox executor. Not part of the
    /// fingerprint: the helper is copied in when a session starts.
    #[serde(skip)]
    pub executor: ExecutorMode,
}

impl DockerConfig {
    /// Parses a destination `config`; `source` names where it came from so
    /// errors point at the right place.
    pub fn from_json(value: &Value, source: &str) -> anyhow::Result<Self> {
        let object = match value {
            Value::Object(object) => object,
            Value::Null => bail!(
                "docker {source} is missing; expected an object like {{\"image\": \"roder-sandbox:latest\"}}"
            ),
            other => bail!(
                "docker {source} must be an object like {{\"image\": \"roder-sandbox:latest\"}}, got {other}"
            ),
        };
        if let Some(unknown) = object
            .keys()
            .find(|key| !KNOWN_FIELDS.contains(&key.as_str()))
        {
            bail!(
                "docker {source} has unknown field `{unknown}` (known fields: {})",
                KNOWN_FIELDS.join(", ")
            );
        }
        let fields = Fields { object, source };
        let sandbox = fields.sandbox()?;
        let mut env = fields.env()?;
        merge_policy_env(&mut env, &sandbox);
        let config = Self {
            image: fields.image()?,
            workdir: fields.workdir()?,
            env,
            cpus: fields.cpus()?,
            memory: fields.memory()?,
            network: fields.string("network")?,
            ports: fields.ports()?,
            mounts: fields.mounts()?,
            cleanup: fields.cleanup()?,
            labels: fields.labels()?,
            pool_size: fields.pool_size()?,
            user: fields.user()?,
            checkpoints: fields.checkpoints()?,
            executor: fields.executor()?,
            sandbox,
        };
        let enforce = config.sandbox.mode == SandboxMode::Enforce;
        if let Some(network) = config.network.as_deref()
            && network != DEFAULT_NETWORK
            && enforce
            && !config.sandbox.network.allows()
        {
            bail!(
                "docker {source} sets `network` to {network:?} but its sandbox policy has the network off; set `sandbox.network` to \"on\" (or remove `network`)"
            );
        }
        if enforce && config.workdir == "/" {
            bail!(
                "docker {source} puts the workspace at `/`, where the sandbox cannot bound writes; bind the thread at a directory such as /workspace"
            );
        }
        let network = crate::sandbox::Confinement::of(&config).network_mode;
        if !config.ports.is_empty() && network == "none" {
            bail!(
                "docker {source} publishes ports {:?} but the container's network is \"none\"; set `sandbox.network` to \"on\" and `network` to \"bridge\" (or another network) to publish ports",
                config.ports
            );
        }
        Ok(config)
    }

    /// The config of `image`-less containers of `policy`, for describing
    /// what such a policy becomes ([`crate::sandbox::protections`]).
    pub fn for_policy(sandbox: SandboxPolicy, user: Option<String>) -> Self {
        Self {
            image: String::new(),
            workdir: DEFAULT_WORKDIR.to_string(),
            env: Vec::new(),
            cpus: None,
            memory: None,
            network: None,
            ports: Vec::new(),
            mounts: Vec::new(),
            cleanup: Cleanup::DeleteOnClose,
            labels: BTreeMap::new(),
            pool_size: 0,
            sandbox,
            user,
            checkpoints: Checkpoints::Off,
            executor: ExecutorMode::Auto,
        }
    }

    /// A stable digest of everything that shapes the container, used as the
    /// warm-pool key and label value.
    pub fn fingerprint(&self) -> String {
        let canonical = serde_json::to_string(self).unwrap_or_default();
        format!("{:016x}", fnv1a(canonical.as_bytes()))
    }
}

/// Whether `name` holds a credential Roder knows of.
pub fn is_credential(name: &str) -> bool {
    KNOWN_CREDENTIAL_VARS.contains(&name)
}

/// Adds the policy's `env.pass` (values from this process, without
/// [`BASE_ENV`]) and `env.set` to `env`, through
/// [`SandboxPolicy::command_env`], so no credential gets in.
fn merge_policy_env(env: &mut Vec<(String, String)>, policy: &SandboxPolicy) {
    let credentials: Vec<String> = KNOWN_CREDENTIAL_VARS
        .iter()
        .map(|name| name.to_string())
        .collect();
    let host = std::env::vars_os().filter_map(|(name, value)| {
        let name = name.into_string().ok()?;
        let value = value.into_string().ok()?;
        (!BASE_ENV.contains(&name.as_str())).then_some((name, value))
    });
    let mut merged: BTreeMap<String, String> = env.drain(..).collect();
    merged.extend(policy.command_env(host, &credentials));
    env.extend(merged);
}

/// FNV-1a: tiny and stable across Rust releases (unlike `DefaultHasher`),
/// which matters because the fingerprint is stored in labels.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// Whether `path` is absolute and has no `.`/`..` components.
fn is_clean_absolute(path: &str) -> bool {
    let path = Path::new(path);
    path.is_absolute()
        && path
            .components()
            .all(|component| matches!(component, Component::RootDir | Component::Normal(_)))
}

struct Fields<'a> {
    object: &'a Map<String, Value>,
    source: &'a str,
}

impl Fields<'_> {
    fn get(&self, name: &str) -> Option<&Value> {
        self.object.get(name).filter(|value| !value.is_null())
    }

    fn string(&self, name: &str) -> anyhow::Result<Option<String>> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(value)) if value.is_empty() => {
                bail!("docker {} field `{name}` must not be empty", self.source)
            }
            Some(Value::String(value)) if value.contains('\0') => {
                bail!("docker {} field `{name}` contains a NUL byte", self.source)
            }
            Some(Value::String(value)) => Ok(Some(value.clone())),
            Some(other) => bail!(
                "docker {} field `{name}` must be a string, got {other}",
                self.source
            ),
        }
    }

    fn image(&self) -> anyhow::Result<String> {
        self.string("image")?.ok_or_else(|| {
            anyhow::anyhow!(
                "docker {} field `image` is required: an image present on this Docker host, e.g. \"roder-sandbox:latest\"",
                self.source
            )
        })
    }

    /// The bound workspace, else `workdir`, else `working_dir` (the name
    /// the runtime reads when a runtime-level destination auto-binds
    /// threads). Any two that are set must agree.
    fn workdir(&self) -> anyhow::Result<String> {
        let workspace = self.clean_dir(WORKSPACE_CONFIG_KEY)?;
        let workdir = self.clean_dir("workdir")?;
        let working_dir = self.clean_dir("working_dir")?;
        if let Some(workspace) = workspace {
            for (field, value) in [("workdir", &workdir), ("working_dir", &working_dir)] {
                if let Some(value) = value
                    && *value != workspace
                {
                    bail!(
                        "docker {} sets `{field}` to {value:?} but the thread is bound at workspace {workspace:?}; file tools and commands must use one root, so set `{field}` to {workspace:?} or remove it",
                        self.source
                    );
                }
            }
            return Ok(workspace);
        }
        match (workdir, working_dir) {
            (Some(a), Some(b)) if a != b => bail!(
                "docker {} fields `workdir` ({a:?}) and `working_dir` ({b:?}) disagree; set one",
                self.source
            ),
            (Some(chosen), _) | (None, Some(chosen)) => Ok(chosen),
            (None, None) => Ok(DEFAULT_WORKDIR.to_string()),
        }
    }

    /// A directory field: an absolute container path without `.` or `..`,
    /// returned without a trailing `/` (so `/src/` and `/src` agree).
    fn clean_dir(&self, name: &str) -> anyhow::Result<Option<String>> {
        let Some(path) = self.string(name)? else {
            return Ok(None);
        };
        if !is_clean_absolute(&path) {
            bail!(
                "docker {} field `{name}` must be an absolute container path without `.` or `..`, got {path:?}",
                self.source
            );
        }
        let trimmed = path.trim_end_matches('/');
        Ok(Some(
            if trimmed.is_empty() { "/" } else { trimmed }.to_string(),
        ))
    }

    fn env(&self) -> anyhow::Result<Vec<(String, String)>> {
        let env = match self.get("env") {
            None => return Ok(Vec::new()),
            Some(Value::Object(env)) => env,
            Some(other) => bail!(
                "docker {} field `env` must be an object of string values, got {other}",
                self.source
            ),
        };
        let mut pairs = Vec::with_capacity(env.len());
        for (key, value) in env {
            if key.is_empty() || key.contains('=') || key.contains('\0') {
                bail!(
                    "docker {} field `env` has an invalid variable name {key:?} (empty, or contains '=' or NUL)",
                    self.source
                );
            }
            if is_credential(key) {
                bail!(
                    "docker {} field `env.{key}` names a credential variable; commands never get a provider's credential, so remove it",
                    self.source
                );
            }
            let Value::String(value) = value else {
                bail!(
                    "docker {} field `env.{key}` must be a string, got {value}",
                    self.source
                );
            };
            if value.contains('\0') {
                bail!(
                    "docker {} field `env.{key}` contains a NUL byte",
                    self.source
                );
            }
            pairs.push((key.clone(), value.clone()));
        }
        pairs.sort();
        Ok(pairs)
    }

    fn cpus(&self) -> anyhow::Result<Option<f64>> {
        match self.get("cpus") {
            None => Ok(None),
            Some(Value::Number(number)) => match number.as_f64() {
                Some(cpus) if cpus > 0.0 && cpus <= 1024.0 => Ok(Some(cpus)),
                _ => bail!(
                    "docker {} field `cpus` must be a number of cores above 0, got {number}",
                    self.source
                ),
            },
            Some(other) => bail!(
                "docker {} field `cpus` must be a number of cores (e.g. 1.5), got {other}",
                self.source
            ),
        }
    }

    /// Bytes as an integer, or a string with a `b`, `k`, `m` or `g` suffix
    /// (powers of 1024, as `docker run --memory` reads them).
    fn memory(&self) -> anyhow::Result<Option<i64>> {
        let bad = |shown: &dyn std::fmt::Display| {
            anyhow::anyhow!(
                "docker {} field `memory` must be bytes (an integer) or a size like \"512m\" or \"2g\", got {shown}",
                self.source
            )
        };
        let bytes = match self.get("memory") {
            None => return Ok(None),
            Some(Value::Number(number)) => number.as_i64().ok_or_else(|| bad(number))?,
            Some(Value::String(text)) => {
                parse_size(text).ok_or_else(|| bad(&format!("{text:?}")))?
            }
            Some(other) => return Err(bad(other)),
        };
        if bytes <= 0 {
            return Err(bad(&bytes));
        }
        Ok(Some(bytes))
    }

    fn ports(&self) -> anyhow::Result<Vec<u16>> {
        let ports = match self.get("ports") {
            None => return Ok(Vec::new()),
            Some(Value::Array(ports)) => ports,
            Some(other) => bail!(
                "docker {} field `ports` must be an array of container TCP ports, got {other}",
                self.source
            ),
        };
        let mut parsed = Vec::with_capacity(ports.len());
        for port in ports {
            match port.as_u64().and_then(|port| u16::try_from(port).ok()) {
                Some(port) if port > 0 => parsed.push(port),
                _ => bail!(
                    "docker {} field `ports` holds {port}, which is not a TCP port (1-65535)",
                    self.source
                ),
            }
        }
        parsed.sort_unstable();
        parsed.dedup();
        Ok(parsed)
    }

    fn mounts(&self) -> anyhow::Result<Vec<BindMount>> {
        let mounts = match self.get("mounts") {
            None => return Ok(Vec::new()),
            Some(Value::Array(mounts)) => mounts,
            Some(other) => bail!(
                "docker {} field `mounts` must be an array of {{\"source\", \"target\", \"read_only\"}} objects, got {other}",
                self.source
            ),
        };
        let mut parsed = Vec::with_capacity(mounts.len());
        for (index, mount) in mounts.iter().enumerate() {
            let Value::Object(object) = mount else {
                bail!(
                    "docker {} field `mounts[{index}]` must be an object like {{\"source\": \"/host/dir\", \"target\": \"/data\", \"read_only\": true}}",
                    self.source
                );
            };
            if let Some(unknown) = object
                .keys()
                .find(|key| !["source", "target", "read_only"].contains(&key.as_str()))
            {
                bail!(
                    "docker {} field `mounts[{index}]` has unknown field `{unknown}` (known: source, target, read_only)",
                    self.source
                );
            }
            let path = |name: &str, side: &str| -> anyhow::Result<String> {
                match object.get(name) {
                    Some(Value::String(path)) if is_clean_absolute(path) => Ok(path.clone()),
                    Some(other) => bail!(
                        "docker {} field `mounts[{index}].{name}` must be an absolute {side} path without `.` or `..`, got {other}",
                        self.source
                    ),
                    None => bail!(
                        "docker {} field `mounts[{index}].{name}` is required (an absolute {side} path)",
                        self.source
                    ),
                }
            };
            let read_only = match object.get("read_only") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(read_only)) => *read_only,
                Some(other) => bail!(
                    "docker {} field `mounts[{index}].read_only` must be true or false, got {other}",
                    self.source
                ),
            };
            parsed.push(BindMount {
                source: path("source", "host")?,
                target: path("target", "container")?,
                read_only,
            });
        }
        Ok(parsed)
    }

    fn cleanup(&self) -> anyhow::Result<Cleanup> {
        match self.string("cleanup")?.as_deref() {
            None | Some("delete-on-close") => Ok(Cleanup::DeleteOnClose),
            Some("keep") => Ok(Cleanup::Keep),
            Some(other) => bail!(
                "docker {} field `cleanup` must be \"delete-on-close\" or \"keep\", got {other:?}",
                self.source
            ),
        }
    }

    fn labels(&self) -> anyhow::Result<BTreeMap<String, String>> {
        let labels = match self.get("labels") {
            None => return Ok(BTreeMap::new()),
            Some(Value::Object(labels)) => labels,
            Some(other) => bail!(
                "docker {} field `labels` must be an object of string values, got {other}",
                self.source
            ),
        };
        let mut parsed = BTreeMap::new();
        for (key, value) in labels {
            if key.is_empty() || key.starts_with(LABEL_PREFIX) {
                bail!(
                    "docker {} field `labels` may not set {key:?}: keys under `{LABEL_PREFIX}` are Roder's own",
                    self.source
                );
            }
            let Value::String(value) = value else {
                bail!(
                    "docker {} field `labels.{key}` must be a string, got {value}",
                    self.source
                );
            };
            parsed.insert(key.clone(), value.clone());
        }
        Ok(parsed)
    }

    /// The `sandbox` policy, else the default one (enforce, network off).
    ///
    /// Limits Docker reads as "unlimited" (a pids limit, memory or CPU of 0)
    /// are refused, so a policy can never turn a bound off by accident.
    fn sandbox(&self) -> anyhow::Result<SandboxPolicy> {
        let policy: SandboxPolicy = match self.get(SANDBOX_CONFIG_KEY) {
            None => return Ok(SandboxPolicy::default()),
            Some(value) => serde_json::from_value(value.clone()).map_err(|error| {
                anyhow::anyhow!(
                    "docker {} field `{SANDBOX_CONFIG_KEY}` is not a sandbox policy: {error}",
                    self.source
                )
            })?,
        };
        let limits = &policy.limits;
        for (name, value) in [
            ("max_processes", limits.max_processes),
            ("memory_mib", limits.memory_mib),
        ] {
            if value == Some(0) {
                bail!(
                    "docker {} field `{SANDBOX_CONFIG_KEY}.limits.{name}` is 0, which Docker reads as no limit; set at least 1 (or remove it for the default)",
                    self.source
                );
            }
        }
        if let Some(cpus) = limits.cpus
            && !(cpus.is_finite() && (0.01..=1024.0).contains(&cpus))
        {
            bail!(
                "docker {} field `{SANDBOX_CONFIG_KEY}.limits.cpus` must be a number of cores from 0.01, got {cpus}",
                self.source
            );
        }
        Ok(policy)
    }

    /// `uid` or `uid:gid`, numeric: the image needs no passwd entry, and
    /// the workspace volume is made that owner's.
    fn user(&self) -> anyhow::Result<Option<String>> {
        let Some(user) = self.string("user")? else {
            return Ok(None);
        };
        if parse_user(&user).is_none() {
            bail!(
                "docker {} field `user` must be a numeric `uid` or `uid:gid` (e.g. \"1000:1000\"), got {user:?}",
                self.source
            );
        }
        Ok(Some(user))
    }

    fn checkpoints(&self) -> anyhow::Result<Checkpoints> {
        match self.string("checkpoints")?.as_deref() {
            None | Some("off") => Ok(Checkpoints::Off),
            Some("per_turn") => Ok(Checkpoints::PerTurn),
            Some(other) => bail!(
                "docker {} field `checkpoints` must be \"per_turn\" or \"off\", got {other:?}",
                self.source
            ),
        }
    }

    fn executor(&self) -> anyhow::Result<ExecutorMode> {
        match self.string("executor")?.as_deref() {
            None | Some("auto") => Ok(ExecutorMode::Auto),
            Some("off") => Ok(ExecutorMode::Off),
            Some(other) => bail!(
                "docker {} field `executor` must be \"auto\" or \"off\", got {other:?}",
                self.source
            ),
        }
    }

    fn pool_size(&self) -> anyhow::Result<usize> {
        match self.get("pool_size") {
            None => Ok(0),
            Some(value) => match value.as_u64().and_then(|size| usize::try_from(size).ok()) {
                Some(size) if size <= MAX_POOL_SIZE => Ok(size),
                _ => bail!(
                    "docker {} field `pool_size` must be an integer from 0 to {MAX_POOL_SIZE}, got {value}",
                    self.source
                ),
            },
        }
    }
}

/// `"1000:1000"` → (1000, 1000); `"1000"` → (1000, 1000).
pub fn parse_user(user: &str) -> Option<(u32, u32)> {
    let number = |text: &str| {
        (!text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit()))
            .then(|| text.parse::<u32>().ok())
            .flatten()
    };
    match user.split_once(':') {
        Some((uid, gid)) => Some((number(uid)?, number(gid)?)),
        None => number(user).map(|uid| (uid, uid)),
    }
}

/// `"512m"` → 536870912. Suffixes are powers of 1024; none means bytes.
fn parse_size(text: &str) -> Option<i64> {
    let text = text.trim().to_ascii_lowercase();
    let text = text.strip_suffix('b').unwrap_or(&text);
    let (digits, unit) = match text.char_indices().last()? {
        (at, 'k') => (&text[..at], 1_i64 << 10),
        (at, 'm') => (&text[..at], 1 << 20),
        (at, 'g') => (&text[..at], 1 << 30),
        _ => (text, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    digits.parse::<i64>().ok()?.checked_mul(unit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(value: Value) -> anyhow::Result<DockerConfig> {
        DockerConfig::from_json(&value, "destination config")
    }

    fn error(value: Value) -> String {
        format!("{:#}", parse(value).unwrap_err())
    }

    #[test]
    fn checkpoints_are_off_unless_per_turn_and_unknown_values_are_refused() {
        let bare = parse(json!({"image": "img"})).unwrap();
        assert_eq!(bare.checkpoints, Checkpoints::Off);
        let on = parse(json!({"image": "img", "checkpoints": "per_turn"})).unwrap();
        assert_eq!(on.checkpoints, Checkpoints::PerTurn);
        assert_eq!(on.fingerprint(), bare.fingerprint(), "same container shape");
        let off = parse(json!({"image": "img", "checkpoints": "off"})).unwrap();
        assert_eq!(off.checkpoints, Checkpoints::Off);
        let bad = error(json!({"image": "img", "checkpoints": "every_turn"}));
        assert!(bad.contains("`checkpoints` must be \"per_turn\""), "{bad}");
        let not_text = error(json!({"image": "img", "checkpoints": true}));
        assert!(not_text.contains("checkpoints"), "{not_text}");
    }

    #[test]
    fn defaults_apply_to_a_bare_image() {
        let config = parse(json!({"image": "roder-sandbox:latest"})).unwrap();
        assert_eq!(config.image, "roder-sandbox:latest");
        assert_eq!(config.workdir, DEFAULT_WORKDIR);
        assert_eq!(config.network, None);
        assert_eq!(config.sandbox, SandboxPolicy::default());
        assert_eq!(config.cleanup, Cleanup::DeleteOnClose);
        assert_eq!(config.pool_size, 0);
        assert!(config.env.is_empty() && config.ports.is_empty() && config.mounts.is_empty());
        assert_eq!((config.cpus, config.memory), (None, None));
    }

    #[test]
    fn every_field_parses() {
        let config = parse(json!({
            "image": "img",
            "workdir": "/src/",
            "env": {"B": "2", "A": "1"},
            "cpus": 1.5,
            "memory": "512m",
            "network": "bridge",
            "sandbox": {"network": "on"},
            "user": "1000:1001",
            "ports": [8080, 3000, 8080],
            "mounts": [{"source": "/host", "target": "/data", "read_only": true}],
            "cleanup": "keep",
            "labels": {"team": "x"},
            "pool_size": 3
        }))
        .unwrap();
        assert_eq!(config.workdir, "/src");
        assert_eq!(
            config.env,
            vec![("A".into(), "1".into()), ("B".into(), "2".into())]
        );
        assert_eq!(config.cpus, Some(1.5));
        assert_eq!(config.memory, Some(512 << 20));
        assert_eq!(config.ports, vec![3000, 8080]);
        assert_eq!(
            config.mounts,
            vec![BindMount {
                source: "/host".into(),
                target: "/data".into(),
                read_only: true
            }]
        );
        assert_eq!(config.cleanup, Cleanup::Keep);
        assert_eq!(config.labels.get("team").map(String::as_str), Some("x"));
        assert_eq!(config.pool_size, 3);
        assert_eq!(config.user.as_deref(), Some("1000:1001"));
        assert!(config.sandbox.network.allows());
    }

    #[test]
    fn the_sandbox_policy_is_checked_and_shapes_the_fingerprint() {
        let message = error(json!({"image": "i", "sandbox": {"netwrok": "on"}}));
        assert!(
            message.contains("field `sandbox`") && message.contains("netwrok"),
            "{message}"
        );
        let message = error(json!({"image": "i", "network": "bridge"}));
        assert!(message.contains("sandbox.network"), "{message}");
        let off = parse(json!({"image": "i"})).unwrap();
        let on = parse(json!({"image": "i", "sandbox": {"network": "on"}})).unwrap();
        assert_ne!(off.fingerprint(), on.fingerprint());
        assert!(error(json!({"image": "i", "user": "nobody"})).contains("`user`"));
        for (limit, value) in [
            ("max_processes", json!(0)),
            ("memory_mib", json!(0)),
            ("cpus", json!(-1.0)),
            ("cpus", json!(0)),
        ] {
            let message = error(json!({"image": "i", "sandbox": {"limits": {limit: value}}}));
            assert!(
                message.contains(&format!("sandbox.limits.{limit}")),
                "{message}"
            );
        }
        assert!(error(json!({"image": "i", "workdir": "/"})).contains("bound writes"));
        assert!(parse(json!({"image": "i", "workdir": "/", "sandbox": {"mode": "none"}})).is_ok());
    }

    #[test]
    fn credentials_never_reach_the_container_environment() {
        let message = error(json!({"image": "i", "env": {"OPENAI_API_KEY": "sk"}}));
        assert!(
            message.contains("env.OPENAI_API_KEY") && message.contains("credential"),
            "{message}"
        );
        let config = parse(json!({
            "image": "i",
            "sandbox": {"env": {"pass": ["PATH", "GITHUB_TOKEN"], "set": {"MY_FLAG": "1", "GH_TOKEN": "x"}}}
        }))
        .unwrap();
        assert_eq!(config.env, vec![("MY_FLAG".to_string(), "1".to_string())]);
    }

    #[test]
    fn users_are_numeric() {
        assert_eq!(parse_user("1000"), Some((1000, 1000)));
        assert_eq!(parse_user("1000:50"), Some((1000, 50)));
        assert_eq!(parse_user("root"), None);
        assert_eq!(parse_user("1:"), None);
        assert_eq!(parse_user("99999999999"), None);
    }

    #[test]
    fn working_dir_is_an_alias_that_must_agree() {
        let config = parse(json!({"image": "i", "working_dir": "/w"})).unwrap();
        assert_eq!(config.workdir, "/w");
        assert!(
            error(json!({"image": "i", "workdir": "/a", "working_dir": "/b"})).contains("disagree")
        );
        assert!(error(json!({"image": "i", "workdir": "rel"})).contains("absolute"));
        assert!(error(json!({"image": "i", "workdir": "/a/../b"})).contains("absolute"));
    }

    #[test]
    fn the_bound_workspace_is_the_workdir() {
        let bound = parse(json!({"image": "i", "workspace": "/srv/app"})).unwrap();
        assert_eq!(bound.workdir, "/srv/app");
        let agreeing =
            parse(json!({"image": "i", "workspace": "/srv/app", "workdir": "/srv/app/"})).unwrap();
        assert_eq!(agreeing.workdir, "/srv/app");
        let also = parse(json!({"image": "i", "workspace": "/w", "working_dir": "/w"})).unwrap();
        assert_eq!(also.workdir, "/w");
        assert_ne!(bound.fingerprint(), also.fingerprint());
    }

    #[test]
    fn a_workdir_other_than_the_bound_workspace_is_refused_naming_both() {
        for field in ["workdir", "working_dir"] {
            let message =
                error(json!({"image": "i", "workspace": "/srv/app", field: "/workspace"}));
            assert!(message.contains("\"/srv/app\""), "{message}");
            assert!(message.contains("\"/workspace\""), "{message}");
            assert!(message.contains("bound at workspace"), "{message}");
            assert!(message.contains(&format!("`{field}`")), "{message}");
        }
        let both = error(
            json!({"image": "i", "workspace": "/srv/app", "working_dir": "/srv/app", "workdir": "/workspace"}),
        );
        assert!(both.contains("sets `workdir` to \"/workspace\""), "{both}");
        assert!(error(json!({"image": "i", "workspace": "srv"})).contains("`workspace`"));
        assert!(error(json!({"image": "i", "workspace": 3})).contains("`workspace`"));
    }

    #[test]
    fn bad_values_name_the_field() {
        assert!(error(Value::Null).contains("missing"));
        assert!(error(json!({})).contains("field `image` is required"));
        assert!(error(json!({"image": ""})).contains("`image` must not be empty"));
        assert!(error(json!({"image": "i", "imgae": 1})).contains("unknown field `imgae`"));
        assert!(error(json!({"image": "i", "cpus": 0})).contains("`cpus`"));
        assert!(error(json!({"image": "i", "memory": "lots"})).contains("`memory`"));
        assert!(error(json!({"image": "i", "memory": -1})).contains("`memory`"));
        assert!(error(json!({"image": "i", "ports": [70000]})).contains("`ports`"));
        assert!(error(json!({"image": "i", "ports": [80]})).contains("network"));
        assert!(error(json!({"image": "i", "cleanup": "never"})).contains("`cleanup`"));
        assert!(error(json!({"image": "i", "pool_size": 99})).contains("`pool_size`"));
        assert!(
            error(json!({"image": "i", "labels": {"dev.roder.thread": "x"}}))
                .contains("Roder's own")
        );
        assert!(
            error(json!({"image": "i", "mounts": [{"source": "rel", "target": "/d"}]}))
                .contains("mounts[0].source")
        );
        assert!(
            error(json!({"image": "i", "mounts": [{"source": "/h"}]}))
                .contains("mounts[0].target` is required")
        );
        assert!(error(json!({"image": "i", "env": {"A=B": "x"}})).contains("invalid variable"));
    }

    #[test]
    fn sizes_parse_like_docker_run() {
        assert_eq!(parse_size("1024"), Some(1024));
        assert_eq!(parse_size("4k"), Some(4096));
        assert_eq!(parse_size("2g"), Some(2 << 30));
        assert_eq!(parse_size("64MB"), Some(64 << 20));
        assert_eq!(parse_size("m"), None);
        assert_eq!(parse_size("1.5g"), None);
    }

    #[test]
    fn fingerprints_follow_the_container_shape() {
        let a = parse(json!({"image": "i", "env": {"A": "1", "B": "2"}})).unwrap();
        let b = parse(json!({"image": "i", "env": {"B": "2", "A": "1"}})).unwrap();
        let c = parse(json!({"image": "i", "env": {"A": "1"}})).unwrap();
        assert_eq!(a.fingerprint(), b.fingerprint());
        assert_ne!(a.fingerprint(), c.fingerprint());
        assert_eq!(a.fingerprint().len(), 16);
    }

    proptest::proptest! {
        /// A `user` and a `sandbox` from anywhere never panic the parser,
        /// and what parses confines with positive bounds.
        #[test]
        fn any_user_and_limits_parse_or_fail_cleanly(
            user in "[0-9:a-z]{0,12}",
            max_processes in proptest::option::of(proptest::num::u64::ANY),
            memory_mib in proptest::option::of(proptest::num::u64::ANY),
            disk_mib in proptest::option::of(proptest::num::u64::ANY),
            cpus in proptest::option::of(-10.0_f64..5000.0),
        ) {
            let _ = parse_user(&user);
            let config = json!({
                "image": "i",
                "user": user,
                "sandbox": {"limits": {
                    "max_processes": max_processes,
                    "memory_mib": memory_mib,
                    "disk_mib": disk_mib,
                    "cpus": cpus,
                }},
            });
            if let Ok(config) = parse(config) {
                let settings = crate::sandbox::Confinement::of(&config);
                proptest::prop_assert!(settings.pids_limit.is_some_and(|limit| limit > 0));
                proptest::prop_assert!(settings.memory.is_some_and(|bytes| bytes > 0));
                proptest::prop_assert!(settings.nano_cpus.is_some_and(|cpus| cpus > 0));
                proptest::prop_assert!(settings.workspace_bytes.is_some_and(|bytes| bytes > 0));
            }
        }
    }
}
