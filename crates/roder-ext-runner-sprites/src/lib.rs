//! Roder runner provider for [Fly.io Sprites](https://sprites.dev): hosted
//! microVMs with a persistent disk, driven over their REST API.
//!
//! A session is one sprite. Commands run through HTTP exec, files move
//! through the filesystem API, snapshots are Sprites checkpoints and the
//! sprite's URL serves port previews. The API token comes from the
//! `SPRITES_TOKEN` environment variable only: the destination config is
//! persisted with the thread and must never hold it.
//!
//! Destination config (all keys optional):
//!
//! ```json
//! {
//!   "sprite_name": "my-sprite",
//!   "sprite_name_prefix": "roder",
//!   "cleanup": "delete-on-close",
//!   "working_dir": "/home/sprite/workspace",
//!   "base_url": "https://api.sprites.dev"
//! }
//! ```
//!
//! The runtime adds `workspace`, the thread's bound workspace; it is the root
//! files resolve against and commands run in, and a `working_dir` that
//! differs from it is refused. It also adds `sandbox`, the sandbox policy
//! (`roder_api::sandbox_policy::SandboxPolicy`): its network setting becomes
//! the sprite's network policy, its environment rules decide what each exec
//! sends, and [`SpritesRunnerProvider::protections`] says what else holds.
//!
//! See the crate README for which wire details are documented by Fly.io and
//! which are assumed.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod checkpoint;
mod client;
mod config;
mod error;
mod exec;
mod exec_frames;
mod ndjson;
mod paths;
mod provider;
mod retry;
mod sandbox;
mod session;

pub use config::{Cleanup, DEFAULT_NAME_PREFIX, DEFAULT_WORKING_DIR, SpritesConfig};
pub use error::SpritesError;
pub use provider::{HostEnv, SpritesProviderOptions, SpritesRunnerProvider, TokenSource};
pub use retry::RetryPolicy;

/// The provider id destinations use to pick this runner.
pub const PROVIDER_ID: &str = "sprites";
/// Live tests against the real API run only when this variable is `1`.
pub const LIVE_ENV: &str = "RODER_SPRITES_LIVE";
/// The environment variable holding the Sprites API token.
pub const TOKEN_ENV: &str = "SPRITES_TOKEN";
/// Optional environment override of the API base URL.
pub const API_URL_ENV: &str = "SPRITES_API_URL";
/// The public API.
pub const DEFAULT_API_URL: &str = "https://api.sprites.dev";
