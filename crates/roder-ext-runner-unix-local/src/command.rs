//! Running one command as a host process, supervised by `roder-sandbox`:
//! its own process group, so every stop (timeout, cancel, dropped future)
//! kills the whole group, `sh -c 'a | b &'` grandchildren included, and
//! (Linux) the sandbox's warden kills it if the Roder process dies.

use std::path::PathBuf;
use std::time::Duration;

use roder_api::remote_runner::{RunnerCommandId, RunnerCommandResult};
use roder_sandbox::{CommandSpec, Confinement, DRAIN_GRACE, Ending, OutputMode, Stream};

use crate::running::RunningCommands;

/// Captured bytes kept per stream; the rest is read and dropped so the
/// process never blocks on a full pipe, and memory stays bounded.
const MAX_CAPTURE_BYTES: usize = 16 * 1024 * 1024;

/// A command ready to spawn: paths already resolved inside the root.
#[derive(Debug, Clone)]
pub(crate) struct PreparedCommand {
    pub(crate) command_id: RunnerCommandId,
    pub(crate) program: String,
    pub(crate) args: Vec<String>,
    pub(crate) cwd: PathBuf,
    /// Inherited variables to drop before `env` is applied (the git-worktree
    /// runner drops `GIT_DIR` and friends so `git` finds the checkout).
    pub(crate) env_remove: Vec<String>,
    /// Config env first, then request env, so the request wins.
    pub(crate) env: Vec<(String, String)>,
    pub(crate) timeout: Option<Duration>,
    /// The session's sandbox over its working directory.
    pub(crate) confinement: Confinement,
}

/// Spawns the command and waits for it, honouring timeout and cancellation.
pub(crate) async fn run(
    command: PreparedCommand,
    running: &RunningCommands,
) -> anyhow::Result<RunnerCommandResult> {
    let reservation = running.reserve(&command.command_id)?;
    let spec = CommandSpec {
        program: command.program.clone().into(),
        args: command.args.iter().map(Into::into).collect(),
        cwd: command.cwd.clone(),
        env_remove: command.env_remove.iter().map(Into::into).collect(),
        env: command
            .env
            .iter()
            .map(|(key, value)| (key.into(), value.into()))
            .collect(),
        timeout: command.timeout,
        output: OutputMode::Separate,
        confinement: Some(command.confinement.clone()),
    };
    let output_limit = command.confinement.policy.limits.output_bytes;
    let mut stdout = Captured::with_cap(output_limit);
    let mut stderr = Captured::with_cap(output_limit);
    let mut sink = |stream: Stream, bytes: &[u8]| match stream {
        Stream::Stdout => stdout.push(bytes),
        Stream::Stderr => stderr.push(bytes),
    };
    let finished = roder_sandbox::run(&spec, reservation.token(), &mut sink)
        .await
        .map_err(|error| {
            anyhow::anyhow!(
                "failed to start `{}` in `{}`: {error}",
                command.program,
                command.cwd.display()
            )
        })?;
    drop(reservation);

    let mut notes = Vec::new();
    let exit_code = match finished.ending {
        Ending::Exited { code, .. } => code,
        Ending::TimedOut => {
            let limit = command.timeout.unwrap_or_default().as_millis();
            notes.push(format!("command timed out after {limit} ms"));
            None
        }
        Ending::Cancelled => {
            notes.push("command cancelled".to_string());
            None
        }
    };
    if !finished.output_complete {
        notes.push(format!(
            "output may be incomplete: a background process kept stdout/stderr open more than {} ms after the command exited",
            DRAIN_GRACE.as_millis()
        ));
    }
    Ok(RunnerCommandResult {
        command_id: command.command_id,
        exit_code,
        stdout: stdout.into_text(None),
        stderr: stderr.into_text(Some(&notes)),
    })
}

/// Bytes read from one stream.
#[derive(Debug)]
struct Captured {
    bytes: Vec<u8>,
    /// Bytes beyond `cap` that were read and dropped.
    dropped: usize,
    /// Bytes kept: `MAX_CAPTURE_BYTES`, or less when the policy's
    /// `limits.output_bytes` says so.
    cap: usize,
}

impl Default for Captured {
    fn default() -> Self {
        Self::with_cap(None)
    }
}

impl Captured {
    fn with_cap(limit: Option<u64>) -> Self {
        let cap = limit
            .and_then(|limit| usize::try_from(limit).ok())
            .map_or(MAX_CAPTURE_BYTES, |limit| limit.min(MAX_CAPTURE_BYTES));
        Self {
            bytes: Vec::new(),
            dropped: 0,
            cap,
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        let room = self.cap.saturating_sub(self.bytes.len());
        let kept = bytes.len().min(room);
        self.bytes
            .extend_from_slice(bytes.get(..kept).unwrap_or_default());
        self.dropped += bytes.len() - kept;
    }

    fn into_text(self, notes: Option<&[String]>) -> String {
        let mut text = match String::from_utf8(self.bytes) {
            Ok(text) => text,
            Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
        };
        let mut lines = Vec::new();
        if self.dropped > 0 {
            lines.push(format!(
                "[output truncated: {} more bytes not kept]",
                self.dropped
            ));
        }
        lines.extend(notes.unwrap_or_default().iter().cloned());
        for line in lines {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&line);
            text.push('\n');
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_go_on_their_own_lines() {
        let captured = Captured {
            bytes: b"partial".to_vec(),
            dropped: 3,
            ..Captured::default()
        };
        assert_eq!(
            captured.into_text(Some(&["note".to_string()])),
            "partial\n[output truncated: 3 more bytes not kept]\nnote\n"
        );
        assert_eq!(Captured::default().into_text(None), "");
    }

    #[test]
    fn invalid_utf8_is_replaced_not_refused() {
        let captured = Captured {
            bytes: vec![b'a', 0xff, b'b'],
            ..Captured::default()
        };
        assert_eq!(captured.into_text(None), "a\u{fffd}b");
    }

    #[test]
    fn capture_keeps_the_cap_and_counts_the_rest() {
        let mut captured = Captured::default();
        captured.push(&vec![b'x'; MAX_CAPTURE_BYTES - 1]);
        captured.push(b"abc");
        assert_eq!(captured.bytes.len(), MAX_CAPTURE_BYTES);
        assert_eq!(captured.bytes.last(), Some(&b'a'));
        assert_eq!(captured.dropped, 2);
    }
}
