//! The connection to the Docker daemon, made on first use.
//!
//! Connecting is lazy so that building a provider (e.g. in the CLI's wiring)
//! never fails or blocks when Docker is absent; the first session operation
//! reports that instead. The API version is negotiated once, because the
//! daemon here may be older than the version bollard speaks by default.

use std::path::Path;

use anyhow::Context;
use bollard::Docker;
use bollard::errors::Error as DockerError;
use tokio::sync::OnceCell;

/// Where the daemon listens when `DOCKER_HOST` is unset.
pub const DEFAULT_SOCKET: &str = "/var/run/docker.sock";

/// A Docker client shared by a provider, its sessions and its pool.
pub(crate) struct Client {
    preset: Option<Docker>,
    connected: OnceCell<Docker>,
}

impl Client {
    /// Connects to the local daemon (`DOCKER_HOST` or the default socket)
    /// on first use.
    pub fn lazy() -> Self {
        Self {
            preset: None,
            connected: OnceCell::new(),
        }
    }

    /// Uses `docker` as given (its API version is still negotiated).
    pub fn with(docker: Docker) -> Self {
        Self {
            preset: Some(docker),
            connected: OnceCell::new(),
        }
    }

    /// The connected client.
    pub async fn get(&self) -> anyhow::Result<&Docker> {
        self.connected
            .get_or_try_init(|| async {
                let docker = match &self.preset {
                    Some(docker) => docker.clone(),
                    None => Docker::connect_with_local_defaults().with_context(|| {
                        format!("cannot connect to the Docker daemon ({})", daemon_address())
                    })?,
                };
                docker.negotiate_version().await.with_context(|| {
                    format!(
                        "the Docker daemon at {} does not answer; start Docker or set DOCKER_HOST",
                        daemon_address()
                    )
                })
            })
            .await
    }
}

/// The daemon address the local defaults use, for error messages.
pub fn daemon_address() -> String {
    std::env::var("DOCKER_HOST").unwrap_or_else(|_| format!("unix://{DEFAULT_SOCKET}"))
}

/// Whether a daemon socket is there to talk to (`DOCKER_HOST` set counts).
/// A cheap, synchronous check for setup hints and test skips.
pub fn daemon_socket_present() -> bool {
    std::env::var_os("DOCKER_HOST").is_some() || Path::new(DEFAULT_SOCKET).exists()
}

/// The HTTP status of a daemon error response, if it is one.
pub(crate) fn status_of(error: &DockerError) -> Option<u16> {
    match error {
        DockerError::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

/// Whether the daemon answered 404 (no such container, image, file).
pub(crate) fn is_not_found(error: &DockerError) -> bool {
    status_of(error) == Some(404)
}

/// The daemon's message for an error response, else the error's text.
pub(crate) fn message_of(error: &DockerError) -> String {
    match error {
        DockerError::DockerResponseServerError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}
