//! The sandbox policy as container settings.
//!
//! A container is already a namespace of its own; what the policy adds is
//! what Docker leaves open by default: root with Docker's default
//! capabilities, setuid escalation, unbounded processes, memory, CPU and
//! disk, and a network. With `mode = "enforce"` (the default, also when the
//! destination config carries no policy) a container gets:
//!
//! * `no-new-privileges` (the kernel's `NoNewPrivs` is 1 for every process);
//! * `CapDrop ALL` plus only [`BUILD_CAPABILITIES`];
//! * a pids limit, a memory limit (swap included) and a CPU limit;
//! * network `none`, unless the policy says `network = "on"`: then the
//!   config's `network`, or `host` when it names none, so commands reach
//!   what a host command reaches (127.0.0.1 included) — that is what "on"
//!   means on every backend;
//! * a read-only root filesystem, with the workspace and `/tmp` on
//!   size-limited tmpfs volumes (the local volume driver, `type=tmpfs`):
//!   nothing else is writable, and what is writable is bounded. The storage
//!   driver here (fuse-overlayfs, on ext4 without project quotas) has no
//!   `StorageOpt size=`, and a volume (unlike `HostConfig.Tmpfs`) is visible
//!   to the daemon, so the archive API still reads and writes files there.
//!
//! `mode = "none"` creates the container as Docker would by default (the
//! environment is still filtered).

use roder_api::sandbox_policy::{Protection, SandboxMode, SandboxPolicy};

use crate::config::DockerConfig;

/// Capabilities a confined container keeps: what package managers and
/// builds running as root use (chown and chmod of files they unpack,
/// writing files they do not own, dropping to a build user, signalling
/// their own children). Everything else (`NET_RAW`, `MKNOD`, `SYS_CHROOT`,
/// `SETFCAP`, `SETPCAP`, `NET_BIND_SERVICE`, `AUDIT_WRITE`, ...) is dropped.
pub const BUILD_CAPABILITIES: [&str; 7] = [
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
];

/// Processes (and threads) when the policy names no `max_processes`.
pub const DEFAULT_MAX_PROCESSES: u64 = 512;
/// Memory in MiB when neither the policy nor the config names one.
pub const DEFAULT_MEMORY_MIB: u64 = 2048;
/// Cores when neither the policy nor the config names any (capped at the
/// host's, since Docker refuses more).
pub const DEFAULT_CPUS: f64 = 2.0;
/// Workspace bound in MiB when the policy names no `disk_mib`.
pub const DEFAULT_DISK_MIB: u64 = 1024;
/// `/tmp` gets this share of the workspace bound (at least 1 MiB).
pub const TMP_SHARE: u64 = 4;
/// Where temporary files go; a tmpfs volume of its own when confined.
pub const TMP_DIR: &str = "/tmp";

/// The container settings one config's policy asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct Confinement {
    pub enforce: bool,
    pub network_mode: String,
    pub pids_limit: Option<i64>,
    pub memory: Option<i64>,
    pub nano_cpus: Option<i64>,
    /// Bytes of the workspace volume (`None`: the workspace is on the root
    /// filesystem, or on a bind mount the config names).
    pub workspace_bytes: Option<u64>,
    /// Bytes of the `/tmp` volume.
    pub tmp_bytes: Option<u64>,
    pub readonly_rootfs: bool,
}

impl Confinement {
    /// The settings for `config`. Where both the policy and the config
    /// bound a resource, the smaller bound wins.
    pub fn of(config: &DockerConfig) -> Self {
        let policy = &config.sandbox;
        let enforce = policy.mode == SandboxMode::Enforce;
        let network_mode = if enforce && !policy.network.allows() {
            "none".to_string()
        } else {
            config.network.clone().unwrap_or_else(|| {
                if enforce {
                    "host".to_string()
                } else {
                    "none".to_string()
                }
            })
        };
        let mib = |value: u64| i64::try_from(value.saturating_mul(1 << 20)).unwrap_or(i64::MAX);
        let memory = smaller(policy.limits.memory_mib.map(mib), config.memory)
            .or_else(|| enforce.then(|| mib(DEFAULT_MEMORY_MIB)));
        // Docker refuses a CPU limit above the host's cores: cap it there.
        let cpus = smaller_f64(policy.limits.cpus, config.cpus)
            .or_else(|| enforce.then_some(DEFAULT_CPUS))
            .map(|cpus| cpus.min(host_cpus()));
        let binds_at = |path: &str| config.mounts.iter().any(|mount| mount.target == path);
        let disk = policy
            .limits
            .disk_mib
            .unwrap_or(DEFAULT_DISK_MIB)
            .max(1)
            .saturating_mul(1 << 20);
        let on_volume = |path: &str| enforce && !binds_at(path);
        Self {
            enforce,
            network_mode,
            pids_limit: enforce.then(|| {
                i64::try_from(policy.limits.max_processes.unwrap_or(DEFAULT_MAX_PROCESSES))
                    .unwrap_or(i64::MAX)
            }),
            memory,
            nano_cpus: cpus.map(|cpus| (cpus * 1e9).round() as i64),
            workspace_bytes: on_volume(&config.workdir).then_some(disk),
            tmp_bytes: (on_volume(TMP_DIR) && config.workdir != TMP_DIR)
                .then(|| (disk / TMP_SHARE).max(1 << 20)),
            readonly_rootfs: enforce,
        }
    }
}

fn smaller(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn smaller_f64(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Cores this machine has (Docker refuses a CPU limit above them).
fn host_cpus() -> f64 {
    std::thread::available_parallelism()
        .map(|cores| cores.get() as f64)
        .unwrap_or(1.0)
}

/// What a docker container of `policy` (with `user`, if the config sets
/// one) is protected by on this machine, and what is not, and why. Every
/// entry holds for containers created from now on; a container created
/// before keeps the settings it was created with.
pub fn protections(policy: &SandboxPolicy, user: Option<&str>, daemon: bool) -> Vec<Protection> {
    let config = DockerConfig::for_policy(policy.clone(), user.map(str::to_string));
    let confinement = Confinement::of(&config);
    let on = |name: &str, detail: String| Protection {
        name: name.to_string(),
        active: daemon,
        detail: if daemon {
            detail
        } else {
            format!("{detail}; but no Docker daemon socket is reachable, so no container runs")
        },
    };
    let off = |name: &str, detail: &str| Protection {
        name: name.to_string(),
        active: false,
        detail: detail.to_string(),
    };
    let mib = |bytes: u64| bytes >> 20;
    let mut all = Vec::new();
    if !confinement.enforce {
        let why = "sandbox mode is \"none\": the container gets Docker's defaults";
        for name in [
            "filesystem writes",
            "disk bound",
            "network",
            "processes",
            "memory",
            "cpu",
            "no-new-privileges",
            "capabilities",
        ] {
            all.push(off(name, why));
        }
    } else {
        let mut writes = "read-only root filesystem; only the workspace, /tmp and read-write `mounts` are writable (file tools and commands alike)".to_string();
        if !policy.writable_roots.is_empty() {
            writes.push_str(
                "; the policy's `writable_roots` name host paths and are not applied in a container (bind them with `mounts`)",
            );
        }
        all.push(on("filesystem writes", writes));
        all.push(on(
            "disk bound",
            format!(
                "workspace on a {} MiB tmpfs volume, /tmp on a {} MiB one (`limits.disk_mib`; memory-backed, so it counts toward the memory limit, and lost when the container stops); the storage driver has no per-container quota",
                confinement.workspace_bytes.map(mib).unwrap_or(0),
                confinement.tmp_bytes.map(mib).unwrap_or(0),
            ),
        ));
        if policy.network.allows() {
            all.push(off(
                "network",
                "sandbox network is \"on\": the container uses the config's `network`, else the host's network (127.0.0.1 included)",
            ));
        } else {
            all.push(on(
                "network",
                "network mode none: no interface but loopback, no connection leaves the container"
                    .to_string(),
            ));
        }
        all.push(on(
            "processes",
            format!("pids limit {}", confinement.pids_limit.unwrap_or_default()),
        ));
        all.push(on(
            "memory",
            format!(
                "{} MiB, swap included",
                confinement.memory.unwrap_or_default() >> 20
            ),
        ));
        all.push(on(
            "cpu",
            format!(
                "{:.2} cores",
                confinement.nano_cpus.unwrap_or_default() as f64 / 1e9
            ),
        ));
        all.push(on(
            "no-new-privileges",
            "security option no-new-privileges: setuid binaries do not raise privileges"
                .to_string(),
        ));
        all.push(on(
            "capabilities",
            format!("all dropped but {}", BUILD_CAPABILITIES.join(", ")),
        ));
    }
    all.push(match user {
        Some(user) => on("user", format!("commands run as user {user}")),
        None => off(
            "user",
            "commands run as the image's user (root in roder-sandbox); set the destination config's `user` (e.g. \"1000:1000\") to run as another",
        ),
    });
    all.push(off(
        ".git/hooks",
        "not protected inside the container: the container is the workspace's only user, and nothing on the host runs its hooks",
    ));
    all.push(on(
        "environment",
        "the container and its commands get the image's environment, the config's `env` and the policy's `env.pass`/`env.set`; never a known credential variable".to_string(),
    ));
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use roder_api::sandbox_policy::NetworkAccess;
    use serde_json::json;

    fn confinement(config: serde_json::Value) -> Confinement {
        Confinement::of(&DockerConfig::from_json(&config, "config").unwrap())
    }

    #[test]
    fn no_policy_means_the_default_policy_enforced() {
        let settings = confinement(json!({"image": "i"}));
        assert!(settings.enforce && settings.readonly_rootfs);
        assert_eq!(settings.network_mode, "none");
        assert_eq!(settings.pids_limit, Some(DEFAULT_MAX_PROCESSES as i64));
        assert_eq!(settings.memory, Some((DEFAULT_MEMORY_MIB << 20) as i64));
        assert!(settings.nano_cpus.is_some_and(|cpus| cpus > 0));
        assert_eq!(settings.workspace_bytes, Some(DEFAULT_DISK_MIB << 20));
        assert_eq!(
            settings.tmp_bytes,
            Some((DEFAULT_DISK_MIB << 20) / TMP_SHARE)
        );
    }

    #[test]
    fn the_policy_sets_limits_and_the_smaller_bound_wins() {
        let settings = confinement(json!({
            "image": "i",
            "memory": "256m",
            "sandbox": {"limits": {"max_processes": 32, "memory_mib": 512, "cpus": 0.5, "disk_mib": 8}}
        }));
        assert_eq!(settings.pids_limit, Some(32));
        assert_eq!(settings.memory, Some(256 << 20));
        assert_eq!(settings.nano_cpus, Some(500_000_000));
        assert_eq!(settings.workspace_bytes, Some(8 << 20));
        assert_eq!(settings.tmp_bytes, Some(2 << 20));
    }

    #[test]
    fn network_on_means_the_hosts_network_unless_the_config_names_one() {
        let on = json!({"network": "on"});
        assert_eq!(
            confinement(json!({"image": "i", "sandbox": on})).network_mode,
            "host"
        );
        assert_eq!(
            confinement(json!({"image": "i", "network": "bridge", "sandbox": on})).network_mode,
            "bridge"
        );
    }

    #[test]
    fn mode_none_is_dockers_defaults() {
        let settings = confinement(json!({"image": "i", "sandbox": {"mode": "none"}}));
        assert!(!settings.enforce && !settings.readonly_rootfs);
        assert_eq!(settings.network_mode, "none");
        assert_eq!(
            (
                settings.pids_limit,
                settings.memory,
                settings.workspace_bytes
            ),
            (None, None, None)
        );
    }

    #[test]
    fn a_bind_mounted_workspace_is_not_put_on_a_volume() {
        let settings = confinement(json!({
            "image": "i",
            "workdir": "/w",
            "mounts": [{"source": "/h", "target": "/w"}]
        }));
        assert_eq!(settings.workspace_bytes, None);
        assert!(settings.tmp_bytes.is_some());
    }

    #[test]
    fn protections_name_every_kind_and_say_why_not() {
        let mut policy = SandboxPolicy::default();
        let listed = protections(&policy, None, true);
        let names: Vec<&str> = listed.iter().map(|p| p.name.as_str()).collect();
        for name in [
            "filesystem writes",
            "disk bound",
            "network",
            "processes",
            "memory",
            "cpu",
            "no-new-privileges",
            "capabilities",
            "user",
            ".git/hooks",
            "environment",
        ] {
            assert!(names.contains(&name), "{name} missing from {names:?}");
        }
        let active =
            |list: &[Protection], name: &str| list.iter().any(|p| p.name == name && p.active);
        assert!(active(&listed, "network") && !active(&listed, "user"));
        policy.network = NetworkAccess::On;
        assert!(!active(
            &protections(&policy, Some("1000"), true),
            "network"
        ));
        assert!(active(&protections(&policy, Some("1000"), true), "user"));
        let no_daemon = protections(&SandboxPolicy::default(), None, false);
        assert!(no_daemon.iter().all(|p| !p.active));
        assert!(no_daemon[0].detail.contains("no Docker daemon"));
    }

    #[test]
    fn a_destinations_protections_follow_its_own_policy_and_user() {
        let provider = crate::DockerRunnerProvider::default();
        let destination = roder_api::remote_runner::RunnerDestination {
            id: "d".to_string(),
            provider_id: crate::PROVIDER_ID.to_string(),
            config: json!({"image": "i", "user": "1000", "sandbox": {"limits": {"max_processes": 7}}}),
            default_manifest: Default::default(),
        };
        let listed = provider.destination_protections(&destination).unwrap();
        let detail = |name: &str| {
            listed
                .iter()
                .find(|p| p.name == name)
                .map(|p| p.detail.clone())
                .unwrap_or_default()
        };
        assert!(detail("processes").contains("pids limit 7"), "{listed:?}");
        assert!(detail("user").contains("1000"), "{listed:?}");
        let policy = SandboxPolicy {
            writable_roots: vec!["/opt/cache".into()],
            ..SandboxPolicy::default()
        };
        let writes = protections(&policy, None, true);
        assert!(writes[0].detail.contains("not applied"), "{writes:?}");
        let bad = roder_api::remote_runner::RunnerDestination {
            config: json!({"image": "i", "sandbox": {"mode": "sometimes"}}),
            ..destination
        };
        assert!(provider.destination_protections(&bad).is_err());
    }
}
