//! The agent side of ACP: each client request decoded with the schema
//! crate's `ClientRequest::from_method_and_params` and handled here, except
//! `session/prompt` (`turn.rs`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use agent_client_protocol_schema::MethodDispatchError;
use agent_client_protocol_schema::v1 as acp;
use roder_api::thread::ThreadMetadata;
use roder_api::thread_tools::MCP_SERVERS;
use roder_api::workdir::WorkdirRequest;
use roder_core::{CreateThreadRequest, Runtime, WorkdirSelection};
use serde_json::{Value, json};

use crate::AcpOptions;
use crate::options::{Choices, MODE, PROFILE, PROFILE_NONE, parse_mode};
use crate::peer::Peer;
use crate::session::Session;
use crate::updates::{Source, Translator};

/// Sessions listed per `session/list` page.
const LIST_PAGE: usize = 100;

pub(crate) type Answer = Result<Value, acp::Error>;

pub(crate) struct Agent {
    pub runtime: Arc<Runtime>,
    pub peer: Arc<Peer>,
    pub options: AcpOptions,
    client: OnceLock<acp::InitializeRequest>,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
}

/// How a session is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Load,
    Resume,
}

impl Agent {
    pub fn new(runtime: Arc<Runtime>, peer: Arc<Peer>, options: AcpOptions) -> Self {
        Self {
            runtime,
            peer,
            options,
            client: OnceLock::new(),
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// Answers one request.
    pub async fn handle(self: &Arc<Self>, method: &str, params: &Value) -> Answer {
        let request = acp::ClientRequest::from_method_and_params(method, params).map_err(
            |error| match error {
                MethodDispatchError::UnknownMethod { method } => acp::Error::method_not_found()
                    .data(json!(format!("roder acp does not support {method}"))),
                other => acp::Error::invalid_params().data(json!(other.to_string())),
            },
        )?;
        match request {
            acp::ClientRequest::InitializeRequest(request) => self.initialize(request),
            // No method is advertised: keys come from the environment.
            acp::ClientRequest::AuthenticateRequest(_) => {
                to_value(acp::AuthenticateResponse::new())
            }
            acp::ClientRequest::NewSessionRequest(request) => self.new_session(request).await,
            acp::ClientRequest::LoadSessionRequest(request) => {
                self.open(
                    Open::Load,
                    request.session_id.0.as_ref(),
                    &request.cwd,
                    request.mcp_servers,
                )
                .await
            }
            acp::ClientRequest::ResumeSessionRequest(request) => {
                self.open(
                    Open::Resume,
                    request.session_id.0.as_ref(),
                    &request.cwd,
                    request.mcp_servers,
                )
                .await
            }
            acp::ClientRequest::ListSessionsRequest(request) => self.list(request).await,
            acp::ClientRequest::CloseSessionRequest(request) => {
                self.close(request.session_id.0.as_ref()).await;
                to_value(acp::CloseSessionResponse::new())
            }
            acp::ClientRequest::SetSessionModeRequest(request) => {
                let session = self.session(request.session_id.0.as_ref())?;
                self.set_choice(&session, MODE, request.mode_id.0.as_ref())
                    .await?;
                to_value(acp::SetSessionModeResponse::new())
            }
            acp::ClientRequest::SetSessionConfigOptionRequest(request) => {
                let session = self.session(request.session_id.0.as_ref())?;
                let value = match &request.value {
                    acp::SessionConfigOptionValue::ValueId { value } => value.0.to_string(),
                    _ => {
                        return Err(invalid_params(format!(
                            "config option \"{}\" takes one of its listed values",
                            request.config_id.0
                        )));
                    }
                };
                self.set_choice(&session, request.config_id.0.as_ref(), &value)
                    .await?;
                let options = session.choices().config_options();
                to_value(acp::SetSessionConfigOptionResponse::new(options))
            }
            acp::ClientRequest::PromptRequest(request) => self.prompt(request).await,
            other => Err(acp::Error::method_not_found().data(json!(format!(
                "roder acp does not support {}",
                other.method()
            )))),
        }
    }

    /// `session/cancel`: interrupts the session's turn (its prompt then
    /// answers `cancelled`; an ask it waits on is rejected).
    pub async fn cancel(&self, session_id: &str) {
        let Ok(session) = self.session(session_id) else {
            return;
        };
        if let Some(turn_id) = session.request_cancel()
            && let Err(error) = self.runtime.interrupt_turn(&session.id, &turn_id).await
        {
            // It may have ended on its own meanwhile.
            tracing::debug!("cancelling turn {turn_id}: {error:#}");
        }
    }

    /// The client went away: every running turn is interrupted (and saved).
    pub async fn shutdown(&self) {
        let sessions: Vec<Arc<Session>> = self.sessions().values().cloned().collect();
        for session in sessions {
            if let Some(turn_id) = session.request_cancel() {
                let _ = self.runtime.interrupt_turn(&session.id, &turn_id).await;
            }
        }
    }

    fn initialize(&self, request: acp::InitializeRequest) -> Answer {
        let _ = self.client.set(request);
        let capabilities = acp::AgentCapabilities::new()
            .load_session(true)
            .prompt_capabilities(
                acp::PromptCapabilities::new()
                    .image(true)
                    .audio(false)
                    .embedded_context(true),
            )
            .mcp_capabilities(acp::McpCapabilities::new().http(true).sse(false))
            .session_capabilities(
                acp::SessionCapabilities::new()
                    .list(acp::SessionListCapabilities::new())
                    .resume(acp::SessionResumeCapabilities::new())
                    .close(acp::SessionCloseCapabilities::new()),
            );
        to_value(
            acp::InitializeResponse::new(agent_client_protocol_schema::ProtocolVersion::V1)
                .agent_capabilities(capabilities)
                .agent_info(
                    acp::Implementation::new("roder", env!("CARGO_PKG_VERSION"))
                        .title("Roder".to_string()),
                ),
        )
    }

    /// The client's name, recorded as who answered an ask.
    pub fn client_id(&self) -> String {
        let name = self
            .client
            .get()
            .and_then(|request| request.client_info.as_ref())
            .map_or("client", |info| info.name.as_str());
        format!("acp:{name}")
    }

    /// Whether the client asked for Zed's terminal `_meta` extension.
    pub fn terminal_meta(&self) -> bool {
        self.client
            .get()
            .and_then(|request| request.client_capabilities.meta.as_ref())
            .and_then(|meta| meta.get("terminal_output"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    async fn new_session(&self, request: acp::NewSessionRequest) -> Answer {
        let cwd = absolute(&request.cwd)?;
        let mut servers = mcp_declaration(request.mcp_servers)?;
        let workspace = cwd.display().to_string();
        let profile = match &self.options.profile {
            Some(spec) => Some(self.resolve_profile(spec, &workspace).await?),
            None => None,
        };
        // The profile's MCP servers become the session's own, beside the
        // editor's.
        if let Some(profile) = &profile {
            servers = profile
                .mcp_declaration(servers)
                .map_err(|error| invalid_params(format!("profile: {error}")))?;
        }
        if let Some(servers) = &servers {
            self.runtime
                .check_thread_tools(MCP_SERVERS, servers)
                .map_err(|error| invalid_params(format!("mcpServers: {error:#}")))?;
        }
        let mut create = CreateThreadRequest::in_workspace(workspace);
        let created = if self.options.worktree {
            self.runtime
                .create_thread_in_workdir_with(
                    create,
                    WorkdirSelection::Materialize(WorkdirRequest {
                        repository: cwd.clone(),
                        selector: None,
                        id: None,
                    }),
                    profile.map(|profile| (Default::default(), profile)),
                )
                .await
        } else {
            create.runner = self.options.runner.clone();
            match profile {
                Some(profile) => {
                    self.runtime
                        .create_thread_with_profile(create, None, Default::default(), profile)
                        .await
                }
                None => self.runtime.create_thread_with(create).await,
            }
        };
        let metadata = created.map_err(internal)?;
        let session = self.register(&metadata, cwd);
        if let Some(servers) = servers {
            self.start_servers(&session.id, servers).await?;
        }
        let choices = session.choices().clone();
        to_value(
            acp::NewSessionResponse::new(session.id.clone())
                .modes(choices.modes())
                .config_options(choices.config_options()),
        )
    }

    /// `session/load` (replays the thread first) and `session/resume`.
    async fn open(
        &self,
        how: Open,
        session_id: &str,
        cwd: &Path,
        servers: Vec<acp::McpServer>,
    ) -> Answer {
        let cwd = absolute(cwd)?;
        let servers = mcp_declaration(servers)?;
        let metadata = self
            .runtime
            .thread_metadata(session_id)
            .await
            .map_err(|_| {
                acp::Error::resource_not_found(None)
                    .data(json!(format!("no session {session_id} in this Roder home")))
            })?;
        let open = self.sessions().get(session_id).cloned();
        let session = match open {
            Some(open) => open,
            None => self.register(&metadata, cwd.clone()),
        };
        if let Some(servers) = servers {
            self.start_servers(&session.id, servers).await?;
        }
        if how == Open::Load {
            self.replay(&session).await?;
        }
        let choices = session.choices().clone();
        match how {
            Open::Load => to_value(
                acp::LoadSessionResponse::new()
                    .modes(choices.modes())
                    .config_options(choices.config_options()),
            ),
            Open::Resume => to_value(
                acp::ResumeSessionResponse::new()
                    .modes(choices.modes())
                    .config_options(choices.config_options()),
            ),
        }
    }

    /// Sends the whole history as updates, before `session/load` answers.
    async fn replay(&self, session: &Session) -> Result<(), acp::Error> {
        let snapshot = self
            .runtime
            .load_thread(&session.id)
            .await
            .map_err(internal)?
            .ok_or_else(|| acp::Error::resource_not_found(None))?;
        let mut translator = Translator::new(
            Source::Replay,
            session.cwd.clone(),
            false,
            self.options.context_window,
        );
        for envelope in &snapshot.events {
            for update in translator.translate(&envelope.event) {
                self.peer.update(&session.id, update).await;
            }
        }
        Ok(())
    }

    async fn list(&self, request: acp::ListSessionsRequest) -> Answer {
        let threads = self.runtime.list_threads().await.map_err(internal)?;
        let wanted = request.cwd.as_ref().map(|cwd| cwd.display().to_string());
        let start: usize = match &request.cursor {
            Some(cursor) => cursor
                .parse()
                .map_err(|_| invalid_params(format!("cursor \"{cursor}\" is not one we gave")))?,
            None => 0,
        };
        let matching: Vec<&ThreadMetadata> = threads
            .iter()
            .filter(|thread| !thread.archived)
            .filter(|thread| wanted.as_ref().is_none_or(|cwd| &thread.workspace == cwd))
            .collect();
        let sessions = matching
            .iter()
            .skip(start)
            .take(LIST_PAGE)
            .map(|thread| {
                let mut info = acp::SessionInfo::new(
                    thread.thread_id.clone(),
                    PathBuf::from(&thread.workspace),
                )
                .updated_at(
                    thread
                        .updated_at
                        .format(&time::format_description::well_known::Rfc3339)
                        .ok(),
                );
                if let Some(title) = &thread.title {
                    info = info.title(title.clone());
                }
                info
            })
            .collect();
        let next = start + LIST_PAGE;
        let mut response = acp::ListSessionsResponse::new(sessions);
        if next < matching.len() {
            response = response.next_cursor(next.to_string());
        }
        to_value(response)
    }

    /// `session/close`: its turn is cancelled, its MCP servers stopped, and
    /// this connection no longer answers its asks.
    async fn close(&self, session_id: &str) {
        self.cancel(session_id).await;
        if self.sessions().remove(session_id).is_some() {
            self.runtime.stop_thread_tools(session_id);
        }
    }

    async fn set_choice(
        &self,
        session: &Session,
        config_id: &str,
        value: &str,
    ) -> Result<(), acp::Error> {
        if config_id == MODE {
            let mode = parse_mode(value).map_err(|refused| invalid_params(refused.0))?;
            self.runtime
                .set_thread_policy_mode(&session.id, Some(mode))
                .await
                .map_err(internal)?;
        }
        let mode_before = session.choices().mode;
        if config_id == PROFILE {
            self.set_profile(session, value).await?;
        }
        let options = {
            let mut choices = session.choices();
            choices
                .set(config_id, value)
                .map_err(|refused| invalid_params(refused.0))?;
            choices.config_options()
        };
        // Both views stay in step, whichever the client changed (a profile
        // may set the mode).
        let mode_after = session.choices().mode;
        if config_id == MODE || mode_after != mode_before {
            self.peer
                .update(
                    &session.id,
                    acp::SessionUpdate::CurrentModeUpdate(acp::CurrentModeUpdate::new(
                        mode_after.as_str().to_string(),
                    )),
                )
                .await;
        }
        self.peer
            .update(
                &session.id,
                acp::SessionUpdate::ConfigOptionUpdate(acp::ConfigOptionUpdate::new(options)),
            )
            .await;
        Ok(())
    }

    /// A session's profile, resolved in its directory.
    async fn resolve_profile(
        &self,
        spec: &roder_api::profile::ProfileRequestSpec,
        workspace: &str,
    ) -> Result<roder_api::profile::ProfileSnapshot, acp::Error> {
        self.runtime
            .resolve_profile(spec, Some(workspace))
            .await
            .map_err(|error| invalid_params(format!("profile: {error:#}")))
    }

    /// The profile option: resolved in the session's directory and given to
    /// its thread, which must not have run a turn (`Runtime::set_thread_profile`);
    /// the mode and model options follow what the profile set.
    async fn set_profile(&self, session: &Session, value: &str) -> Result<(), acp::Error> {
        session
            .choices()
            .check_profile(value)
            .map_err(|refused| invalid_params(refused.0))?;
        let already = session.choices().profile.is_some();
        if value == PROFILE_NONE || already {
            return Ok(());
        }
        let spec = roder_api::profile::ProfileRequestSpec {
            selector: value.to_string(),
            archive: None,
        };
        let workspace = session.cwd.display().to_string();
        let profile = self.resolve_profile(&spec, &workspace).await?;
        if !profile.mcp_servers.is_empty() {
            return Err(invalid_params(format!(
                "profile {} declares MCP servers, which start with a session: choose it with roder acp --profile",
                profile.canonical
            )));
        }
        let metadata = self
            .runtime
            .set_thread_profile(&session.id, profile)
            .await
            .map_err(|error| invalid_params(format!("profile: {error:#}")))?;
        let mut choices = session.choices();
        choices.mode = self.runtime.thread_policy_mode(&metadata);
        choices.model = self.model_of(&metadata);
        if !choices.models.contains(&choices.model) {
            let model = choices.model.clone();
            choices.models.push(model);
        }
        Ok(())
    }

    /// A thread's model as the model option names it, `provider/model`.
    fn model_of(&self, metadata: &ThreadMetadata) -> String {
        match (&metadata.provider, &metadata.model) {
            (Some(provider), Some(model)) => format!("{provider}/{model}"),
            _ => self.default_model(),
        }
    }

    fn register(&self, metadata: &ThreadMetadata, cwd: PathBuf) -> Arc<Session> {
        let model = self.model_of(metadata);
        let mut models = self.options.models.clone();
        if !models.contains(&model) {
            models.push(model.clone());
        }
        let choices = Choices {
            mode: self.runtime.thread_policy_mode(metadata),
            model,
            effort: None,
            models,
            profile: metadata
                .profile
                .as_ref()
                .map(|profile| profile.selector.clone()),
            profiles: self.options.profiles.clone(),
        };
        let session = Arc::new(Session::new(
            metadata.thread_id.clone(),
            cwd,
            choices,
            self.runtime.attach_approver(&metadata.thread_id),
        ));
        self.sessions()
            .insert(metadata.thread_id.clone(), session.clone());
        session
    }

    fn default_model(&self) -> String {
        let config = self.runtime.config();
        format!("{}/{}", config.default_provider, config.default_model)
    }

    async fn start_servers(&self, thread_id: &str, servers: Value) -> Result<(), acp::Error> {
        let started = self
            .runtime
            .start_thread_tools(thread_id, MCP_SERVERS, servers)
            .await
            .map_err(|error| invalid_params(format!("mcpServers: {error:#}")))?;
        for source in &started.sources {
            tracing::info!("session {thread_id}: MCP server {source:?}");
        }
        Ok(())
    }

    pub fn session(&self, session_id: &str) -> Result<Arc<Session>, acp::Error> {
        self.sessions().get(session_id).cloned().ok_or_else(|| {
            acp::Error::resource_not_found(None).data(json!(format!(
                "session {session_id} is not open here: call session/new, session/load or session/resume first"
            )))
        })
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// ACP's `mcpServers` as Roder's per-thread declaration (`None`: none).
/// Stdio and HTTP servers are taken; headers are not (Roder's HTTP servers
/// take a bearer token from an environment variable, which a client may not
/// name), nor SSE.
fn mcp_declaration(servers: Vec<acp::McpServer>) -> Result<Option<Value>, acp::Error> {
    if servers.is_empty() {
        return Ok(None);
    }
    let mut declaration = serde_json::Map::new();
    for server in servers {
        let (name, entry) = match server {
            acp::McpServer::Stdio(stdio) => {
                let env: serde_json::Map<String, Value> = stdio
                    .env
                    .into_iter()
                    .map(|variable| (variable.name, Value::String(variable.value)))
                    .collect();
                (
                    stdio.name,
                    json!({"command": stdio.command, "args": stdio.args, "env": env}),
                )
            }
            acp::McpServer::Http(http) => {
                if !http.headers.is_empty() {
                    return Err(invalid_params(format!(
                        "MCP server \"{}\": headers are not supported (an http server is reached without them)",
                        http.name
                    )));
                }
                (http.name, json!({"url": http.url}))
            }
            acp::McpServer::Sse(sse) => {
                return Err(invalid_params(format!(
                    "MCP server \"{}\": SSE transport is not supported (mcpCapabilities.sse is false)",
                    sse.name
                )));
            }
            _ => return Err(invalid_params("this kind of MCP server is not supported")),
        };
        if declaration.insert(name.clone(), entry).is_some() {
            return Err(invalid_params(format!(
                "two MCP servers are named \"{name}\""
            )));
        }
    }
    Ok(Some(Value::Object(declaration)))
}

fn absolute(path: &Path) -> Result<PathBuf, acp::Error> {
    if path.is_absolute() {
        Ok(path.to_path_buf())
    } else {
        Err(invalid_params(format!(
            "cwd \"{}\" must be an absolute path",
            path.display()
        )))
    }
}

pub(crate) fn to_value(value: impl serde::Serialize) -> Answer {
    serde_json::to_value(value).map_err(acp::Error::into_internal_error)
}

pub(crate) fn invalid_params(message: impl Into<String>) -> acp::Error {
    acp::Error::invalid_params().data(json!(message.into()))
}

pub(crate) fn internal(error: anyhow::Error) -> acp::Error {
    acp::Error::internal_error().data(json!(format!("{error:#}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_servers_become_a_declaration_and_unsupported_ones_are_named() {
        let servers: Vec<acp::McpServer> = serde_json::from_value(json!([
            {"name": "time", "command": "/usr/bin/mcp-server-time", "args": ["--x"], "env": [{"name": "A", "value": "1"}]},
            {"type": "http", "name": "web", "url": "http://127.0.0.1:1/mcp", "headers": []}
        ]))
        .unwrap();
        let declaration = mcp_declaration(servers).unwrap().unwrap();
        assert_eq!(declaration["time"]["command"], "/usr/bin/mcp-server-time");
        assert_eq!(declaration["time"]["env"]["A"], "1");
        assert_eq!(declaration["web"]["url"], "http://127.0.0.1:1/mcp");
        let sse: Vec<acp::McpServer> = serde_json::from_value(json!([
            {"type": "sse", "name": "old", "url": "http://x", "headers": []}
        ]))
        .unwrap();
        assert!(mcp_declaration(sse).is_err());
        assert_eq!(mcp_declaration(Vec::new()).unwrap(), None);
    }
}
