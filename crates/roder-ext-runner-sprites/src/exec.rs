//! Running one command in a sprite: environment, deadline and cancellation.
//!
//! HTTP exec is one request that streams until the command exits. The live
//! server (superfly/sprites-go `server/api/exec_http.go`) SIGKILLs the
//! command's process group when that request ends, so a deadline or a
//! cancellation is carried out by aborting the request: dropping the exec
//! future closes its connection (HTTP/1.1) or resets its stream (HTTP/2).
//! HTTP execs are not exec *sessions* (`GET /exec` lists tmux sessions only),
//! so there is nothing to look up and kill afterwards.
//!
//! Without an `env` parameter the server gives the command an **empty**
//! environment, so every exec sends the one it means: the session's base
//! environment from the sandbox policy (the sprite's `PATH` and `HOME`,
//! `LANG`, `TERM`, `env.pass`, `env.set`), then the caller's variables. No
//! credential variable is ever sent, whoever names it.

use std::collections::BTreeMap;
use std::time::Duration;

use roder_api::remote_runner::{RunnerCommandRequest, RunnerCommandResult};
use roder_sandbox::RunningCommands;

use crate::client::{ExecCall, Repeat, SpritesClient};
use crate::error::SpritesError;
use crate::exec_frames::{ExecCollector, push_note};
use crate::paths::resolve;

/// `PATH` sent unless the caller sets one: without `env` the server runs the
/// command with no environment at all, and without `PATH` nothing but
/// absolute programs would run, in the command or anything it starts.
pub(crate) const DEFAULT_PATH: &str =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// `HOME` sent unless the caller sets one (the sprite's user is `sprite`).
pub(crate) const DEFAULT_HOME: &str = "/home/sprite";

/// What happened to a command whose request was aborted, for stderr. The
/// kill is the server's doing and is not confirmed back to the client.
const ABORTED: &str = "the exec request was aborted, and the Sprites server SIGKILLs the command's process group when its request ends";

/// What the sandbox policy gives every command of a session: computed once
/// at session start, so Roder's own secrets are never held by the session.
#[derive(Debug, Clone)]
pub(crate) struct CommandSandbox {
    /// See [`crate::sandbox::base_env`]; always holds `PATH` and `HOME`.
    pub base_env: BTreeMap<String, String>,
    /// Variables never sent, even when a caller sets them.
    pub credentials: Vec<String>,
    /// Bytes of each of stdout and stderr kept.
    pub output_limit: usize,
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
    sandbox: &CommandSandbox,
    registry: &RunningCommands,
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
        env: environment(sandbox, &request.env),
    };

    // Claimed before the request starts, so a cancel racing the start is not
    // lost; released however `run` ends (even if its future is dropped).
    let reservation = registry.reserve(&request.command_id)?;
    let mut collector = ExecCollector::with_limit(sandbox.output_limit);
    let stop = {
        let exec = client.exec(name, &call, Repeat::Once, &mut collector);
        let cancelled = reservation.token().cancelled();
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
            push_note(&mut output.stderr, &format!("command cancelled; {ABORTED}"));
        }
        Stop::TimedOut(ms) => {
            output.exit_code = None;
            push_note(
                &mut output.stderr,
                &format!("command timed out after {ms} ms; {ABORTED}"),
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

/// The environment an exec sends: the session's base environment with the
/// caller's variables over it, minus every credential variable. Always holds
/// `PATH` and `HOME`, because the server gives a command without `env`
/// parameters no environment at all.
pub(crate) fn environment(
    sandbox: &CommandSandbox,
    caller: &[(String, String)],
) -> Vec<(String, String)> {
    let mut env = sandbox.base_env.clone();
    for (key, value) in caller {
        env.insert(key.clone(), value.clone());
    }
    for key in [("PATH", DEFAULT_PATH), ("HOME", DEFAULT_HOME)] {
        env.entry(key.0.to_string())
            .or_insert_with(|| key.1.to_string());
    }
    env.retain(|key, _| !sandbox.credentials.iter().any(|secret| secret == key));
    env.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox(base: &[(&str, &str)]) -> CommandSandbox {
        CommandSandbox {
            base_env: base
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            credentials: crate::sandbox::credential_names(&[]),
            output_limit: 10,
        }
    }

    #[test]
    fn the_environment_always_holds_path_and_home() {
        let bare = environment(&sandbox(&[]), &[]);
        assert_eq!(
            bare,
            vec![
                ("HOME".to_string(), DEFAULT_HOME.to_string()),
                ("PATH".to_string(), DEFAULT_PATH.to_string()),
            ]
        );
        let env = environment(&sandbox(&[("LANG", "C")]), &[("FOO".into(), "1".into())]);
        assert!(env.contains(&("FOO".into(), "1".into())));
        assert!(env.contains(&("LANG".into(), "C".into())));
        assert!(env.contains(&("PATH".into(), DEFAULT_PATH.into())));
        assert!(env.contains(&("HOME".into(), DEFAULT_HOME.into())));
        let env = environment(
            &sandbox(&[("PATH", DEFAULT_PATH)]),
            &[("PATH".into(), "/opt/bin".into())],
        );
        assert_eq!(env.iter().filter(|(k, _)| k == "PATH").count(), 1);
        assert!(env.contains(&("PATH".into(), "/opt/bin".into())));
    }

    #[test]
    fn a_caller_cannot_send_a_credential() {
        let env = environment(
            &sandbox(&[("SPRITES_TOKEN", "leaked-into-base")]),
            &[
                ("SPRITES_TOKEN".into(), "tok".into()),
                ("OPENAI_API_KEY".into(), "sk".into()),
                ("OK".into(), "1".into()),
            ],
        );
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, vec!["HOME", "OK", "PATH"]);
    }
}
