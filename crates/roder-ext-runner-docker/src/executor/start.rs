//! Starting the helper in a container: copy it in with one archive upload,
//! start it with one attached exec, wait for its greeting.

use std::sync::OnceLock;
use std::time::Duration;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::query_parameters::{
    ContainerArchiveInfoOptionsBuilder, UploadToContainerOptionsBuilder,
};
use futures::StreamExt;
use roder_executor::client::Executor;

use super::binary;
use crate::archive::{WriteRules, one_file_tar};
use crate::client::message_of;
use crate::sandbox::TMP_DIR;

/// How long a started helper may take to greet.
const HELLO_WITHIN: Duration = Duration::from_secs(10);

/// Starts the helper in `container`, or says why it cannot run there.
pub async fn start(
    docker: &Docker,
    container: &str,
    workdir: &str,
    rules: &WriteRules,
) -> Result<Executor, String> {
    let bytes = binary::embedded()?;
    let base = match &rules.writable {
        None => "/",
        Some(writable) if writable.iter().any(|root| root == TMP_DIR) => TMP_DIR,
        Some(_) => {
            return Err(format!(
                "the container's root filesystem is read-only and it has no writable {TMP_DIR} to hold the helper"
            ));
        }
    };
    let path = format!(
        "{}/.roder-executor-{}",
        base.trim_end_matches('/'),
        digest_of(bytes)
    );
    // A helper already there was put there after the same check.
    if !already_there(docker, container, &path, bytes.len()).await {
        check_architecture(docker, container).await?;
        let tar = one_file_tar(base, &path, 0, bytes, 0o755, None)
            .map_err(|error| format!("cannot pack the helper: {error:#}"))?;
        let options = UploadToContainerOptionsBuilder::default()
            .path(base)
            .build();
        docker
            .upload_to_container(container, Some(options), bollard::body_full(tar.into()))
            .await
            .map_err(|error| format!("cannot copy the helper to {path}: {}", message_of(&error)))?;
    }
    let created = docker
        .create_exec(
            container,
            CreateExecOptions {
                attach_stdin: Some(true),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                tty: Some(false),
                cmd: Some(vec![path.clone()]),
                working_dir: Some(workdir.to_string()),
                ..Default::default()
            },
        )
        .await
        .map_err(|error| format!("cannot start the helper: {}", message_of(&error)))?;
    let started = docker
        .start_exec(
            &created.id,
            Some(StartExecOptions {
                detach: false,
                tty: false,
                output_capacity: None,
            }),
        )
        .await
        .map_err(|error| format!("cannot start the helper: {}", message_of(&error)))?;
    let StartExecResults::Attached { output, input } = started else {
        return Err("the daemon started the helper detached".to_string());
    };
    let short = container.get(..12).unwrap_or(container).to_string();
    let incoming = output.filter_map(move |item| {
        let item = match item {
            Ok(LogOutput::StdOut { message } | LogOutput::Console { message }) => Some(Ok(message)),
            Ok(LogOutput::StdErr { message }) => {
                tracing::debug!(container = %short, "sandbox executor: {}", String::from_utf8_lossy(&message).trim_end());
                None
            }
            Ok(LogOutput::StdIn { .. }) => None,
            Err(error) => Some(Err(std::io::Error::other(message_of(&error)))),
        };
        std::future::ready(item)
    });
    Executor::connect(Box::pin(incoming), input, HELLO_WITHIN)
        .await
        .map_err(|error| format!("the helper did not come up: {error}"))
}

/// Whether an earlier session (this process's or another's) left this
/// build's helper at `path`: the name carries the contents' digest, so a
/// file of the right size there is the same helper, and a rejoin skips
/// the upload. (A command could overwrite it; it runs in the sandbox with
/// the sandbox's rights either way, and the host parses what it says as
/// untrusted.)
async fn already_there(docker: &Docker, container: &str, path: &str, size: usize) -> bool {
    let options = ContainerArchiveInfoOptionsBuilder::default()
        .path(path)
        .build();
    docker
        .get_container_archive_info(container, Some(options))
        .await
        .is_ok_and(|stat| usize::try_from(stat.size).is_ok_and(|found| found == size))
}

/// Refuses an image of another architecture: a static helper built for
/// this host would not run there (without emulation), or would run slowly.
async fn check_architecture(docker: &Docker, container: &str) -> Result<(), String> {
    let inspect = docker
        .inspect_container(container, None)
        .await
        .map_err(|error| format!("cannot inspect the container: {}", message_of(&error)))?;
    let Some(image) = inspect.image else {
        return Ok(());
    };
    let image = docker.inspect_image(&image).await.map_err(|error| {
        format!(
            "cannot inspect the container's image: {}",
            message_of(&error)
        )
    })?;
    let wanted = binary::docker_architecture();
    match image.architecture.as_deref() {
        Some(architecture) if !architecture.is_empty() && architecture != wanted => Err(format!(
            "the image is built for {architecture} and the helper for {wanted}"
        )),
        _ => Ok(()),
    }
}

fn digest_of(bytes: &'static [u8]) -> &'static str {
    static DIGEST: OnceLock<String> = OnceLock::new();
    DIGEST.get_or_init(|| binary::digest(bytes))
}
