//! Roder as an Agent Client Protocol (ACP, version 1) agent: an editor
//! (Zed, JetBrains IDEs, Neovim and Emacs plugins) starts `roder acp` and
//! drives the runtime over stdio.
//!
//! One ACP session is one Roder thread (the session id is the thread id),
//! so `session/load` works in any later process. The wire types are the
//! official ones (`agent-client-protocol-schema`, module `v1`); the framing
//! is the app server's (`roder_app_server::framing`). The editor answers
//! the runtime's approvals: an ask becomes `session/request_permission`.
//!
//! Where to look:
//! * `serve.rs`: the stdio loop (messages in, concurrency, end of input).
//! * `peer.rs`: what goes out, and the answers to our own requests.
//! * `agent.rs`: each method; `turn.rs`: `session/prompt`.
//! * `updates.rs`: runtime events as `session/update`s, live and replayed.
//! * `permission.rs`: asks as permission requests, answers as decisions.
//! * `options.rs`: modes and config options; `input.rs`: prompt content.
//!
//! ```no_run
//! # async fn demo(runtime: std::sync::Arc<roder_core::Runtime>) -> anyhow::Result<()> {
//! roder_acp::serve_stdio(
//!     runtime,
//!     tokio::io::stdin(),
//!     tokio::io::stdout(),
//!     roder_acp::AcpOptions::default(),
//! )
//! .await
//! # }
//! ```
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod agent;
mod diff;
mod input;
mod options;
mod peer;
mod permission;
mod serve;
mod session;
mod turn;
mod updates;

pub use serve::serve_stdio;

use roder_core::ThreadRunnerSelection;

/// How `roder acp` opens sessions.
#[derive(Debug, Clone, PartialEq)]
pub struct AcpOptions {
    /// New sessions' threads run their tools in this runner (a docker
    /// sandbox, ...).
    pub runner: Option<ThreadRunnerSelection>,
    /// New sessions work in a fresh git worktree of the repository holding
    /// their `cwd` (the editor's checkout is untouched).
    pub worktree: bool,
    /// The models the model option offers, as `provider/model` (a
    /// session's own model is added when missing).
    pub models: Vec<String>,
    /// The model's context window in tokens: `usage_update` is sent only
    /// when it is known.
    pub context_window: Option<u64>,
    /// The longest message line taken.
    pub max_message_bytes: usize,
    /// New sessions' threads run as this profile, resolved in each
    /// session's directory by the runtime's resolver and stored with the
    /// thread before its first turn.
    pub profile: Option<roder_api::profile::ProfileRequestSpec>,
    /// The selectors the profile option offers (`roder profiles list`);
    /// empty: no profile option.
    pub profiles: Vec<String>,
}

impl Default for AcpOptions {
    fn default() -> Self {
        Self {
            runner: None,
            worktree: false,
            models: Vec::new(),
            context_window: None,
            max_message_bytes: 64 * 1024 * 1024,
            profile: None,
            profiles: Vec::new(),
        }
    }
}
