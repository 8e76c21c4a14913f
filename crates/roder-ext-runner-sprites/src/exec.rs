//! Running one command in a sprite: deadline, cancellation and clean-up.
//!
//! HTTP exec is one request that streams until the command exits, so a
//! deadline or a cancellation aborts the request on the client. The command
//! may keep running in the sprite after that (the server's behaviour on a
//! dropped HTTP exec is not documented), so the runner then looks for the
//! command in the sprite's exec sessions and asks the server to kill it. It
//! kills only a session it can identify unambiguously (same argv, same
//! working directory, still active): killing the wrong process would be
//! worse than leaving one to finish.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use roder_api::remote_runner::{RunnerCommandRequest, RunnerCommandResult};
use serde_json::Value;
use tokio::sync::oneshot;

use crate::client::{ExecCall, ExecSessionInfo, KillOutcome, SpritesClient};
use crate::error::SpritesError;
use crate::exec_frames::{ExecCollector, push_note};
use crate::paths::resolve;

/// `PATH` added when the caller sets an environment without one: setting
/// `env` on an exec replaces the sprite's default environment, and without
/// `PATH` nothing but absolute programs would run.
pub(crate) const DEFAULT_PATH: &str =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// `HOME` added for the same reason (the sprite's user is `sprite`).
pub(crate) const DEFAULT_HOME: &str = "/home/sprite";

/// How long the remote kill (lookup plus kill stream) may take in total.
const KILL_BUDGET: Duration = Duration::from_secs(15);
/// Grace the server gives the process between TERM and KILL.
const KILL_GRACE: Duration = Duration::from_secs(5);

/// Commands in flight on one session, so `cancel_command` can reach them.
#[derive(Debug, Default)]
pub(crate) struct CommandRegistry {
    inflight: Mutex<HashMap<String, oneshot::Sender<()>>>,
}

impl CommandRegistry {
    /// Asks the command with this id to stop; `false` if none is running.
    pub(crate) fn cancel(&self, id: &str) -> bool {
        let sender = lock(&self.inflight).remove(id);
        sender.is_some_and(|tx| tx.send(()).is_ok())
    }

    /// Stops every command in flight (the session is closing).
    pub(crate) fn cancel_all(&self) {
        let senders: Vec<_> = lock(&self.inflight).drain().map(|(_, tx)| tx).collect();
        for tx in senders {
            let _ = tx.send(());
        }
    }

    fn register(
        self: &Arc<Self>,
        id: &str,
    ) -> anyhow::Result<(Registration, oneshot::Receiver<()>)> {
        let mut inflight = lock(&self.inflight);
        if inflight.contains_key(id) {
            anyhow::bail!("command id \"{id}\" is already running in this session");
        }
        let (tx, rx) = oneshot::channel();
        inflight.insert(id.to_string(), tx);
        Ok((
            Registration {
                registry: Arc::clone(self),
                id: id.to_string(),
            },
            rx,
        ))
    }
}

/// Removes a command from the registry however `run` ends (even if dropped).
struct Registration {
    registry: Arc<CommandRegistry>,
    id: String,
}

impl Drop for Registration {
    fn drop(&mut self) {
        lock(&self.registry.inflight).remove(&self.id);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding this lock cannot leave the map inconsistent.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

enum Stop {
    Finished(Result<(), SpritesError>),
    Cancelled,
    TimedOut(u64),
}

/// Runs `request` in sprite `name`, honouring its deadline and cancellation.
pub(crate) async fn run(
    client: &SpritesClient,
    name: &str,
    working_dir: &str,
    registry: &Arc<CommandRegistry>,
    request: RunnerCommandRequest,
) -> anyhow::Result<RunnerCommandResult> {
    if request.program.trim().is_empty() {
        anyhow::bail!("command program must not be empty");
    }
    let dir = match &request.cwd {
        Some(cwd) => resolve(working_dir, cwd)?,
        None => working_dir.to_string(),
    };
    let mut argv = Vec::with_capacity(request.args.len() + 1);
    argv.push(request.program.clone());
    argv.extend(request.args.iter().cloned());
    let call = ExecCall {
        argv,
        dir,
        env: with_default_env(&request.env),
    };

    let (_registration, cancelled) = registry.register(&request.command_id)?;
    let mut collector = ExecCollector::default();
    let stop = {
        let exec = client.exec(name, &call, &mut collector);
        let cancelled = async {
            // A dropped sender (registry cleared by a newer command) is not a cancel.
            if cancelled.await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let deadline = async {
            match request.timeout_ms {
                Some(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            result = exec => Stop::Finished(result),
            () = cancelled => Stop::Cancelled,
            () = deadline => Stop::TimedOut(request.timeout_ms.unwrap_or_default()),
        }
    };

    let mut output = collector.take_output();
    match stop {
        Stop::Finished(Err(err)) => return Err(err.into()),
        Stop::Finished(Ok(())) => {
            if output.exit_code.is_none() {
                push_note(
                    &mut output.stderr,
                    "the Sprites exec response ended without an exit status",
                );
            }
        }
        Stop::Cancelled => {
            output.exit_code = None;
            let kill = kill_remote(client, name, &call).await;
            push_note(&mut output.stderr, &format!("command cancelled; {kill}"));
        }
        Stop::TimedOut(ms) => {
            output.exit_code = None;
            let kill = kill_remote(client, name, &call).await;
            push_note(
                &mut output.stderr,
                &format!("command timed out after {ms} ms; {kill}"),
            );
        }
    }
    Ok(RunnerCommandResult {
        command_id: request.command_id,
        exit_code: output.exit_code,
        stdout: output.stdout,
        stderr: output.stderr,
    })
}

/// The caller's environment plus `PATH`/`HOME` when it sets some but not those.
fn with_default_env(env: &[(String, String)]) -> Vec<(String, String)> {
    let mut full = env.to_vec();
    if env.is_empty() {
        return full;
    }
    for (key, value) in [("PATH", DEFAULT_PATH), ("HOME", DEFAULT_HOME)] {
        if !env.iter().any(|(k, _)| k == key) {
            full.push((key.to_string(), value.to_string()));
        }
    }
    full
}

/// Best-effort kill of an abandoned command; says what happened, for stderr.
async fn kill_remote(client: &SpritesClient, name: &str, call: &ExecCall) -> String {
    let attempt = async {
        let sessions = client.exec_sessions(name).await?;
        let id = match find_session(&sessions, &call.argv, &call.dir) {
            SessionMatch::One(id) => id,
            SessionMatch::None => {
                return Ok(
                    "the request was aborted; no running exec session matched the command, so it has exited or may still be running in the sprite".to_string(),
                );
            }
            SessionMatch::Many(n) => {
                return Ok(format!(
                    "the request was aborted; {n} running exec sessions match the command, so none was killed and it may still be running in the sprite"
                ));
            }
        };
        Ok::<_, SpritesError>(
            match client.kill_exec_session(name, &id, KILL_GRACE).await? {
                KillOutcome::Killed => {
                    format!("the request was aborted and exec session {id} was killed (TERM)")
                }
                KillOutcome::AlreadyExited => {
                    format!("the request was aborted; exec session {id} had already exited")
                }
                KillOutcome::Failed(why) => {
                    format!("the request was aborted, but killing exec session {id} failed: {why}")
                }
            },
        )
    };
    match tokio::time::timeout(KILL_BUDGET, attempt).await {
        Ok(Ok(note)) => note,
        Ok(Err(err)) => {
            format!("the request was aborted, but the remote process could not be killed: {err}")
        }
        Err(_) => format!(
            "the request was aborted, but killing the remote process took longer than {} s",
            KILL_BUDGET.as_secs()
        ),
    }
}

#[derive(Debug, PartialEq, Eq)]
enum SessionMatch {
    One(String),
    None,
    Many(usize),
}

/// The one active session running exactly `argv` in `dir`, if there is one.
/// `command` may be a string (argv joined by spaces) or an array.
fn find_session(sessions: &[ExecSessionInfo], argv: &[String], dir: &str) -> SessionMatch {
    let joined = argv.join(" ");
    let matches: Vec<String> = sessions
        .iter()
        .filter(|s| s.is_active != Some(false))
        .filter(|s| match &s.command {
            Value::String(command) => command.trim() == joined,
            Value::Array(parts) => {
                parts.len() == argv.len()
                    && parts
                        .iter()
                        .zip(argv)
                        .all(|(p, a)| p.as_str() == Some(a.as_str()))
            }
            _ => false,
        })
        .filter(|s| {
            s.workdir
                .as_deref()
                .is_none_or(|w| w.trim_end_matches('/') == dir.trim_end_matches('/'))
        })
        .map(|s| match &s.id {
            Value::String(id) => id.clone(),
            other => other.to_string(),
        })
        .collect();
    match matches.len() {
        0 => SessionMatch::None,
        1 => matches
            .into_iter()
            .next()
            .map_or(SessionMatch::None, SessionMatch::One),
        n => SessionMatch::Many(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn session(value: Value) -> ExecSessionInfo {
        serde_json::from_value(value).unwrap()
    }

    fn argv(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn finds_the_single_active_session_running_the_command() {
        let sessions = vec![
            session(json!({"id": 10, "command": "sleep 60", "workdir": "/w", "is_active": false})),
            session(json!({"id": 11, "command": "sleep 60", "workdir": "/w", "is_active": true})),
            session(
                json!({"id": 12, "command": "sleep 60", "workdir": "/other", "is_active": true}),
            ),
            session(json!({"id": "13", "command": "bash", "workdir": "/w"})),
        ];
        assert_eq!(
            find_session(&sessions, &argv(&["sleep", "60"]), "/w"),
            SessionMatch::One("11".into())
        );
        assert_eq!(
            find_session(&sessions, &argv(&["bash"]), "/w/"),
            SessionMatch::One("13".into())
        );
        assert_eq!(
            find_session(&sessions, &argv(&["sleep", "5"]), "/w"),
            SessionMatch::None
        );
    }

    #[test]
    fn ambiguous_matches_kill_nothing() {
        let sessions = vec![
            session(json!({"id": 1, "command": ["sleep", "60"]})),
            session(json!({"id": 2, "command": ["sleep", "60"]})),
        ];
        assert_eq!(
            find_session(&sessions, &argv(&["sleep", "60"]), "/w"),
            SessionMatch::Many(2)
        );
    }

    #[test]
    fn a_custom_environment_keeps_path_and_home() {
        assert!(with_default_env(&[]).is_empty());
        let env = with_default_env(&[("FOO".into(), "1".into())]);
        assert!(env.contains(&("PATH".into(), DEFAULT_PATH.into())));
        assert!(env.contains(&("HOME".into(), DEFAULT_HOME.into())));
        let env = with_default_env(&[("PATH".into(), "/opt/bin".into())]);
        assert_eq!(env.iter().filter(|(k, _)| k == "PATH").count(), 1);
    }

    #[test]
    fn registry_cancels_by_id_and_rejects_duplicates() {
        let registry = Arc::new(CommandRegistry::default());
        let (guard, mut rx) = registry.register("a").unwrap();
        assert!(registry.register("a").is_err());
        assert!(!registry.cancel("b"));
        assert!(registry.cancel("a"));
        assert!(rx.try_recv().is_ok());
        drop(guard);
        let (_guard, _rx) = registry.register("a").unwrap();
    }

    #[test]
    fn registration_ends_when_dropped() {
        let registry = Arc::new(CommandRegistry::default());
        let (guard, _rx) = registry.register("a").unwrap();
        drop(guard);
        assert!(!registry.cancel("a"));
    }
}
