//! Putting a checkpoint image's workspace back into a live container (the
//! docker rollback).
//!
//! The thread keeps its container: the runtime holds a session over it and
//! its persisted state names it, so replacing the container would mean
//! rebinding both. Instead the workspace's contents are replaced: the files
//! the image holds for the workspace are read out of a helper container of
//! that image (created, never started, removed after), the workspace is
//! emptied by an exec, and the files are uploaded into it through the
//! archive API. Only the workspace is restored: processes, `/tmp` and the
//! rest of the container stay as they are.

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use bollard::Docker;
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::models::{ContainerCreateBody, ContainerInspectResponse};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, DownloadFromContainerOptionsBuilder,
    UploadToContainerOptionsBuilder,
};
use futures::StreamExt;

use crate::client::{is_not_found, message_of};
use crate::{container, labels};

/// How long emptying the workspace may take.
const CLEAR_TIMEOUT: Duration = Duration::from_secs(120);

/// Empties the directory `$1` (dot files included) and checks it is empty.
/// An unmatched glob stays literal and `rm -f` ignores it.
const CLEAR_SCRIPT: &str =
    r#"cd "$1" || exit 1; rm -rf -- ./* ./.[!.]* ./..?* || exit 1; [ -z "$(ls -A)" ]"#;

/// Where an image keeps the files of a workspace at `workdir`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SavedWorkspace {
    /// A directory of the image's filesystem (a snapshot's saved copy, or
    /// the workdir itself for an image whose containers keep the workspace
    /// in their root filesystem).
    At(String),
    /// Nothing: a container of this image starts with an empty workspace
    /// (a volume Docker does not fill from the image).
    Empty,
}

/// Where `image` keeps the workspace `workdir` of a container whose
/// workspace is (`on_volume`) or is not a volume.
pub async fn saved_workspace(
    docker: &Docker,
    image: &str,
    workdir: &str,
    on_volume: bool,
) -> anyhow::Result<SavedWorkspace> {
    let inspect = docker.inspect_image(image).await.map_err(|error| {
        if is_not_found(&error) {
            anyhow::anyhow!(
                "checkpoint image {image:?} is no longer on this Docker host (removed?), so it \
                 cannot be restored or forked"
            )
        } else {
            anyhow::anyhow!("cannot inspect image {image:?}: {}", message_of(&error))
        }
    })?;
    let saved = inspect
        .config
        .and_then(|config| config.labels)
        .and_then(|labels| labels.get(labels::SNAPSHOT_WORKSPACE).cloned())
        .filter(|saved| saved.starts_with('/'));
    Ok(match saved {
        Some(saved) => SavedWorkspace::At(saved),
        None if on_volume => SavedWorkspace::Empty,
        None => SavedWorkspace::At(workdir.to_string()),
    })
}

/// Replaces the contents of `workdir` in the container `inspect` describes
/// with what `image` holds for it. A paused container is thawed for the
/// copy and paused again.
pub async fn restore(
    docker: &Docker,
    inspect: &ContainerInspectResponse,
    workdir: &str,
    image: &str,
) -> anyhow::Result<()> {
    let container_id = inspect
        .id
        .clone()
        .ok_or_else(|| anyhow::anyhow!("the daemon reported no container id"))?;
    let on_volume = container::tmpfs_volumes(inspect)
        .iter()
        .any(|v| v == workdir);
    let saved = saved_workspace(docker, image, workdir, on_volume).await?;
    // Everything that can fail without touching the workspace comes first.
    let archive = match saved {
        SavedWorkspace::At(path) => {
            let raw = read_from_image(docker, image, &path).await?;
            tokio::task::spawn_blocking(move || reroot(&raw))
                .await
                .context("the archive rewrite stopped")??
        }
        SavedWorkspace::Empty => Vec::new(),
    };
    let paused = inspect
        .state
        .as_ref()
        .and_then(|state| state.paused)
        .unwrap_or(false);
    if paused {
        docker
            .unpause_container(&container_id)
            .await
            .map_err(|error| {
                anyhow::anyhow!(
                    "cannot thaw container {container_id} to restore its workspace: {}",
                    message_of(&error)
                )
            })?;
    }
    let restored = async {
        clear(docker, &container_id, workdir).await?;
        if archive.is_empty() {
            return Ok(());
        }
        let at = UploadToContainerOptionsBuilder::default()
            .path(workdir)
            .build();
        docker
            .upload_to_container(&container_id, Some(at), bollard::body_full(archive.into()))
            .await
            .map_err(|error| {
                anyhow::anyhow!(
                    "the workspace {workdir} of container {container_id} was emptied but the \
                     checkpoint's files could not be put back ({}); run the rollback again",
                    message_of(&error)
                )
            })
    }
    .await;
    if paused && let Err(error) = docker.pause_container(&container_id).await {
        tracing::warn!(
            "container {container_id}: cannot pause it again after the restore: {}",
            message_of(&error)
        );
    }
    restored
}

/// The tar of `path` in `image` (its top entry is the directory itself),
/// read from a helper container that is never started; empty when the
/// image has no such path.
async fn read_from_image(docker: &Docker, image: &str, path: &str) -> anyhow::Result<Vec<u8>> {
    let helper = docker
        .create_container(
            Some(
                CreateContainerOptionsBuilder::default()
                    .name(&format!("roder-restore.{}", labels::name_suffix()))
                    .build(),
            ),
            ContainerCreateBody {
                image: Some(image.to_string()),
                entrypoint: Some(vec!["/bin/sh".to_string()]),
                ..Default::default()
            },
        )
        .await
        .map_err(|error| {
            anyhow::anyhow!(
                "cannot create a helper container of image {image}: {}",
                message_of(&error)
            )
        })?
        .id;
    let read = async {
        let options = DownloadFromContainerOptionsBuilder::default()
            .path(path)
            .build();
        let mut stream = docker.download_from_container(&helper, Some(options));
        let mut bytes = Vec::new();
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(chunk) => bytes.extend_from_slice(&chunk),
                Err(error) if is_not_found(&error) => return Ok(Vec::new()),
                Err(error) => bail!(
                    "cannot read {path} from image {image}: {}",
                    message_of(&error)
                ),
            }
        }
        Ok(bytes)
    }
    .await;
    container::remove(docker, &helper).await.ok();
    read
}

/// The archive `raw` (a directory's, as the daemon sends it: every entry
/// under the directory's name) with that first component removed, so it
/// unpacks *into* the workspace. The directory's own entry is dropped: the
/// workspace keeps its mode and owner.
pub fn reroot(raw: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    if raw.is_empty() {
        return Ok(Vec::new());
    }
    let mut archive = tar::Archive::new(raw);
    for entry in archive
        .entries()
        .context("the checkpoint's archive is unreadable")?
    {
        let mut entry = entry.context("the checkpoint's archive is unreadable")?;
        let kind = entry.header().entry_type();
        if matches!(
            kind,
            tar::EntryType::XGlobalHeader
                | tar::EntryType::XHeader
                | tar::EntryType::GNULongName
                | tar::EntryType::GNULongLink
        ) {
            continue;
        }
        let path = entry.path()?.into_owned();
        let Some(inner) = strip_top(&path) else {
            continue;
        };
        let source = entry.header();
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(kind);
        // A blank numeric field reads as 0 (root's, the epoch), as tar does.
        header.set_mode(source.mode().unwrap_or(0o644));
        header.set_uid(source.uid().unwrap_or(0));
        header.set_gid(source.gid().unwrap_or(0));
        header.set_mtime(source.mtime().unwrap_or(0));
        header.set_size(if kind.is_file() { entry.size() } else { 0 });
        match kind {
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name()?
                    .context("a symbolic link in the archive has no target")?
                    .into_owned();
                builder.append_link(&mut header, &inner, target)?;
            }
            tar::EntryType::Link => {
                let target = entry
                    .link_name()?
                    .context("a hard link in the archive has no target")?
                    .into_owned();
                let target = strip_top(&target)
                    .context("a hard link in the archive points outside the workspace")?;
                builder.append_link(&mut header, &inner, target)?;
            }
            _ => builder.append_data(&mut header, &inner, &mut entry)?,
        }
    }
    Ok(builder.into_inner()?)
}

/// `top/rest` → `rest`; `None` for the top entry itself or a path that
/// climbs out.
fn strip_top(path: &Path) -> Option<PathBuf> {
    let mut components = path.components();
    components.next()?;
    let rest: PathBuf = components.as_path().to_path_buf();
    let clean = rest
        .components()
        .all(|component| matches!(component, Component::Normal(_)));
    (clean && !rest.as_os_str().is_empty()).then_some(rest)
}

/// Empties `workdir` in the container by an exec, as root (the files may
/// be anyone's).
async fn clear(docker: &Docker, container: &str, workdir: &str) -> anyhow::Result<()> {
    let options = CreateExecOptions {
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        user: Some("0".to_string()),
        working_dir: Some("/".to_string()),
        cmd: Some(vec![
            "/bin/sh".to_string(),
            "-c".to_string(),
            CLEAR_SCRIPT.to_string(),
            "roder-rollback".to_string(),
            workdir.to_string(),
        ]),
        ..Default::default()
    };
    let failed = |error: bollard::errors::Error| {
        anyhow::anyhow!(
            "cannot empty the workspace {workdir} of container {container}: {}",
            message_of(&error)
        )
    };
    let created = docker
        .create_exec(container, options)
        .await
        .map_err(failed)?;
    let mut said = String::new();
    let run = async {
        if let StartExecResults::Attached { mut output, .. } =
            docker.start_exec(&created.id, None).await.map_err(failed)?
        {
            while let Some(chunk) = output.next().await {
                if let Ok(chunk) = chunk {
                    said.push_str(&String::from_utf8_lossy(&chunk.into_bytes()));
                }
            }
        }
        anyhow::Ok(())
    };
    tokio::time::timeout(CLEAR_TIMEOUT, run)
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "emptying the workspace {workdir} of container {container} took over {} s",
                CLEAR_TIMEOUT.as_secs()
            )
        })??;
    // The daemon may report the exit a moment after the output closes.
    let mut pause = Duration::from_millis(1);
    for _ in 0..200 {
        let inspect = docker.inspect_exec(&created.id).await.map_err(failed)?;
        if inspect.running != Some(true) {
            if inspect.exit_code == Some(0) {
                return Ok(());
            }
            bail!(
                "cannot empty the workspace {workdir} of container {container} (exit {:?}): {}",
                inspect.exit_code,
                said.trim()
            );
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
    bail!("emptying the workspace {workdir} of container {container} did not report its exit")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn archive(entries: &[(&str, Option<&[u8]>)]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (path, data) in entries {
            let mut header = tar::Header::new_gnu();
            match data {
                Some(data) => {
                    header.set_entry_type(tar::EntryType::Regular);
                    header.set_size(data.len() as u64);
                    header.set_mode(0o640);
                    header.set_uid(1000);
                    builder.append_data(&mut header, path, *data).unwrap();
                }
                None => {
                    header.set_entry_type(tar::EntryType::Directory);
                    header.set_size(0);
                    header.set_mode(0o755);
                    builder
                        .append_data(&mut header, path, std::io::empty())
                        .unwrap();
                }
            }
        }
        builder.into_inner().unwrap()
    }

    #[test]
    fn entries_lose_the_directory_name_and_keep_their_bytes_and_owner() {
        let long = format!("workspace/{}/deep.txt", "d".repeat(150));
        let raw = archive(&[
            ("workspace/", None),
            ("workspace/src/", None),
            ("workspace/src/a.txt", Some(b"alpha\n")),
            (&long, Some(b"long\n")),
        ]);
        let rerooted = reroot(&raw).unwrap();
        let mut archive = tar::Archive::new(rerooted.as_slice());
        let mut seen = Vec::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let path = entry.path().unwrap().display().to_string();
            let mut text = String::new();
            std::io::Read::read_to_string(&mut entry, &mut text).unwrap();
            seen.push((path, text, entry.header().uid().unwrap()));
        }
        assert_eq!(seen.len(), 3, "{seen:?}");
        assert_eq!(seen[0].0, "src");
        assert_eq!(seen[1], ("src/a.txt".into(), "alpha\n".into(), 1000));
        assert_eq!(seen[2].0, format!("{}/deep.txt", "d".repeat(150)));
        assert_eq!(seen[2].1, "long\n");
        assert!(reroot(&[]).unwrap().is_empty());
    }

    #[test]
    fn the_top_entry_and_climbing_paths_are_dropped() {
        assert_eq!(strip_top(Path::new("workspace")), None);
        assert_eq!(strip_top(Path::new("workspace/")), None);
        assert_eq!(
            strip_top(Path::new("workspace/a/b")),
            Some(PathBuf::from("a/b"))
        );
        assert_eq!(strip_top(Path::new("workspace/../etc")), None);
    }
}
