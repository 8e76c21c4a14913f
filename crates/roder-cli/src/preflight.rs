//! What `roder exec` can know is wrong before it creates a thread: a turn
//! whose model cannot authenticate would only fail after the thread was
//! saved, leaving an empty thread behind in `roder threads list`.
//!
//! The rest is checked just as early elsewhere: the model label and its
//! provider when the settings load (`config::ModelError`), `--runner NAME`
//! and its provider in `exec::create_thread`, before the runtime creates
//! anything.

use crate::config::{ProviderEntry, Settings};

/// Whether provider `provider`'s API key variable is set (non-blank), when
/// it needs one. The error names the variable and how to set it.
pub fn model_key(settings: &Settings, provider: &str) -> anyhow::Result<()> {
    let entry = settings.providers.get(provider).ok_or_else(|| {
        anyhow::anyhow!(
            "model provider \"{provider}\" is not configured (configured: {}); add a [providers.{provider}] table to {}",
            settings.providers.keys().cloned().collect::<Vec<_>>().join(", "),
            settings.home.join("config.toml").display()
        )
    })?;
    let Some(variable) = missing_key(provider, entry) else {
        return Ok(());
    };
    anyhow::bail!(
        "model provider \"{provider}\" needs an API key in {variable}, which is not set; export {variable}=<your key>, or pick another model with --model PROVIDER/MODEL (`roder doctor` checks the whole set-up)"
    )
}

/// The variable provider `name`'s key must be in, when it needs one and the
/// variable is unset or blank (what the engines would refuse at the first
/// request).
pub fn missing_key(name: &str, entry: &ProviderEntry) -> Option<String> {
    let source = crate::wiring::api_key(name, entry);
    let variable = source.variable()?;
    let set = std::env::var(variable).is_ok_and(|key| !key.trim().is_empty());
    (!set).then(|| variable.to_string())
}
