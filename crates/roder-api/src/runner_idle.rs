//! What happens to a sandbox nobody is using.
//!
//! A sandbox outlives the process that made it, so a thread can go on in it
//! later; left running, a few `roder exec` runs leave live containers
//! holding memory. A destination's [`ON_IDLE_CONFIG_KEY`] says what the
//! runtime does with a session when no process of it needs the session any
//! more (the process is exiting): `pause` it (the default where the
//! provider can pause: the thread's next turn, in any process, wakes it
//! without the user asking), `stop` it (started again by the next turn) or
//! `keep` it running. The key belongs to the
//! runtime; providers ignore it.

/// The destination-config key naming the idle action.
///
/// ```
/// use roder_api::runner_idle::{on_idle, OnIdle, ON_IDLE_CONFIG_KEY};
///
/// let keep = serde_json::json!({ ON_IDLE_CONFIG_KEY: "keep", "image": "x" });
/// assert_eq!(on_idle(&keep, true), Ok(OnIdle::Keep));
/// assert_eq!(on_idle(&serde_json::json!({}), true), Ok(OnIdle::Pause));
/// assert_eq!(on_idle(&serde_json::json!({}), false), Ok(OnIdle::Keep));
/// assert!(on_idle(&serde_json::json!({ ON_IDLE_CONFIG_KEY: "pause" }), false).is_err());
/// let stop = serde_json::json!({ ON_IDLE_CONFIG_KEY: "stop" });
/// assert_eq!(on_idle(&stop, false), Ok(OnIdle::Stop));
/// ```
pub const ON_IDLE_CONFIG_KEY: &str = "on_idle";

/// What the runtime does with an idle session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnIdle {
    /// Pause it; the thread's next use resumes it.
    Pause,
    /// Leave it running.
    Keep,
    /// Stop it (no process left, memory freed; the filesystem stays); the
    /// thread's next use starts it again. Providers that cannot say so when
    /// asked (`RemoteRunnerSession::stop`).
    Stop,
}

/// The idle action `config` asks for, for a provider that can pause
/// (`pausable`) or not. Absent: pause where possible, else keep.
pub fn on_idle(config: &serde_json::Value, pausable: bool) -> Result<OnIdle, String> {
    let Some(value) = config.get(ON_IDLE_CONFIG_KEY) else {
        return Ok(if pausable {
            OnIdle::Pause
        } else {
            OnIdle::Keep
        });
    };
    match value.as_str() {
        Some("pause") if pausable => Ok(OnIdle::Pause),
        Some("pause") => Err(format!(
            "runner config \"{ON_IDLE_CONFIG_KEY}\" is \"pause\" but this runner provider cannot pause sessions; use \"keep\""
        )),
        Some("keep") => Ok(OnIdle::Keep),
        Some("stop") => Ok(OnIdle::Stop),
        _ => Err(format!(
            "runner config \"{ON_IDLE_CONFIG_KEY}\" must be \"pause\", \"stop\" or \"keep\", not {value}"
        )),
    }
}
