//! Snapshots of confined containers, whose workspace is a volume.
//!
//! A commit captures the root filesystem only, and a confined container's
//! root filesystem is read-only (so it is the image, unchanged). Its
//! workspace lives on a tmpfs volume that a commit leaves out, and that
//! Docker would not copy back into a new tmpfs volume either (the copy-up
//! lands on a mount that is gone by the time the container starts). So the
//! snapshot is a helper container of the same image, never started, that
//! receives a copy of the workspace under [`SAVED_WORKSPACES`] through the
//! archive API; committing it gives the snapshot image, labelled with where
//! the copy is ([`labels::SNAPSHOT_WORKSPACE`]). A container of that image
//! copies it into its workspace when it starts
//! (`container::create_and_start`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::bail;
use bollard::Docker;
use bollard::models::{ContainerConfig, ContainerCreateBody, ContainerInspectResponse};
use bollard::query_parameters::{
    CommitContainerOptionsBuilder, CreateContainerOptionsBuilder,
    DownloadFromContainerOptionsBuilder, UploadToContainerOptionsBuilder,
};
use futures::StreamExt;

use crate::client::message_of;
use crate::session::SNAPSHOT_REPOSITORY;
use crate::{container, labels};

/// The image directory saved workspaces go to.
pub const SAVED_WORKSPACES: &str = "/.roder-snapshot";

/// Commits a snapshot of the container `inspect` describes, with the
/// contents of `workdir` saved in the image; returns the image id. The
/// container is paused while its workspace is copied (as a commit pauses
/// it), unless it was paused already.
pub async fn commit_with_workspace(
    docker: &Docker,
    inspect: &ContainerInspectResponse,
    workdir: &str,
    tag: &str,
    mut image_labels: HashMap<String, String>,
) -> anyhow::Result<String> {
    let source = inspect
        .id
        .clone()
        .ok_or_else(|| anyhow::anyhow!("the daemon reported no container id"))?;
    let image = inspect
        .image
        .clone()
        .ok_or_else(|| anyhow::anyhow!("the daemon reported no image for container {source}"))?;
    let name = workdir
        .rsplit('/')
        .find(|part| !part.is_empty())
        .ok_or_else(|| anyhow::anyhow!("the workspace `{workdir}` has no name to save it under"))?;
    let helper_name = format!("roder-snap.{}", labels::name_suffix());
    let helper = docker
        .create_container(
            Some(
                CreateContainerOptionsBuilder::default()
                    .name(&helper_name)
                    .build(),
            ),
            ContainerCreateBody {
                image: Some(image.clone()),
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
    let was_paused = inspect
        .state
        .as_ref()
        .and_then(|state| state.paused)
        .unwrap_or(false);
    if !was_paused && let Err(error) = docker.pause_container(&source).await {
        tracing::warn!(
            "snapshot of {source}: cannot pause it while copying: {}",
            message_of(&error)
        );
    }
    // A directory of its own: the image may be a snapshot already, whose
    // saved copy an upload would merge into (deleted files coming back).
    let saved = format!("{SAVED_WORKSPACES}/{}", labels::name_suffix());
    let copied = copy_workspace(docker, &source, workdir, &helper, &saved).await;
    if !was_paused {
        docker.unpause_container(&source).await.ok();
    }
    let committed = match copied {
        Ok(()) => {
            image_labels.insert(
                labels::SNAPSHOT_WORKSPACE.to_string(),
                format!("{saved}/{name}"),
            );
            commit(
                docker,
                &helper,
                tag,
                "roder docker runner snapshot (workspace saved in the image)",
                false,
                image_labels,
            )
            .await
        }
        Err(error) => Err(error),
    };
    container::remove(docker, &helper).await.ok();
    committed
}

/// Streams the archive of `workdir` in `source` into `helper` under
/// `saved` (a new directory under [`SAVED_WORKSPACES`]). A download that
/// fails midway fails the copy.
async fn copy_workspace(
    docker: &Docker,
    source: &str,
    workdir: &str,
    helper: &str,
    saved: &str,
) -> anyhow::Result<()> {
    let root = directory_tar(saved.trim_start_matches('/'))?;
    let at_root = UploadToContainerOptionsBuilder::default().path("/").build();
    docker
        .upload_to_container(helper, Some(at_root), bollard::body_full(root.into()))
        .await
        .map_err(|error| {
            anyhow::anyhow!("cannot make {saved} in the helper: {}", message_of(&error))
        })?;
    let failure: Arc<Mutex<Option<String>>> = Arc::default();
    let seen = failure.clone();
    let download = docker
        .download_from_container(
            source,
            Some(
                DownloadFromContainerOptionsBuilder::default()
                    .path(workdir)
                    .build(),
            ),
        )
        .scan((), move |_, chunk| {
            let next = match chunk {
                Ok(bytes) => Some(bytes),
                Err(error) => {
                    *seen.lock().unwrap_or_else(PoisonError::into_inner) = Some(message_of(&error));
                    None
                }
            };
            futures::future::ready(next)
        });
    let into = UploadToContainerOptionsBuilder::default()
        .path(saved)
        .build();
    let uploaded = docker
        .upload_to_container(helper, Some(into), bollard::body_stream(download))
        .await;
    if let Some(error) = failure
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
    {
        bail!("cannot read the workspace `{workdir}`: {error}");
    }
    uploaded.map_err(|error| {
        anyhow::anyhow!(
            "cannot save the workspace `{workdir}` in the snapshot: {}",
            message_of(&error)
        )
    })
}

/// A tar of the empty directory `path` and its parents (0755, root's).
fn directory_tar(path: &str) -> anyhow::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut prefix = String::new();
    for part in path.split('/').filter(|part| !part.is_empty()) {
        prefix.push_str(part);
        prefix.push('/');
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Directory);
        header.set_size(0);
        header.set_mode(0o755);
        builder.append_data(&mut header, &prefix, std::io::empty())?;
    }
    Ok(builder.into_inner()?)
}

/// Commits `container` as `roder-snapshot:<tag>` with `image_labels`; the
/// image id, or the daemon's message.
pub async fn commit(
    docker: &Docker,
    container: &str,
    tag: &str,
    comment: &str,
    pause: bool,
    image_labels: HashMap<String, String>,
) -> anyhow::Result<String> {
    let options = CommitContainerOptionsBuilder::default()
        .container(container)
        .repo(SNAPSHOT_REPOSITORY)
        .tag(tag)
        .comment(comment)
        .pause(pause)
        .build();
    docker
        .commit_container(
            options,
            ContainerConfig {
                labels: Some(image_labels),
                ..Default::default()
            },
        )
        .await
        .map(|committed| committed.id)
        .map_err(|error| anyhow::anyhow!("{}", message_of(&error)))
}
