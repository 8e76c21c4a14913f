//! What the fake server remembers: sprites, exec sessions, the request log
//! and the faults queued for injection.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};
use tokio::sync::{Notify, watch};

use super::FakeRoute;

/// State shared by every handler.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The bearer token every request must carry.
    pub token: String,
    /// Host directory holding one subdirectory per sprite.
    pub root: PathBuf,
    pub inner: Mutex<Inner>,
    /// Bumped after exec sessions start or end, for waiters. Never sent
    /// while `inner` is locked, so a waiter may lock `inner` in its check.
    pub changed: watch::Sender<u64>,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        // Handlers never panic while holding the lock; recover if a test did.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes everyone waiting for a state change.
    pub(crate) fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The host directory standing in for sprite `name`'s `/`.
    pub(crate) fn sprite_root(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }
}

/// Mutable state behind the lock.
#[derive(Debug)]
pub(crate) struct Inner {
    pub sprites: BTreeMap<String, FakeSprite>,
    pub log: Vec<super::RecordedRequest>,
    pub faults: Vec<Fault>,
    pub creates: usize,
    pub deletes: usize,
    /// Answer exec with `application/json` instead of frames.
    pub exec_json: bool,
    /// The next checkpoint reports this error in-band (under HTTP 200).
    pub checkpoint_error: Option<String>,
    /// How many supervisor-backed requests a newly created sprite answers
    /// with 503 "Process not ready" (see [`FakeSprite::not_ready`]).
    pub not_ready_window: usize,
}

/// Requests a new sprite refuses with 503 unless a test sets another
/// window: the live service's process supervisor is not up at once.
pub(crate) const DEFAULT_NOT_READY_WINDOW: usize = 1;

impl Default for Inner {
    fn default() -> Self {
        Self {
            sprites: BTreeMap::new(),
            log: Vec::new(),
            faults: Vec::new(),
            creates: 0,
            deletes: 0,
            exec_json: false,
            checkpoint_error: None,
            not_ready_window: DEFAULT_NOT_READY_WINDOW,
        }
    }
}

impl Inner {
    /// Takes one injected fault for `route`, if any is queued.
    pub(crate) fn take_fault(&mut self, route: FakeRoute) -> Option<(u16, Option<u64>)> {
        let index = self
            .faults
            .iter()
            .position(|f| f.remaining > 0 && (f.route == route || f.route == FakeRoute::Any))?;
        let fault = &mut self.faults[index];
        fault.remaining -= 1;
        let taken = (fault.status, fault.retry_after);
        if fault.remaining == 0 {
            self.faults.remove(index);
        }
        Some(taken)
    }
}

/// A queued failure: the next `remaining` requests to `route` get `status`.
#[derive(Debug, Clone)]
pub(crate) struct Fault {
    pub route: FakeRoute,
    pub status: u16,
    pub remaining: usize,
    pub retry_after: Option<u64>,
}

/// One sprite.
#[derive(Debug)]
pub(crate) struct FakeSprite {
    pub id: String,
    pub name: String,
    pub status: &'static str,
    pub created_at: String,
    pub updated_at: String,
    pub checkpoints: Vec<FakeCheckpoint>,
    pub sessions: BTreeMap<u32, ExecSession>,
    /// Supervisor-backed requests (exec, exec sessions, kill, fs) still to
    /// be refused with 503 "Process not ready", as right after a create.
    pub not_ready: usize,
    /// The network policy (`{"rules": [...]}`) as last set through the API.
    pub network_policy: Value,
    /// How many times the network policy was set.
    pub network_policy_sets: usize,
}

impl FakeSprite {
    /// A sprite whose process supervisor is already up (`not_ready` 0).
    pub(crate) fn new(name: &str) -> Self {
        let now = now_rfc3339();
        Self {
            id: uuid::Uuid::new_v4().to_string(),
            name: name.to_string(),
            status: "cold",
            created_at: now.clone(),
            updated_at: now,
            checkpoints: Vec::new(),
            sessions: BTreeMap::new(),
            not_ready: 0,
            network_policy: initial_network_policy(),
            network_policy_sets: 0,
        }
    }

    /// Tells every running command to die with its process group.
    pub(crate) fn abort_all(&self) {
        for session in self.sessions.values() {
            session.abort.notify_one();
        }
    }

    /// The sprite object as the API returns it.
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "name": self.name,
            "organization": "fake-org",
            "url": format!("https://{}-fakeorg.sprites.app", self.name),
            "url_settings": { "auth": "sprite" },
            "status": self.status,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        })
    }
}

/// A checkpoint that was "taken" (the fake records it; it copies no files).
#[derive(Debug, Clone)]
pub(crate) struct FakeCheckpoint {
    pub id: String,
    pub comment: Option<String>,
    pub created_at: String,
}

/// A process started by an HTTP exec, keyed by its host PID (which is also
/// its process group id). Like on the live service it is not an exec
/// *session*: `GET /exec` lists only tmux sessions, and the fake has none.
/// It is kept so tests can see what is still running.
#[derive(Debug)]
pub(crate) struct ExecSession {
    /// Notified when the exec's request ends early (client gone), or the
    /// sprite or server goes away: the supervisor then SIGKILLs the group.
    pub abort: Arc<Notify>,
    /// Becomes `Some(exit code)` when the process has exited and every
    /// holder of its output pipes (its process group) is gone.
    pub exited: watch::Receiver<Option<i32>>,
}

impl ExecSession {
    pub(crate) fn is_active(&self) -> bool {
        self.exited.borrow().is_none()
    }
}

/// The policy of a sprite nobody has set one for. The docs say egress "is
/// not wide open" by default without giving the rules; the common
/// development domains (`defaults`) are assumed.
pub(crate) fn initial_network_policy() -> Value {
    json!({ "rules": [{ "include": "defaults" }] })
}

pub(crate) fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Resolves a sprite path (`path`, relative to `working_dir` unless absolute)
/// to a normalized absolute sprite path. `..` never climbs above `/`.
pub(crate) fn sprite_path(working_dir: &str, path: &str) -> String {
    let joined = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{working_dir}/{path}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Where an absolute sprite path lives on the host.
pub(crate) fn host_path(sprite_root: &Path, sprite_path: &str) -> PathBuf {
    sprite_root.join(sprite_path.trim_start_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sprite_paths_stay_inside_the_sprite() {
        assert_eq!(sprite_path("/home/sprite", "a/b"), "/home/sprite/a/b");
        assert_eq!(sprite_path("/w", "/etc/x"), "/etc/x");
        assert_eq!(sprite_path("/w", "../../../x"), "/x");
        assert_eq!(sprite_path("/", "./a/./b/"), "/a/b");
        assert_eq!(
            host_path(Path::new("/tmp/s"), "/a/b"),
            PathBuf::from("/tmp/s/a/b")
        );
        assert_eq!(
            host_path(Path::new("/tmp/s"), "/"),
            PathBuf::from("/tmp/s/")
        );
    }

    #[test]
    fn faults_are_consumed_in_order() {
        let mut inner = Inner::default();
        inner.faults.push(Fault {
            route: FakeRoute::GetSprite,
            status: 500,
            remaining: 2,
            retry_after: None,
        });
        assert_eq!(inner.take_fault(FakeRoute::Exec), None);
        assert_eq!(inner.take_fault(FakeRoute::GetSprite), Some((500, None)));
        assert_eq!(inner.take_fault(FakeRoute::GetSprite), Some((500, None)));
        assert_eq!(inner.take_fault(FakeRoute::GetSprite), None);
        assert!(inner.faults.is_empty());
    }
}
