//! Configuration: `$RODER_HOME/config.toml`, overridden by the environment
//! (`RODER_MODEL`) and then by flags.

mod file;
pub mod mcp_servers;
mod rule_store;
mod settings;
pub mod starter;
pub mod store;

pub use file::{ProviderEntry, ProviderKind, RunnerEntry};
pub use rule_store::ConfigRuleStore;
pub use settings::{ModelError, Settings};
