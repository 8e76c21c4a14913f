//! Running commands: spawn, stream output, timeout, kill, report the end.
//!
//! Each command has its own threads (one per output pipe, one waiting for
//! it, one for its timeout, one feeding its stdin if it has one), so any
//! number run at once and none can hold up the request stream.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use super::files::failed;
use super::kill::kill_marked;
use super::outbox::Outbox;
use crate::message::{Ending, ExecSpec, MARKER_VAR, Reply};

/// How long output may keep arriving after the command exited: a process
/// it left in the background may hold the pipes open for ever, while the
/// command's own output is already in them when it exits (the same rule as
/// Roder's host runner).
pub const DRAIN_GRACE: Duration = Duration::from_millis(200);

/// Why a command's tree was killed (stored as a byte, first reason wins).
const NOT_KILLED: u8 = 0;
const TIMED_OUT: u8 = 1;
const KILLED: u8 = 2;

struct Running {
    marker: Vec<u8>,
    group: i32,
    reason: AtomicU8,
    finished: AtomicBool,
    stdin: Mutex<Option<mpsc::Sender<Vec<u8>>>>,
    /// Wakes the timeout thread early when the command ends.
    ended: (Mutex<bool>, std::sync::Condvar),
}

impl Running {
    fn kill(&self, reason: u8) {
        let _ =
            self.reason
                .compare_exchange(NOT_KILLED, reason, Ordering::AcqRel, Ordering::Acquire);
        kill_marked(&self.marker, Some(self.group));
    }
}

/// The commands running now, by request id.
#[derive(Default, Clone)]
pub struct Commands {
    running: Arc<Mutex<HashMap<u64, Arc<Running>>>>,
}

impl Commands {
    fn get(&self, id: u64) -> Option<Arc<Running>> {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .cloned()
    }

    /// Starts `spec`; its output, and then its end, are sent as replies to
    /// `id`. A command that cannot start is a `Failed` reply.
    pub fn start(&self, id: u64, spec: ExecSpec, outbox: &Arc<Outbox>) {
        if let Err(reply) = self.try_start(id, spec, outbox) {
            let _ = outbox.send(id, &reply);
        }
    }

    fn try_start(&self, id: u64, spec: ExecSpec, outbox: &Arc<Outbox>) -> Result<(), Reply> {
        let Some((program, args)) = spec.argv.split_first() else {
            return Err(Reply::Failed {
                errno: libc::EINVAL,
                message: "empty command".to_string(),
            });
        };
        if self.get(id).is_some() {
            return Err(Reply::Failed {
                errno: libc::EEXIST,
                message: format!("a command with id {id} is already running"),
            });
        }
        let marker_value = format!("{}-{id}", std::process::id());
        let mut marker = format!("{MARKER_VAR}=").into_bytes();
        marker.extend_from_slice(marker_value.as_bytes());
        let mut command = Command::new(OsStr::from_bytes(program));
        command
            .args(args.iter().map(|arg| OsStr::from_bytes(arg)))
            .current_dir(OsStr::from_bytes(&spec.cwd))
            .stdin(if spec.stdin {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        for entry in &spec.env {
            let Some(split) = entry.iter().position(|byte| *byte == b'=') else {
                continue;
            };
            let (name, value) = entry.split_at(split);
            command.env(
                OsStr::from_bytes(name),
                OsStr::from_bytes(value.get(1..).unwrap_or_default()),
            );
        }
        command.env(MARKER_VAR, &marker_value);
        let mut child = command
            .spawn()
            .map_err(|error| start_failure(&error, program, &spec.cwd))?;
        let group = i32::try_from(child.id()).unwrap_or(0);
        let stdin = child.stdin.take().map(feed_stdin);
        let running = Arc::new(Running {
            marker,
            group,
            reason: AtomicU8::new(NOT_KILLED),
            finished: AtomicBool::new(false),
            stdin: Mutex::new(stdin),
            ended: (Mutex::new(false), std::sync::Condvar::new()),
        });
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, Arc::clone(&running));

        let (closed_tx, closed_rx) = mpsc::channel();
        if let Some(pipe) = child.stdout.take() {
            pump(id, pipe, Reply::Stdout, &running, outbox, closed_tx.clone());
        }
        if let Some(pipe) = child.stderr.take() {
            pump(id, pipe, Reply::Stderr, &running, outbox, closed_tx.clone());
        }
        drop(closed_tx);
        if spec.timeout_ms > 0 {
            watch_timeout(Duration::from_millis(spec.timeout_ms), &running);
        }
        let commands = self.clone();
        let outbox = Arc::clone(outbox);
        let waiter = thread::Builder::new()
            .name("roder-executor-wait".to_string())
            .spawn(move || commands.wait(id, child, running, closed_rx, &outbox));
        if let Err(error) = waiter {
            // Without a waiter nobody would report the end: kill it now.
            if let Some(running) = self.get(id) {
                running.kill(KILLED);
            }
            return Err(failed(&error));
        }
        Ok(())
    }

    /// Waits for the command, drains its output (bounded by the grace) and
    /// sends its end.
    fn wait(
        &self,
        id: u64,
        mut child: Child,
        running: Arc<Running>,
        closed: mpsc::Receiver<()>,
        outbox: &Outbox,
    ) {
        let status = child.wait();
        let drained_by = Instant::now() + DRAIN_GRACE;
        let mut open = 2;
        while open > 0 {
            let left = drained_by.saturating_duration_since(Instant::now());
            match closed.recv_timeout(left) {
                Ok(()) => open -= 1,
                Err(mpsc::RecvTimeoutError::Disconnected) => open = 0,
                Err(mpsc::RecvTimeoutError::Timeout) => break,
            }
        }
        let ending = match running.reason.load(Ordering::Acquire) {
            TIMED_OUT => Ending::TimedOut,
            KILLED => Ending::Killed,
            _ => Ending::Exited(match &status {
                Ok(status) => status
                    .code()
                    .or_else(|| status.signal().map(|signal| 128 + signal))
                    .unwrap_or(-1),
                Err(_) => -1,
            }),
        };
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        {
            let (ended, wake) = &running.ended;
            *ended.lock().unwrap_or_else(PoisonError::into_inner) = true;
            wake.notify_all();
        }
        let _ = outbox.send_unless_finished(
            id,
            &Reply::Exited {
                ending,
                output_complete: open == 0,
            },
            &running.finished,
            true,
        );
    }

    /// Sends `data` to the command's stdin (empty closes it). A command
    /// without stdin, or one that has ended, drops it.
    pub fn stdin(&self, id: u64, data: Vec<u8>) {
        let Some(running) = self.get(id) else {
            return;
        };
        let mut stdin = running.stdin.lock().unwrap_or_else(PoisonError::into_inner);
        if data.is_empty() {
            *stdin = None;
        } else if let Some(sender) = stdin.as_ref()
            && sender.send(data).is_err()
        {
            *stdin = None;
        }
    }

    /// Kills the command's tree; its `Exited` reply says `Killed`.
    pub fn kill(&self, id: u64) {
        if let Some(running) = self.get(id) {
            running.kill(KILLED);
        }
    }

    /// Kills every running command's tree (the host went away).
    pub fn kill_all(&self) {
        let all: Vec<Arc<Running>> = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        for running in all {
            running.kill(KILLED);
        }
    }
}

/// Why a command did not start, naming the missing part: the OS says
/// only ENOENT for a missing program and a missing working directory alike.
fn start_failure(error: &io::Error, program: &[u8], cwd: &[u8]) -> Reply {
    let mut reply = failed(error);
    if error.kind() == io::ErrorKind::NotFound
        && let Reply::Failed { message, .. } = &mut reply
    {
        let program = String::from_utf8_lossy(program);
        *message = if std::fs::metadata(OsStr::from_bytes(cwd)).is_err() {
            format!(
                "no such working directory `{}`",
                String::from_utf8_lossy(cwd)
            )
        } else if program.contains('/') {
            format!("`{program}`: no such file")
        } else {
            format!("`{program}`: executable file not found in $PATH")
        };
    }
    reply
}

/// Copies one output pipe into replies until it closes, then says so.
fn pump(
    id: u64,
    mut pipe: impl Read + Send + 'static,
    wrap: fn(Vec<u8>) -> Reply,
    running: &Arc<Running>,
    outbox: &Arc<Outbox>,
    closed: mpsc::Sender<()>,
) {
    let running = Arc::clone(running);
    let outbox = Arc::clone(outbox);
    let spawned = thread::Builder::new()
        .name("roder-executor-pipe".to_string())
        .spawn(move || {
            let mut chunk = vec![0; 64 * 1024];
            loop {
                match pipe.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(read) => {
                        let data = chunk.get(..read).unwrap_or_default().to_vec();
                        if outbox
                            .send_unless_finished(id, &wrap(data), &running.finished, false)
                            .is_err()
                        {
                            break;
                        }
                    }
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = closed.send(());
        });
    // Without a reader the pipe is dropped here, which closes it: the
    // command sees EPIPE rather than blocking for ever.
    drop(spawned);
}

/// Kills the command's tree once `limit` passes, unless it ended first.
fn watch_timeout(limit: Duration, running: &Arc<Running>) {
    let running = Arc::clone(running);
    let _ = thread::Builder::new()
        .name("roder-executor-timeout".to_string())
        .spawn(move || {
            let deadline = Instant::now() + limit;
            let (ended, wake) = &running.ended;
            let mut done = ended.lock().unwrap_or_else(PoisonError::into_inner);
            while !*done {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    drop(done);
                    running.kill(TIMED_OUT);
                    return;
                }
                done = wake
                    .wait_timeout(done, left)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        });
}

/// A thread that writes what arrives on the channel to the command's
/// stdin, so a full pipe blocks only this command.
fn feed_stdin(mut pipe: std::process::ChildStdin) -> mpsc::Sender<Vec<u8>> {
    let (sender, receiver) = mpsc::channel::<Vec<u8>>();
    let _ = thread::Builder::new()
        .name("roder-executor-stdin".to_string())
        .spawn(move || {
            while let Ok(data) = receiver.recv() {
                if pipe.write_all(&data).and_then(|()| pipe.flush()).is_err() {
                    break;
                }
            }
        });
    sender
}
