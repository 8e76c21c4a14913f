//! The sandbox executor in a docker session: started once, on the
//! session's first command or file call, and used for every call after it.
//! Where it cannot run (no helper in this build, an image of another
//! architecture, nowhere writable to put it) the session says so once and
//! uses plain execs and the archive API instead.

mod binary;
mod calls;
mod process;
mod start;

pub use calls::{read_file, run_command, write_file};
pub use process::spawn as spawn_process;

use bollard::Docker;
use roder_executor::client::Executor;
use tokio::sync::Mutex;

use crate::archive::WriteRules;
use crate::config::ExecutorMode;

enum Slot {
    Untried,
    Ready(Executor),
    /// Why the helper cannot run in this container (the fallback's note).
    Unavailable(String),
}

/// One session's helper, started at most once at a time.
pub struct ExecutorSlot {
    mode: ExecutorMode,
    slot: Mutex<Slot>,
}

impl ExecutorSlot {
    pub fn new(mode: ExecutorMode) -> Self {
        Self {
            mode,
            slot: Mutex::new(Slot::Untried),
        }
    }

    /// The session's helper, started if it is not running (again, if its
    /// connection broke: the container was restarted). `None` means plain
    /// execs: the config turned it off, or it cannot run here.
    pub async fn get(
        &self,
        docker: &Docker,
        container: &str,
        workdir: &str,
        rules: &WriteRules,
    ) -> Option<Executor> {
        if self.mode == ExecutorMode::Off {
            return None;
        }
        let mut slot = self.slot.lock().await;
        match &*slot {
            Slot::Ready(executor) if !executor.is_closed() => return Some(executor.clone()),
            Slot::Unavailable(_) => return None,
            Slot::Ready(_) | Slot::Untried => {}
        }
        match start::start(docker, container, workdir, rules).await {
            Ok(executor) => {
                *slot = Slot::Ready(executor.clone());
                Some(executor)
            }
            Err(reason) => {
                tracing::warn!(
                    container = container.get(..12).unwrap_or(container),
                    "the sandbox executor cannot run in this container, so commands and files use plain execs and the archive API: {reason}"
                );
                *slot = Slot::Unavailable(reason);
                None
            }
        }
    }

    /// Why the session uses plain execs, once it found out.
    pub async fn fallback_reason(&self) -> Option<String> {
        match &*self.slot.lock().await {
            Slot::Unavailable(reason) => Some(reason.clone()),
            _ if self.mode == ExecutorMode::Off => {
                Some("the destination sets `executor` to \"off\"".to_string())
            }
            _ => None,
        }
    }

    /// Stops the helper (closing its stream makes it kill what it runs and
    /// exit); a later call starts a new one.
    pub async fn stop(&self) {
        let mut slot = self.slot.lock().await;
        if matches!(*slot, Slot::Ready(_)) {
            *slot = Slot::Untried;
        }
    }
}
