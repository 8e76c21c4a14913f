//! Running one command to its end: output streamed to a sink, a timeout and
//! a cancellation token that kill the whole process group, one drain rule.
//!
//! This is on the hot path of every `shell` and `exec_command` call, so it
//! adds no task and no thread: the output pipes are read on the calling task
//! while it waits for the command.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt as _;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt as _;
use tokio::net::unix::pipe;
use tokio_util::sync::CancellationToken;

use crate::confine::Confinement;
use crate::spawn::spawn;

/// How long output may keep arriving after the command exited. A process it
/// left in the background (`server &`) inherits the pipes and may hold them
/// open for ever; the command's own output is already in the pipe when it
/// exits, so a short grace catches stragglers without hanging the call.
pub const DRAIN_GRACE: Duration = Duration::from_millis(200);

const READ_CHUNK: usize = 64 * 1024;

/// Whether stdout and stderr share one pipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputMode {
    /// One pipe for both, so they interleave as a terminal shows them; every
    /// chunk is reported as [`Stream::Stdout`].
    Combined,
    /// One pipe each.
    Separate,
}

/// Which pipe a chunk of output came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// A command to run on this host. stdin is `/dev/null`.
#[derive(Debug, Clone)]
pub struct CommandSpec {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub cwd: PathBuf,
    /// Inherited variables dropped before `env` is applied.
    pub env_remove: Vec<OsString>,
    /// Set in order, so a later entry wins.
    pub env: Vec<(OsString, OsString)>,
    pub timeout: Option<Duration>,
    pub output: OutputMode,
    /// The sandbox the command runs in. `None` runs it as this process's
    /// plain child with the inherited environment: only for Roder's own
    /// helpers, never for a model's command.
    pub confinement: Option<Confinement>,
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// By itself: its exit code, or the signal that killed it.
    Exited {
        code: Option<i32>,
        signal: Option<i32>,
    },
    /// Its timeout passed; its process group was killed.
    TimedOut,
    /// The token was cancelled; its process group was killed.
    Cancelled,
}

/// The end of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    pub ending: Ending,
    /// Every pipe reached end-of-file. `false` when something the command
    /// left running still held one open [`DRAIN_GRACE`] after it ended, so
    /// output written after that is not in the result.
    pub output_complete: bool,
    pub wall: Duration,
    /// Git metadata the command changed and the sandbox put back (under
    /// Landlock, which cannot make `.git/hooks` and `.git/config` read-only
    /// inside a writable workspace), one line each. The same lines end the
    /// command's output (as stderr), so the model reads them.
    pub git_restored: Vec<String>,
}

/// One output pipe being read.
struct Reader {
    stream: Stream,
    pipe: Option<pipe::Receiver>,
}

impl Reader {
    /// Reads one chunk; `None` at end-of-file (or a read error, which ends
    /// the stream the same way). Cancel-safe.
    async fn read(pipe: &mut Option<pipe::Receiver>, chunk: &mut [u8]) -> Option<usize> {
        match pipe.as_mut()?.read(chunk).await {
            Ok(0) | Err(_) => None,
            Ok(n) => Some(n),
        }
    }
}

/// The unconfined command of `spec` (no [`CommandSpec::confinement`]).
fn plain_command(spec: &CommandSpec, stdout: Stdio, stderr: Stdio) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(&spec.program);
    for key in &spec.env_remove {
        command.env_remove(key);
    }
    command
        .args(&spec.args)
        .current_dir(&spec.cwd)
        .envs(spec.env.iter().map(|(key, value)| (key, value)))
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr);
    command
}

/// Runs `spec` to its end. `Err` only when it could not start (the error is
/// the OS's; the caller names the program). `sink` gets the output as it
/// arrives, unbounded: capping is the caller's business.
///
/// The command's process group is killed on timeout, on `cancel`, and when
/// this future is dropped. When the command exits by itself, what it left in the
/// background is not killed; output is read until every pipe is closed or
/// [`DRAIN_GRACE`] has passed.
pub async fn run(
    spec: &CommandSpec,
    cancel: &CancellationToken,
    sink: &mut (dyn FnMut(Stream, &[u8]) + Send),
) -> std::io::Result<Finished> {
    let started = Instant::now();
    let stdio;
    let mut readers = match spec.output {
        OutputMode::Combined => {
            let (sender, receiver) = pipe::pipe()?;
            let stdout = sender.into_blocking_fd()?;
            let stderr = stdout.try_clone()?;
            stdio = (Stdio::from(stdout), Stdio::from(stderr));
            [
                Reader {
                    stream: Stream::Stdout,
                    pipe: Some(receiver),
                },
                Reader {
                    stream: Stream::Stderr,
                    pipe: None,
                },
            ]
        }
        OutputMode::Separate => {
            let (out_sender, out_receiver) = pipe::pipe()?;
            let (err_sender, err_receiver) = pipe::pipe()?;
            stdio = (
                Stdio::from(out_sender.into_blocking_fd()?),
                Stdio::from(err_sender.into_blocking_fd()?),
            );
            [
                Reader {
                    stream: Stream::Stdout,
                    pipe: Some(out_receiver),
                },
                Reader {
                    stream: Stream::Stderr,
                    pipe: Some(err_receiver),
                },
            ]
        }
    };
    // Git hooks and config are compared before and after the command where
    // the mechanism cannot make them read-only.
    let git_watch = match &spec.confinement {
        Some(confinement) if confinement.guards_git() => {
            let roots = confinement.writable_roots();
            let watch =
                tokio::task::spawn_blocking(move || crate::confine::git_guard::enter(&roots))
                    .await
                    .map_err(std::io::Error::other)?;
            (!watch.is_empty()).then_some(watch)
        }
        _ => None,
    };
    // Spawning drops the command, and with it our copies of the write ends.
    let (stdout, stderr) = stdio;
    let mut child = match &spec.confinement {
        Some(confinement) => {
            crate::confine::launch::spawn(spec, confinement, stdout, stderr).await?
        }
        None => spawn(plain_command(spec, stdout, stderr)).await?,
    };

    let [first, second] = &mut readers;
    let mut chunk_a = vec![0_u8; READ_CHUNK];
    let mut chunk_b = vec![0_u8; if second.pipe.is_some() { READ_CHUNK } else { 0 }];
    let timeout = tokio::time::sleep(spec.timeout.unwrap_or(Duration::MAX));
    tokio::pin!(timeout);
    let cancelled = cancel.cancelled();
    tokio::pin!(cancelled);

    let ending = loop {
        tokio::select! {
            biased;
            _ = &mut cancelled => {
                child.stop();
                child.wait().await?;
                break Ending::Cancelled;
            }
            _ = &mut timeout, if spec.timeout.is_some() => {
                child.stop();
                child.wait().await?;
                break Ending::TimedOut;
            }
            status = child.wait() => {
                let status = status?;
                child.disarm();
                break Ending::Exited { code: status.code(), signal: status.signal() };
            }
            read = Reader::read(&mut first.pipe, &mut chunk_a), if first.pipe.is_some() => match read {
                Some(n) => sink(first.stream, chunk_a.get(..n).unwrap_or_default()),
                None => first.pipe = None,
            },
            read = Reader::read(&mut second.pipe, &mut chunk_b), if second.pipe.is_some() => match read {
                Some(n) => sink(second.stream, chunk_b.get(..n).unwrap_or_default()),
                None => second.pipe = None,
            },
        }
    };

    // The drain rule, the same for every caller: to end-of-file, or until
    // the grace has passed.
    let grace = tokio::time::sleep(DRAIN_GRACE);
    tokio::pin!(grace);
    while first.pipe.is_some() || second.pipe.is_some() {
        tokio::select! {
            biased;
            read = Reader::read(&mut first.pipe, &mut chunk_a), if first.pipe.is_some() => match read {
                Some(n) => sink(first.stream, chunk_a.get(..n).unwrap_or_default()),
                None => first.pipe = None,
            },
            read = Reader::read(&mut second.pipe, &mut chunk_b), if second.pipe.is_some() => match read {
                Some(n) => sink(second.stream, chunk_b.get(..n).unwrap_or_default()),
                None => second.pipe = None,
            },
            _ = &mut grace => break,
        }
    }
    let output_complete = first.pipe.is_none() && second.pipe.is_none();
    let git_restored = match git_watch {
        Some(watch) => tokio::task::spawn_blocking(move || watch.finish())
            .await
            .map_err(std::io::Error::other)?,
        None => Vec::new(),
    };
    for line in &git_restored {
        sink(
            Stream::Stderr,
            format!("\n[roder sandbox] {line}\n").as_bytes(),
        );
    }
    Ok(Finished {
        ending,
        output_complete,
        wall: started.elapsed(),
        git_restored,
    })
}
