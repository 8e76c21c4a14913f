//! One MCP server's connection: started once, shared by every call, and
//! started again on the next call after it died.

use std::path::PathBuf;
use std::sync::{Arc, Weak};

use anyhow::Context as _;
use rmcp::ServiceExt as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
    JsonObject, Tool,
};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use roder_api::remote_runner::RemoteRunnerSession;
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::Instrument as _;

use crate::config::{McpServerConfig, McpTransport, Placement};
use crate::{runner_process, stdio};

type Client = RunningService<RoleClient, ClientConfig>;

/// A connected server.
struct Live {
    client: Client,
    /// Stdio servers: cancelled when the process exited.
    exited: Option<CancellationToken>,
    /// Stdio servers: dropping it kills the process group.
    _process: Option<DropGuard>,
    pid: Option<u32>,
    /// Which start this is, so a call that saw one connection die does not
    /// throw away a newer one.
    generation: u64,
}

impl Live {
    fn is_alive(&self) -> bool {
        !self.client.is_closed()
            && !self.client.peer().is_transport_closed()
            && !self
                .exited
                .as_ref()
                .is_some_and(CancellationToken::is_cancelled)
    }
}

/// The connection's state: a server is connected or it is not (never
/// started, failed to start, or died); the next call starts one that is not,
/// unless its last starts failed and their back-off has not run out.
enum Slot {
    Down {
        starts: u64,
        failed: Option<FailedStarts>,
    },
    Up(Arc<Live>),
}

/// Starts that failed in a row. Why: a server that cannot start would
/// otherwise be started again by every call, each waiting up to the
/// start-up timeout; after `count` failures the next start waits
/// [`FailedStarts::back_off`] (1 s, doubling, at most 60 s) and calls meanwhile
/// answer the last error at once.
#[derive(Clone)]
struct FailedStarts {
    count: u32,
    at: tokio::time::Instant,
    error: String,
}

const FIRST_BACK_OFF: std::time::Duration = std::time::Duration::from_secs(1);
const LAST_BACK_OFF: std::time::Duration = std::time::Duration::from_secs(60);

impl FailedStarts {
    fn back_off(&self) -> std::time::Duration {
        let doublings = self.count.saturating_sub(1).min(6);
        (FIRST_BACK_OFF * 2u32.pow(doublings)).min(LAST_BACK_OFF)
    }

    fn after(previous: Option<&FailedStarts>, error: &anyhow::Error) -> Self {
        Self {
            count: previous.map_or(1, |failed| failed.count.saturating_add(1)),
            at: tokio::time::Instant::now(),
            error: format!("{error:#}"),
        }
    }
}

/// Why a call got no result from the server.
#[derive(Debug)]
pub enum CallFailure {
    /// The server could not be started (or restarted) for this call.
    Start(anyhow::Error),
    /// The server did not answer within the call's time.
    Timeout(std::time::Duration),
    /// The connection closed during the call: the server died.
    Died(String),
    /// The server answered with a protocol error (unknown tool, bad params).
    Protocol(String),
}

impl std::fmt::Display for CallFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallFailure::Start(error) => write!(f, "{error:#}"),
            CallFailure::Timeout(timeout) => {
                write!(f, "no answer within {} s", timeout.as_secs_f64())
            }
            CallFailure::Died(reason) => write!(
                f,
                "the server's connection closed during the call ({reason}); it is started again on the next call"
            ),
            CallFailure::Protocol(message) => write!(f, "the server refused the call: {message}"),
        }
    }
}

/// One server, shared by all of its tools.
pub struct McpConnection {
    config: McpServerConfig,
    /// Where a stdio server starts unless it names its own directory.
    cwd: PathBuf,
    slot: tokio::sync::Mutex<Slot>,
    /// `placement = "runner"`: the runner session the server runs in. Weak,
    /// so a connection never keeps a thread's sandbox alive.
    session: Option<Weak<dyn RemoteRunnerSession>>,
}

impl McpConnection {
    /// A connection that starts on its first use.
    pub fn new(config: McpServerConfig, cwd: PathBuf) -> Self {
        Self {
            config,
            cwd,
            slot: tokio::sync::Mutex::new(Slot::Down {
                starts: 0,
                failed: None,
            }),
            session: None,
        }
    }

    /// A connection to a `placement = "runner"` server that starts (on its
    /// first use, and again after it died) inside `session`.
    pub fn in_runner(config: McpServerConfig, session: &Arc<dyn RemoteRunnerSession>) -> Self {
        Self {
            config,
            cwd: PathBuf::new(),
            slot: tokio::sync::Mutex::new(Slot::Down {
                starts: 0,
                failed: None,
            }),
            session: Some(Arc::downgrade(session)),
        }
    }

    /// Whether this connection runs in `session` (and that session lives).
    pub fn runs_in(&self, session: &Arc<dyn RemoteRunnerSession>) -> bool {
        self.session
            .as_ref()
            .and_then(Weak::upgrade)
            .is_some_and(|own| Arc::ptr_eq(&own, session))
    }

    /// Whether its runner session is gone (always false on the host).
    pub fn session_gone(&self) -> bool {
        self.session
            .as_ref()
            .is_some_and(|session| session.strong_count() == 0)
    }

    pub fn config(&self) -> &McpServerConfig {
        &self.config
    }

    /// Starts the server if it is not running and lists its tools, all
    /// within the start-up timeout.
    pub async fn list_tools(&self) -> anyhow::Result<Vec<Tool>> {
        let live = self.live().await?;
        let timeout = self.config.startup_timeout;
        let tools = tokio::time::timeout(timeout, live.client.peer().list_all_tools())
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "MCP server \"{}\" did not list its tools within {} s",
                    self.config.name,
                    timeout.as_secs_f64()
                )
            })?
            .with_context(|| {
                format!(
                    "MCP server \"{}\" could not list its tools",
                    self.config.name
                )
            })?;
        Ok(tools)
    }

    /// Calls `tool` (the server's own name for it), starting the server
    /// first if it is down. A call during which the connection closes marks
    /// the server down; it is not retried, since it may have had effects.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        timeout: std::time::Duration,
    ) -> Result<CallToolResult, CallFailure> {
        let span = crate::trace::call_span(&self.config, tool);
        let outcome = self
            .call_untraced(tool, arguments, timeout)
            .instrument(span.clone())
            .await;
        crate::trace::answered(&span, &outcome);
        outcome
    }

    async fn call_untraced(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        timeout: std::time::Duration,
    ) -> Result<CallToolResult, CallFailure> {
        let live = self.live().await.map_err(CallFailure::Start)?;
        let mut params = CallToolRequestParams::new(tool.to_string());
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        let outcome = tokio::time::timeout(timeout, live.client.peer().call_tool(params)).await;
        match outcome {
            Err(_) => Err(CallFailure::Timeout(timeout)),
            Ok(Ok(result)) => Ok(result),
            Ok(Err(ServiceError::McpError(error))) => {
                Err(CallFailure::Protocol(error.message.to_string()))
            }
            Ok(Err(error)) => {
                if !live.is_alive()
                    || matches!(
                        error,
                        ServiceError::TransportClosed | ServiceError::TransportSend(_)
                    )
                {
                    self.mark_down(live.generation).await;
                    Err(CallFailure::Died(error.to_string()))
                } else {
                    Err(CallFailure::Protocol(error.to_string()))
                }
            }
        }
    }

    /// The running server's rmcp peer, started if it is down: a bare client
    /// of the very same process and pipes, for a benchmark that compares a
    /// call through Roder with a direct one.
    pub async fn peer(&self) -> anyhow::Result<rmcp::Peer<RoleClient>> {
        Ok(self.live().await?.client.peer().clone())
    }

    /// Stops the server now (tests, shutdown); the next call starts it again.
    pub async fn stop(&self) {
        let mut slot = self.slot.lock().await;
        if let Slot::Up(live) = &*slot {
            let starts = live.generation;
            *slot = Slot::Down {
                starts,
                failed: None,
            };
        }
    }

    /// Whether a connection is up and alive now.
    pub async fn is_up(&self) -> bool {
        matches!(&*self.slot.lock().await, Slot::Up(live) if live.is_alive())
    }

    /// Returns once the running stdio server's process has exited (at once
    /// if none is running): tests that kill a server wait on this.
    pub async fn exited(&self) {
        let exited = match &*self.slot.lock().await {
            Slot::Up(live) => live.exited.clone(),
            Slot::Down { .. } => None,
        };
        if let Some(exited) = exited {
            exited.cancelled().await;
        }
    }

    /// The process id of the running stdio server (tests kill it).
    pub async fn process_id(&self) -> Option<u32> {
        match &*self.slot.lock().await {
            Slot::Up(live) if live.is_alive() => live.pid,
            _ => None,
        }
    }

    async fn mark_down(&self, generation: u64) {
        let mut slot = self.slot.lock().await;
        if let Slot::Up(live) = &*slot
            && live.generation == generation
        {
            *slot = Slot::Down {
                starts: generation,
                failed: None,
            };
        }
    }

    /// The running connection, started (once, whoever asks at the same time)
    /// if there is none or the last one died.
    async fn live(&self) -> anyhow::Result<Arc<Live>> {
        let mut slot = self.slot.lock().await;
        let (starts, failed) = match &*slot {
            Slot::Up(live) if live.is_alive() => return Ok(live.clone()),
            Slot::Up(live) => {
                tracing::warn!(server = %self.config.name, "MCP server is down; starting it again");
                (live.generation, None)
            }
            Slot::Down { starts, failed } => (*starts, failed.clone()),
        };
        if let Some(failed) = &failed {
            let back_off = failed.back_off();
            let waited = failed.at.elapsed();
            if waited < back_off {
                anyhow::bail!(
                    "{} (it failed to start {} time(s) in a row; the next start is tried in {:.1} s)",
                    failed.error,
                    failed.count,
                    (back_off - waited).as_secs_f64()
                );
            }
        }
        let generation = starts + 1;
        match self.connect(generation).await {
            Ok(live) => {
                let live = Arc::new(live);
                *slot = Slot::Up(live.clone());
                Ok(live)
            }
            Err(error) => {
                // Down: a later call tries again once the back-off has run out.
                *slot = Slot::Down {
                    starts: generation,
                    failed: Some(FailedStarts::after(failed.as_ref(), &error)),
                };
                Err(error)
            }
        }
    }

    async fn connect(&self, generation: u64) -> anyhow::Result<Live> {
        let name = &self.config.name;
        if self.config.placement == Placement::Runner {
            return self.connect_in_runner(generation).await;
        }
        let timeout = self.config.startup_timeout;
        let handshake = client_config();
        match &self.config.transport {
            McpTransport::Stdio(server) => {
                let child = stdio::spawn(name, server, &self.cwd).await?;
                let tail = child.stderr_tail.clone();
                let started =
                    tokio::time::timeout(timeout, handshake.serve((child.reader, child.writer)))
                        .await;
                let client = match started {
                    Ok(Ok(client)) => client,
                    failed => {
                        let reason = match failed {
                            Err(_) => format!(
                                "no answer to initialize within {} s",
                                timeout.as_secs_f64()
                            ),
                            Ok(Err(error)) => error.to_string(),
                            Ok(Ok(_)) => String::new(),
                        };
                        tracing::warn!(
                            server = %name,
                            "MCP server failed to start: {reason}; its last stderr lines:\n{}",
                            tail.text()
                        );
                        anyhow::bail!(
                            "MCP server \"{name}\" (`{}`) failed to start: {reason} (its stderr is in Roder's log)",
                            server.command
                        );
                    }
                };
                Ok(Live {
                    client,
                    exited: Some(child.exited),
                    _process: Some(child.guard),
                    pid: child.pid,
                    generation,
                })
            }
            McpTransport::Http(server) => {
                let mut transport_config =
                    StreamableHttpClientTransportConfig::with_uri(server.url.clone());
                if let Some(variable) = &server.bearer_token_env {
                    let token = std::env::var(variable)
                        .ok()
                        .filter(|token| !token.is_empty());
                    let Some(token) = token else {
                        anyhow::bail!(
                            "MCP server \"{name}\": the bearer token variable {variable} is not set"
                        );
                    };
                    transport_config = transport_config.auth_header(token);
                }
                let transport = StreamableHttpClientTransport::from_config(transport_config);
                let client = tokio::time::timeout(timeout, handshake.serve(transport))
                    .await
                    .map_err(|_| {
                        anyhow::anyhow!(
                            "MCP server \"{name}\" at {} did not answer initialize within {} s",
                            server.url,
                            timeout.as_secs_f64()
                        )
                    })?
                    .map_err(|error| {
                        anyhow::anyhow!(
                            "MCP server \"{name}\" at {} failed to start: {error}",
                            server.url
                        )
                    })?;
                Ok(Live {
                    client,
                    exited: None,
                    _process: None,
                    pid: None,
                    generation,
                })
            }
        }
    }
}

impl McpConnection {
    /// Starts the server in its runner session and initializes it over the
    /// session's process stream.
    async fn connect_in_runner(&self, generation: u64) -> anyhow::Result<Live> {
        let name = &self.config.name;
        let McpTransport::Stdio(server) = &self.config.transport else {
            anyhow::bail!(
                "MCP server \"{name}\": placement = \"runner\" needs a command (a url is reached from the host)"
            );
        };
        let Some(session) = self.session.as_ref().and_then(Weak::upgrade) else {
            anyhow::bail!(
                "MCP server \"{name}\" runs in the thread's runner (placement = \"runner\"), and this thread's runner session is gone"
            );
        };
        let timeout = self.config.startup_timeout;
        let child = tokio::time::timeout(timeout, runner_process::spawn(name, server, session))
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "MCP server \"{name}\" (`{}`) could not be started in the runner within {} s",
                    server.command,
                    timeout.as_secs_f64()
                )
            })??;
        let tail = child.stderr_tail.clone();
        let started =
            tokio::time::timeout(timeout, client_config().serve((child.reader, child.writer)))
                .await;
        let client = match started {
            Ok(Ok(client)) => client,
            Err(_) => {
                tracing::warn!(server = %name, "MCP server in the runner did not initialize; its last stderr lines:\n{}", tail.text());
                anyhow::bail!(
                    "MCP server \"{name}\" (`{}`) failed to start in the runner: no answer to initialize within {} s (its stderr is in Roder's log)",
                    server.command,
                    timeout.as_secs_f64()
                );
            }
            Ok(Err(error)) => {
                tracing::warn!(server = %name, "MCP server in the runner failed to start: {error}; its last stderr lines:\n{}", tail.text());
                anyhow::bail!(
                    "MCP server \"{name}\" (`{}`) failed to start in the runner: {error} (its stderr is in Roder's log)",
                    server.command
                );
            }
        };
        Ok(Live {
            client,
            exited: Some(child.exited),
            _process: Some(child.guard),
            pid: None,
            generation,
        })
    }
}

fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("roder", env!("CARGO_PKG_VERSION")),
    )
}
