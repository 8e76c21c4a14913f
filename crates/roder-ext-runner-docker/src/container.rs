//! Creating, starting, finding and removing session containers.

use std::collections::HashMap;

use anyhow::bail;
use bollard::Docker;
use bollard::models::{
    ContainerCreateBody, ContainerInspectResponse, ContainerStateStatusEnum, HostConfig, Mount,
    MountType, MountVolumeOptions, MountVolumeOptionsDriverConfig, PortBinding,
};
use bollard::query_parameters::{CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder};

use crate::client::{is_not_found, message_of};
use crate::config::{DockerConfig, parse_user};
use crate::labels;
use crate::sandbox::{BUILD_CAPABILITIES, Confinement, TMP_DIR};

/// The container's main process: a shell that sleeps until it is stopped
/// (exec'd commands are what do the work). Handling TERM makes `docker
/// stop` quick; waiting on a background `sleep` lets the shell reap orphans
/// that killed commands leave behind.
const KEEPALIVE: &str = "trap 'exit 0' TERM INT; while :; do sleep 86400 & wait $!; done";

/// The create request for a container of `config` with `labels`.
pub fn create_body(config: &DockerConfig, labels: HashMap<String, String>) -> ContainerCreateBody {
    let port_key = |port: &u16| format!("{port}/tcp");
    let port_bindings = config
        .ports
        .iter()
        .map(|port| {
            (
                port_key(port),
                Some(vec![PortBinding {
                    host_ip: Some("127.0.0.1".to_string()),
                    host_port: Some(String::new()),
                }]),
            )
        })
        .collect::<HashMap<_, _>>();
    let confinement = Confinement::of(config);
    let mut mounts = config
        .mounts
        .iter()
        .map(|mount| Mount {
            source: Some(mount.source.clone()),
            target: Some(mount.target.clone()),
            typ: Some(MountType::BIND),
            read_only: Some(mount.read_only),
            ..Default::default()
        })
        .collect::<Vec<_>>();
    let owner = config.user.as_deref().and_then(parse_user);
    if let Some(bytes) = confinement.workspace_bytes {
        mounts.push(tmpfs_volume(&config.workdir, bytes, "0755", owner));
    }
    if let Some(bytes) = confinement.tmp_bytes {
        mounts.push(tmpfs_volume(TMP_DIR, bytes, "1777", None));
    }
    let enforce = confinement.enforce;
    let host_config = HostConfig {
        network_mode: Some(confinement.network_mode.clone()),
        nano_cpus: confinement.nano_cpus,
        memory: confinement.memory,
        // Swap included: the memory limit is the whole bound.
        memory_swap: confinement.memory.filter(|_| enforce),
        pids_limit: confinement.pids_limit,
        readonly_rootfs: Some(confinement.readonly_rootfs),
        security_opt: enforce.then(|| vec!["no-new-privileges".to_string()]),
        cap_drop: enforce.then(|| vec!["ALL".to_string()]),
        cap_add: enforce.then(|| {
            BUILD_CAPABILITIES
                .iter()
                .map(|cap| cap.to_string())
                .collect()
        }),
        port_bindings: (!port_bindings.is_empty()).then_some(port_bindings),
        mounts: (!mounts.is_empty()).then_some(mounts),
        ..Default::default()
    };
    ContainerCreateBody {
        image: Some(config.image.clone()),
        entrypoint: Some(vec![
            "/bin/sh".to_string(),
            "-c".to_string(),
            KEEPALIVE.to_string(),
        ]),
        cmd: Some(Vec::new()),
        working_dir: Some(config.workdir.clone()),
        env: Some(
            config
                .env
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect(),
        ),
        labels: Some(labels),
        user: config.user.clone(),
        exposed_ports: (!config.ports.is_empty())
            .then(|| config.ports.iter().map(port_key).collect()),
        host_config: Some(host_config),
        ..Default::default()
    }
}

/// An anonymous volume at `target`: a tmpfs of `bytes` through the local
/// driver. Unlike `HostConfig.Tmpfs` (mounted only in the container's own
/// mount namespace) the daemon mounts a volume where the archive API sees
/// it, so file reads and writes reach it; it is removed with the container.
fn tmpfs_volume(target: &str, bytes: u64, mode: &str, owner: Option<(u32, u32)>) -> Mount {
    let mut options = format!("size={bytes},mode={mode}");
    if let Some((uid, gid)) = owner {
        options.push_str(&format!(",uid={uid},gid={gid}"));
    }
    Mount {
        target: Some(target.to_string()),
        typ: Some(MountType::VOLUME),
        volume_options: Some(MountVolumeOptions {
            no_copy: Some(true),
            driver_config: Some(MountVolumeOptionsDriverConfig {
                name: Some("local".to_string()),
                options: Some(HashMap::from([
                    ("type".to_string(), "tmpfs".to_string()),
                    ("device".to_string(), "tmpfs".to_string()),
                    ("o".to_string(), options),
                ])),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The container paths of `inspect`'s size-bounded (tmpfs) volumes: what
/// is lost when the container stops.
pub fn tmpfs_volumes(inspect: &ContainerInspectResponse) -> Vec<String> {
    inspect
        .host_config
        .as_ref()
        .and_then(|host| host.mounts.as_ref())
        .into_iter()
        .flatten()
        .filter(|mount| {
            mount
                .volume_options
                .as_ref()
                .and_then(|options| options.driver_config.as_ref())
                .and_then(|driver| driver.options.as_ref())
                .and_then(|options| options.get("type"))
                .is_some_and(|kind| kind == "tmpfs")
        })
        .filter_map(|mount| mount.target.clone())
        .collect()
}

/// Where a confined container may write: its read-write mounts, or `None`
/// when its root filesystem is writable (everything is).
pub fn writable_paths(inspect: &ContainerInspectResponse) -> Option<Vec<String>> {
    let readonly = inspect
        .host_config
        .as_ref()
        .and_then(|host| host.readonly_rootfs)
        .unwrap_or(false);
    if !readonly {
        return None;
    }
    Some(
        inspect
            .mounts
            .iter()
            .flatten()
            .filter(|mount| mount.rw == Some(true))
            .filter_map(|mount| mount.destination.clone())
            .collect(),
    )
}

/// The write rules of a container made from `config` (what
/// [`writable_paths`] reads back from a created one).
pub fn write_rules(config: &DockerConfig) -> crate::archive::WriteRules {
    let confinement = Confinement::of(config);
    let writable = confinement.readonly_rootfs.then(|| {
        let mut writable: Vec<String> = config
            .mounts
            .iter()
            .filter(|mount| !mount.read_only)
            .map(|mount| mount.target.clone())
            .collect();
        if confinement.workspace_bytes.is_some() {
            writable.push(config.workdir.clone());
        }
        if confinement.tmp_bytes.is_some() {
            writable.push(TMP_DIR.to_string());
        }
        writable
    });
    crate::archive::WriteRules {
        writable,
        owner: config.user.as_deref().and_then(parse_user),
    }
}

/// The labels every container of `config` carries (Roder's and the user's),
/// with `home` (the provider's home id) under [`labels::HOME`].
pub fn base_labels(config: &DockerConfig, home: Option<&str>) -> HashMap<String, String> {
    let mut all: HashMap<String, String> = config
        .labels
        .iter()
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    all.insert(labels::MANAGED.to_string(), "true".to_string());
    all.insert(
        labels::CLEANUP.to_string(),
        config.cleanup.as_str().to_string(),
    );
    if let Some(home) = home {
        all.insert(labels::HOME.to_string(), home.to_string());
    }
    // Blank what an image committed from another container could pass on.
    for key in [
        labels::DESTINATION,
        labels::THREAD,
        labels::POOL,
        labels::POOL_OWNER,
        labels::HOME,
    ] {
        all.entry(key.to_string()).or_default();
    }
    all
}

/// Creates and starts a container; returns its full id. A container that
/// was created but could not start is removed again.
pub async fn create_and_start(
    docker: &Docker,
    config: &DockerConfig,
    labels: HashMap<String, String>,
    name: &str,
) -> anyhow::Result<String> {
    let options = CreateContainerOptionsBuilder::default().name(name).build();
    let created = docker
        .create_container(Some(options), create_body(config, labels))
        .await
        .map_err(|error| {
            if is_not_found(&error) && message_of(&error).to_lowercase().contains("image") {
                missing_image(&config.image)
            } else {
                anyhow::anyhow!(
                    "cannot create a container of image {:?}: {}",
                    config.image,
                    message_of(&error)
                )
            }
        })?;
    if let Err(error) = docker.start_container(&created.id, None).await {
        remove(docker, &created.id).await.ok();
        bail!(
            "cannot start a container of image {:?}: {}",
            config.image,
            message_of(&error)
        );
    }
    if let Err(error) = restore_snapshot_workspace(docker, config, &created.id).await {
        remove(docker, &created.id).await.ok();
        return Err(error);
    }
    Ok(created.id)
}

/// How long copying a snapshot's workspace into a new container may take.
const RESTORE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// Copies the workspace a snapshot image carries (see
/// [`labels::SNAPSHOT_WORKSPACE`]) into the new container's workspace.
async fn restore_snapshot_workspace(
    docker: &Docker,
    config: &DockerConfig,
    container: &str,
) -> anyhow::Result<()> {
    let image = docker.inspect_image(&config.image).await.map_err(|error| {
        anyhow::anyhow!(
            "cannot inspect docker image {:?}: {}",
            config.image,
            message_of(&error)
        )
    })?;
    let saved = image
        .config
        .and_then(|image| image.labels)
        .and_then(|labels| labels.get(labels::SNAPSHOT_WORKSPACE).cloned())
        .filter(|saved| saved.starts_with('/'));
    let Some(saved) = saved else {
        return Ok(());
    };
    let request = crate::exec::ExecRequest {
        command_id: "roder-restore-workspace".to_string(),
        argv: vec![
            "/bin/sh".to_string(),
            "-c".to_string(),
            r#"cp -a "$1"/. "$2"/"#.to_string(),
            "roder-restore".to_string(),
            saved.clone(),
            config.workdir.clone(),
        ],
        cwd: "/".to_string(),
        env: Vec::new(),
        timeout: Some(RESTORE_TIMEOUT),
    };
    let cancel = tokio_util::sync::CancellationToken::new();
    let result = crate::exec::run(docker, container, request, &cancel).await?;
    if result.exit_code != Some(0) {
        bail!(
            "cannot copy the snapshot's workspace {saved:?} of image {:?} into {:?}: {}{}",
            config.image,
            config.workdir,
            result.stdout,
            result.stderr
        );
    }
    Ok(())
}

/// The error for an image that is not on this Docker host.
pub fn missing_image(image: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "docker image {image:?} is not present on this Docker host; build or load it first (the docker runner never pulls images; for the test image run scripts/build-sandbox-image.sh)"
    )
}

/// Fails with [`missing_image`] unless `image` is present locally.
pub async fn require_image(docker: &Docker, image: &str) -> anyhow::Result<()> {
    match docker.inspect_image(image).await {
        Ok(_) => Ok(()),
        Err(error) if is_not_found(&error) => Err(missing_image(image)),
        Err(error) => Err(anyhow::anyhow!(
            "cannot inspect docker image {image:?}: {}",
            message_of(&error)
        )),
    }
}

/// Force-removes a container and its anonymous volumes; a container that
/// is already gone counts as removed.
pub async fn remove(docker: &Docker, container: &str) -> anyhow::Result<()> {
    let options = RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    match docker.remove_container(container, Some(options)).await {
        Ok(()) => Ok(()),
        Err(error) if is_not_found(&error) => Ok(()),
        // A removal already in progress (e.g. gc racing close) finishes alone.
        Err(error) if message_of(&error).contains("already in progress") => Ok(()),
        Err(error) => Err(anyhow::anyhow!(
            "cannot remove container {container}: {}",
            message_of(&error)
        )),
    }
}

/// A Roder container found by id or name, made ready for commands: a
/// stopped one (after a daemon restart) is started again, since its
/// filesystem, the thread's workspace, is still there. A paused one stays
/// paused.
pub async fn attach(docker: &Docker, container: &str) -> anyhow::Result<ContainerInspectResponse> {
    let inspect = inspect(docker, container).await?;
    let labels = inspect
        .config
        .as_ref()
        .and_then(|config| config.labels.as_ref());
    if labels.and_then(|labels| labels::get(labels, labels::MANAGED)) != Some("true") {
        bail!(
            "container {container} was not created by Roder's docker runner (label {}=true is missing); refusing to use it",
            labels::MANAGED
        );
    }
    let status = inspect
        .state
        .as_ref()
        .and_then(|state| state.status)
        .unwrap_or(ContainerStateStatusEnum::EMPTY);
    let lost = tmpfs_volumes(&inspect);
    if status == ContainerStateStatusEnum::EXITED && !lost.is_empty() {
        bail!(
            "container {container} stopped, and its workspace lived on size-bounded tmpfs volumes ({}: the sandbox policy's disk bound), so its files are gone; start a new session",
            lost.join(", ")
        );
    }
    match status {
        ContainerStateStatusEnum::RUNNING | ContainerStateStatusEnum::PAUSED => Ok(inspect),
        ContainerStateStatusEnum::CREATED | ContainerStateStatusEnum::EXITED => {
            docker
                .start_container(container, None)
                .await
                .map_err(|error| {
                    anyhow::anyhow!(
                        "container {container} is stopped and cannot be started again: {}",
                        message_of(&error)
                    )
                })?;
            self::inspect(docker, container).await
        }
        other => bail!("container {container} is {other:?} and cannot be used"),
    }
}

/// Inspects a container, with a clear error when it is gone.
pub async fn inspect(docker: &Docker, container: &str) -> anyhow::Result<ContainerInspectResponse> {
    docker
        .inspect_container(container, None)
        .await
        .map_err(|error| {
            if is_not_found(&error) {
                anyhow::anyhow!("container {container} no longer exists")
            } else {
                anyhow::anyhow!(
                    "cannot inspect container {container}: {}",
                    message_of(&error)
                )
            }
        })
}
