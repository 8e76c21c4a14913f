//! A `placement = "runner"` server: one connection per runner session (so
//! per thread), each started on the first call of the server's tools in that
//! session and started again there after it died.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use roder_api::remote_runner::RemoteRunnerSession;

use crate::config::McpServerConfig;
use crate::connection::McpConnection;
use crate::tool_cache::{self, CachedTool};

pub struct RunnerServer {
    config: McpServerConfig,
    /// One per live session. A connection whose session is gone is dropped
    /// (with it the pump, and the runner kills the process) on the next
    /// lookup.
    connections: Mutex<Vec<Arc<McpConnection>>>,
    /// Where its tool list is kept: the first start in each session saves
    /// what the server lists, so the next Roder process offers its tools
    /// with their schemas (the registry is built before any sandbox exists).
    cache_dir: Option<PathBuf>,
}

impl RunnerServer {
    pub fn new(config: McpServerConfig, cache_dir: Option<PathBuf>) -> Self {
        Self {
            config,
            connections: Mutex::new(Vec::new()),
            cache_dir,
        }
    }

    pub fn config(&self) -> &McpServerConfig {
        &self.config
    }

    /// The connection of `session`, created (not yet started) if it has none.
    pub fn connection_for(&self, session: &Arc<dyn RemoteRunnerSession>) -> Arc<McpConnection> {
        let mut connections = match self.connections.lock() {
            Ok(connections) => connections,
            Err(poisoned) => poisoned.into_inner(),
        };
        connections.retain(|connection| !connection.session_gone());
        if let Some(connection) = connections
            .iter()
            .find(|connection| connection.runs_in(session))
        {
            return connection.clone();
        }
        let connection = Arc::new(McpConnection::in_runner(self.config.clone(), session));
        connections.push(connection.clone());
        if let Some(dir) = self.cache_dir.clone() {
            // Shares the start with the call that asked (one start per slot).
            let listing = connection.clone();
            tokio::spawn(async move {
                if let Ok(listed) = listing.list_tools().await {
                    let cached = listed.iter().map(CachedTool::listed).collect();
                    tool_cache::save(&dir, listing.config(), cached).await;
                }
            });
        }
        connection
    }

    /// How many sessions have a connection now (tests).
    pub fn sessions(&self) -> usize {
        match self.connections.lock() {
            Ok(connections) => connections.len(),
            Err(poisoned) => poisoned.into_inner().len(),
        }
    }
}
