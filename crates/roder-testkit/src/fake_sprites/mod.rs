//! A fake Fly.io Sprites API server for tests.
//!
//! It speaks the wire format of `SPRITES_API.md` over real HTTP on
//! 127.0.0.1: sprite create/get/list/delete, HTTP exec with framed streaming
//! output, `fs/read` and `fs/write`, and checkpoints as NDJSON streams.
//! Every request must carry `Authorization: Bearer <token>` (see
//! [`FakeSpritesServer::token`]); anything else gets 401 `{"error": …}`.
//!
//! **It behaves as the live server does** (superfly/sprites-go, `server/api/
//! exec_http.go`, `exec.go`, `server.go`; `SPRITES_API.md` section 3a), so a
//! client that passes against it does not fail live for these reasons:
//!
//! * An exec without `env` parameters runs with an **empty environment** (no
//!   `PATH`, no `HOME`); with them, it gets exactly those. `dir` defaults to
//!   `/home/sprite`.
//! * A newly created sprite answers its first supervisor-backed requests
//!   (exec, exec sessions, kill, `fs/*`) with **503 "Process not ready"**
//!   (plain text): one request by default, see
//!   [`FakeSpritesServer::set_not_ready_window`]. Adopted sprites
//!   ([`FakeSpritesServer::insert_sprite`]) are ready.
//! * Creating a sprite whose name exists answers **409**.
//! * When an exec's request ends before its command (the client aborted
//!   it), the command's **process group is SIGKILLed**. `GET /exec` lists
//!   only tmux sessions, which the fake has none of, so HTTP execs never
//!   appear there and `kill` on any id is 404.
//! * An exit by signal reports 255.
//! * The network policy (`GET`/`POST …/policy/network`) is validated against
//!   the documented rule forms, stored, echoed back and written to
//!   `/.sprite/policy/network.json` in the sprite, as the live sprite
//!   exposes it. It is **not enforced**: commands are host processes (see
//!   below), so tests check the call, not the effect.
//!
//! **Commands run on the host.** Each sprite is a directory inside a
//! temporary directory, standing in for the sprite's filesystem: the sprite
//! path `/home/sprite/workspace` is `<tempdir>/<sprite>/home/sprite/workspace`
//! on the host. Exec's `dir` is mapped that way and the command runs there as
//! a real local process (so its output, exit code and timing are real), but
//! the command itself sees the host: paths inside its arguments and
//! environment values (`HOME=/home/sprite`) are not translated, and it can
//! reach anything the test process can. Use relative paths in commands.
//! Without `PATH` the host's `execvp` default (`/bin:/usr/bin`) finds the
//! program, much as the live server looks it up with its own `PATH`.
//!
//! Fault injection ([`FakeSpritesServer::fail_next`]) makes the next N
//! requests to a route answer with a status (and `Retry-After`), so clients'
//! retry and error paths can be tested without a real outage.

mod checkpoint;
mod exec;
mod fs;
mod policy;
mod routes;
mod state;

use axum::serve::ListenerExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;

use state::{FakeSprite, Fault, Inner, Shared};

/// A call of the API, for fault injection and request counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FakeRoute {
    /// `POST /v1/sprites`
    CreateSprite,
    /// `GET /v1/sprites`
    ListSprites,
    /// `GET /v1/sprites/{name}`
    GetSprite,
    /// `DELETE /v1/sprites/{name}`
    DeleteSprite,
    /// `POST /v1/sprites/{name}/exec`
    Exec,
    /// `GET /v1/sprites/{name}/exec`
    ExecSessions,
    /// `POST /v1/sprites/{name}/exec/{id}/kill`
    KillExec,
    /// `GET /v1/sprites/{name}/fs/read`
    FsRead,
    /// `PUT /v1/sprites/{name}/fs/write`
    FsWrite,
    /// `POST /v1/sprites/{name}/checkpoint`
    Checkpoint,
    /// `GET /v1/sprites/{name}/checkpoints`
    ListCheckpoints,
    /// `GET /v1/sprites/{name}/policy/network`
    GetNetworkPolicy,
    /// `POST /v1/sprites/{name}/policy/network`
    SetNetworkPolicy,
    /// Anything else.
    Other,
    /// Matches every route (fault injection only).
    Any,
}

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// The raw query string, without `?`.
    pub query: String,
    pub route: FakeRoute,
    /// Whether it carried the right bearer token.
    pub authorized: bool,
}

impl RecordedRequest {
    /// Every value of query parameter `key`, decoded, in order.
    pub fn query_values(&self, key: &str) -> Vec<String> {
        routes::query_pairs(&self.query)
            .into_iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v)
            .collect()
    }
}

/// The running fake. Dropping it stops the server and kills running commands.
pub struct FakeSpritesServer {
    shared: Arc<Shared>,
    base_url: String,
    task: JoinHandle<()>,
    // Declared last: dropped after the task, so no handler outlives the directory.
    _dir: tempfile::TempDir,
}

impl std::fmt::Debug for FakeSpritesServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeSpritesServer")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl FakeSpritesServer {
    /// Binds 127.0.0.1 on a free port and starts serving.
    pub async fn start() -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("fake-sprites-").tempdir()?;
        let shared = Arc::new(Shared {
            token: format!("fake-sprites-token-{}", uuid::Uuid::new_v4().simple()),
            root: dir.path().to_path_buf(),
            inner: Mutex::new(Inner::default()),
            changed: tokio::sync::watch::channel(0).0,
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base_url = format!("http://{}", listener.local_addr()?);
        let app = routes::router(Arc::clone(&shared));
        let task = tokio::spawn(async move {
            // Serving only ends when the task is aborted on drop.
            let _ = axum::serve(listener.tap_io(no_delay), app).await;
        });
        Ok(Self {
            shared,
            base_url,
            task,
            _dir: dir,
        })
    }

    /// `http://127.0.0.1:<port>`, without a trailing slash.
    pub fn base_url(&self) -> String {
        self.base_url.clone()
    }

    /// The bearer token the server accepts.
    pub fn token(&self) -> &str {
        &self.shared.token
    }

    /// Names of the sprites that exist now, sorted.
    pub fn sprite_names(&self) -> Vec<String> {
        self.shared.lock().sprites.keys().cloned().collect()
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().log.clone()
    }

    /// How many requests hit `route` (injected failures included).
    pub fn count(&self, route: FakeRoute) -> usize {
        self.shared
            .lock()
            .log
            .iter()
            .filter(|r| route == FakeRoute::Any || r.route == route)
            .count()
    }

    /// Sprites created successfully.
    pub fn creates(&self) -> usize {
        self.shared.lock().creates
    }

    /// Sprites deleted successfully.
    pub fn deletes(&self) -> usize {
        self.shared.lock().deletes
    }

    /// Ids of the checkpoints taken of sprite `name`, oldest first.
    pub fn checkpoints(&self, name: &str) -> Vec<String> {
        self.shared
            .lock()
            .sprites
            .get(name)
            .map(|s| s.checkpoints.iter().map(|c| c.id.clone()).collect())
            .unwrap_or_default()
    }

    /// Commands started by exec in sprite `name` that are still running: the
    /// process, or anything in its process group holding its output pipes.
    /// (They are not exec *sessions* on the wire; the name is historical.)
    pub fn active_exec_sessions(&self, name: &str) -> usize {
        self.shared
            .lock()
            .sprites
            .get(name)
            .map(|s| s.sessions.values().filter(|e| e.is_active()).count())
            .unwrap_or(0)
    }

    /// Waits until sprite `name` has a running exec session, so a test can
    /// act on a command that is known to be in flight.
    pub async fn wait_for_active_exec(&self, name: &str, timeout: Duration) -> anyhow::Result<()> {
        // Subscribe before checking, so a change in between is not missed.
        let mut changes = self.shared.changed.subscribe();
        let wait = async {
            while self.active_exec_sessions(name) == 0 {
                if changes.changed().await.is_err() {
                    break;
                }
            }
        };
        tokio::time::timeout(timeout, wait).await.map_err(|_| {
            anyhow::anyhow!("no exec session became active in sprite {name} within {timeout:?}")
        })
    }

    /// Waits until nothing started by exec is running in sprite `name` (or
    /// the sprite is gone), e.g. after a client aborted a request.
    pub async fn wait_for_no_active_exec(
        &self,
        name: &str,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        let mut changes = self.shared.changed.subscribe();
        let wait = async {
            while self.active_exec_sessions(name) > 0 {
                if changes.changed().await.is_err() {
                    break;
                }
            }
        };
        tokio::time::timeout(timeout, wait).await.map_err(|_| {
            anyhow::anyhow!(
                "{} command(s) still running in sprite {name} after {timeout:?}",
                self.active_exec_sessions(name)
            )
        })
    }

    /// How many supervisor-backed requests each sprite created from now on
    /// answers with 503 "Process not ready" before it serves them (default
    /// 1; 0 makes new sprites ready at once). Counted per sprite, injected
    /// faults first.
    pub fn set_not_ready_window(&self, requests: usize) {
        self.shared.lock().not_ready_window = requests;
    }

    /// Makes existing sprite `name` answer its next `requests`
    /// supervisor-backed requests with 503 "Process not ready", as a sprite
    /// waking from cold does while its supervisor restarts. `false` if there
    /// is no such sprite.
    pub fn set_sprite_not_ready(&self, name: &str, requests: usize) -> bool {
        match self.shared.lock().sprites.get_mut(name) {
            Some(sprite) => {
                sprite.not_ready = requests;
                true
            }
            None => false,
        }
    }

    /// The host path of sprite path `sprite_path` (absolute) in sprite
    /// `name`, whether or not it exists; `None` if there is no such sprite.
    pub fn host_path(&self, name: &str, sprite_path: &str) -> Option<PathBuf> {
        let exists = self.shared.lock().sprites.contains_key(name);
        exists.then(|| state::host_path(&self.shared.sprite_root(name), sprite_path))
    }

    /// Creates sprite `name` directly, as if someone else had made it.
    pub async fn insert_sprite(&self, name: &str) -> anyhow::Result<()> {
        tokio::fs::create_dir_all(self.shared.sprite_root(name).join("home/sprite")).await?;
        self.shared
            .lock()
            .sprites
            .insert(name.to_string(), FakeSprite::new(name));
        Ok(())
    }

    /// The next `times` requests to `route` answer `status` with an
    /// `{"error": "injected fault"}` body and, if given, `Retry-After`.
    pub fn fail_next(&self, route: FakeRoute, times: usize, status: u16, retry_after: Option<u64>) {
        self.shared.lock().faults.push(Fault {
            route,
            status,
            remaining: times,
            retry_after,
        });
    }

    /// Sprite `name`'s network policy (`{"rules": [...]}`) as last set
    /// through the API (a sprite nobody set one for has
    /// `{"rules": [{"include": "defaults"}]}`); `None` if there is no such
    /// sprite.
    pub fn network_policy(&self, name: &str) -> Option<serde_json::Value> {
        self.shared
            .lock()
            .sprites
            .get(name)
            .map(|s| s.network_policy.clone())
    }

    /// How many times sprite `name`'s network policy was set (0 if there is
    /// no such sprite).
    pub fn network_policy_sets(&self, name: &str) -> usize {
        self.shared
            .lock()
            .sprites
            .get(name)
            .map_or(0, |s| s.network_policy_sets)
    }

    /// Answer exec with an `application/json` body instead of frames.
    pub fn set_exec_json(&self, json: bool) {
        self.shared.lock().exec_json = json;
    }

    /// The next checkpoint streams an in-band `error` line under HTTP 200.
    pub fn fail_next_checkpoint_in_band(&self, message: &str) {
        self.shared.lock().checkpoint_error = Some(message.to_string());
    }
}

impl Drop for FakeSpritesServer {
    fn drop(&mut self) {
        self.task.abort();
        let inner = self.shared.lock();
        for sprite in inner.sprites.values() {
            sprite.abort_all();
        }
    }
}

#[cfg(test)]
mod tests;

/// Small frames (SSE chunks, notifications) go out at once: without
/// `TCP_NODELAY`, Nagle's algorithm meets the peer's delayed ACK and adds
/// ~40 ms to every exchange.
fn no_delay(stream: &mut tokio::net::TcpStream) {
    let _ = stream.set_nodelay(true);
}
