//! One sprite as a runner session.
//!
//! The session id is the sprite's name: it is all that is needed to find the
//! sprite again, so detach/rejoin and resume work from the persisted state
//! alone. Sprites hibernate by themselves after ~30 s without activity and
//! wake on the next API call, which is why the session is not `pausable`:
//! there is nothing for `pause` to do that the platform does not do already.

use std::sync::Mutex;

use roder_api::remote_runner::{
    RemoteRunnerSession, RunnerCommandId, RunnerCommandRequest, RunnerCommandResult,
    RunnerFileReadRequest, RunnerFileReadResult, RunnerFileWriteRequest, RunnerPortRequest,
    RunnerPortResult, RunnerSessionState, RunnerSnapshotRef,
};
use serde_json::json;

use crate::PROVIDER_ID;
use crate::client::SpritesClient;
use crate::config::{Cleanup, PersistedSession};
use roder_sandbox::RunningCommands;

use crate::exec::{self, CommandSandbox};
use crate::paths::resolve;

/// Where the handle stands; remote state is the sprite's own business.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lifecycle {
    Open,
    /// Released by `detach`; the sprite lives on for `rejoin_session`.
    Detached,
    Closed,
}

/// A live handle on one sprite.
#[derive(Debug)]
pub(crate) struct SpritesSession {
    client: SpritesClient,
    persisted: PersistedSession,
    sandbox: CommandSandbox,
    destination_id: String,
    snapshot: Mutex<Option<RunnerSnapshotRef>>,
    commands: RunningCommands,
    lifecycle: Mutex<Lifecycle>,
}

impl SpritesSession {
    pub(crate) fn new(
        client: SpritesClient,
        persisted: PersistedSession,
        sandbox: CommandSandbox,
        destination_id: String,
        snapshot: Option<RunnerSnapshotRef>,
    ) -> Self {
        Self {
            client,
            persisted,
            sandbox,
            destination_id,
            snapshot: Mutex::new(snapshot),
            commands: RunningCommands::default(),
            lifecycle: Mutex::new(Lifecycle::Open),
        }
    }

    fn name(&self) -> &str {
        &self.persisted.name
    }

    fn ensure_open(&self) -> anyhow::Result<()> {
        match *lock(&self.lifecycle) {
            Lifecycle::Open => Ok(()),
            Lifecycle::Detached => anyhow::bail!(
                "sprites session \"{}\" was detached; rejoin it to use it again",
                self.name()
            ),
            Lifecycle::Closed => anyhow::bail!("sprites session \"{}\" is closed", self.name()),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every critical section is a plain assignment: a poisoned lock holds a valid value.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[async_trait::async_trait]
impl RemoteRunnerSession for SpritesSession {
    fn state(&self) -> RunnerSessionState {
        RunnerSessionState {
            provider_id: PROVIDER_ID.to_string(),
            session_id: self.persisted.name.clone(),
            destination_id: self.destination_id.clone(),
            snapshot: lock(&self.snapshot).clone(),
            metadata: self.persisted.to_value(),
        }
    }

    /// Cancels commands in flight on this handle and releases it; the sprite
    /// keeps running (and hibernates when idle) until a later rejoin.
    async fn detach(&self) -> anyhow::Result<RunnerSessionState> {
        {
            let mut lifecycle = lock(&self.lifecycle);
            if *lifecycle == Lifecycle::Closed {
                anyhow::bail!("sprites session \"{}\" is closed", self.name());
            }
            *lifecycle = Lifecycle::Detached;
        }
        self.commands.cancel_all();
        Ok(self.state())
    }

    async fn run_command(
        &self,
        request: RunnerCommandRequest,
    ) -> anyhow::Result<RunnerCommandResult> {
        self.ensure_open()?;
        exec::run(
            &self.client,
            self.name(),
            &self.persisted.working_dir,
            &self.sandbox,
            &self.commands,
            request,
        )
        .await
    }

    async fn cancel_command(&self, command_id: &RunnerCommandId) -> anyhow::Result<bool> {
        Ok(self.commands.cancel(command_id))
    }

    async fn read_file(
        &self,
        request: RunnerFileReadRequest,
    ) -> anyhow::Result<RunnerFileReadResult> {
        self.ensure_open()?;
        let path = resolve(&self.persisted.working_dir, &request.path)?;
        let contents = self
            .client
            .read_file(self.name(), &path, &self.persisted.working_dir)
            .await?;
        Ok(RunnerFileReadResult {
            path: request.path,
            contents,
        })
    }

    async fn write_file(&self, request: RunnerFileWriteRequest) -> anyhow::Result<()> {
        self.ensure_open()?;
        let path = resolve(&self.persisted.working_dir, &request.path)?;
        self.client
            .write_file(
                self.name(),
                &path,
                &self.persisted.working_dir,
                request.contents,
            )
            .await?;
        Ok(())
    }

    /// Returns the sprite's URL whatever the port. The URL routes HTTP to
    /// port 8080, or to the first HTTP port the sprite opens, so a port other
    /// than 8080 is reachable there only when it is that first port; other
    /// TCP ports need the WebSocket proxy, which this provider does not wrap.
    async fn expose_port(&self, request: RunnerPortRequest) -> anyhow::Result<RunnerPortResult> {
        self.ensure_open()?;
        let sprite = self
            .client
            .get_sprite(self.name())
            .await?
            .ok_or_else(|| anyhow::anyhow!("sprite \"{}\" no longer exists", self.name()))?;
        let url = sprite.url.filter(|u| !u.is_empty()).ok_or_else(|| {
            anyhow::anyhow!(
                "the Sprites API reported no URL for sprite \"{}\"",
                self.name()
            )
        })?;
        Ok(RunnerPortResult {
            port: request.port,
            url: Some(url),
        })
    }

    /// Takes a Sprites checkpoint: the writable filesystem overlay (files,
    /// installed packages), not processes or memory.
    async fn snapshot(&self) -> anyhow::Result<Option<RunnerSnapshotRef>> {
        self.ensure_open()?;
        let created = self
            .client
            .checkpoint(self.name(), "roder snapshot")
            .await?;
        let snapshot = RunnerSnapshotRef {
            provider_id: PROVIDER_ID.to_string(),
            snapshot_id: created.id,
            metadata: json!({
                "sprite": self.name(),
                "message": created.message,
            }),
        };
        *lock(&self.snapshot) = Some(snapshot.clone());
        Ok(Some(snapshot))
    }

    /// Deletes the sprite when `cleanup` is `delete-on-close`; `keep` leaves
    /// it. Closing twice, or after `detach`, touches nothing remote.
    async fn close(&self) -> anyhow::Result<()> {
        let current = *lock(&self.lifecycle);
        match current {
            Lifecycle::Closed => return Ok(()),
            Lifecycle::Detached => {
                *lock(&self.lifecycle) = Lifecycle::Closed;
                return Ok(());
            }
            Lifecycle::Open => {}
        }
        self.commands.cancel_all();
        if self.persisted.cleanup == Cleanup::DeleteOnClose {
            // A sprite that is already gone counts as deleted.
            self.client.delete_sprite(self.name()).await?;
        }
        *lock(&self.lifecycle) = Lifecycle::Closed;
        Ok(())
    }
}
