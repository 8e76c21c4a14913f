//! The host's side of the executor protocol, over any pair of byte streams
//! (a docker exec's attached stdio, a child process's pipes).
//!
//! One reader task routes replies to the request they answer; one writer
//! task sends frames in order, so issuing a request (and a kill, from a
//! `Drop`) never waits. Whatever the helper sends is parsed as untrusted.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use crate::message::{Ending, ExecSpec, FileKind, FileStat, PROTOCOL_VERSION, Reply, Request};
use crate::wire::FrameReader;

/// Why a request did not get its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecutorError {
    /// The helper refused or the OS call failed: its errno and message.
    Failed { errno: i32, message: String },
    /// The connection to the helper is gone (it exited, or the stream broke).
    Lost(String),
}

impl fmt::Display for ExecutorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Failed { message, .. } => f.write_str(message),
            Self::Lost(reason) => write!(f, "the sandbox executor is gone: {reason}"),
        }
    }
}

impl std::error::Error for ExecutorError {}

/// Which output stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Stdout,
    Stderr,
}

/// How a command ended, as the helper reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finished {
    pub ending: Ending,
    pub output_complete: bool,
}

/// Shared by the handle, the reader task and every request.
struct Inner {
    outgoing: mpsc::UnboundedSender<Vec<u8>>,
    pending: Mutex<HashMap<u64, mpsc::UnboundedSender<Reply>>>,
    next_id: AtomicU64,
    closed: AtomicBool,
    reason: Mutex<Option<String>>,
}

impl Inner {
    fn lost(&self) -> ExecutorError {
        let reason = self
            .reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_else(|| "its stream closed".to_string());
        ExecutorError::Lost(reason)
    }

    fn close(&self, reason: String) {
        self.closed.store(true, Ordering::Release);
        self.reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(reason);
        // Dropping the senders ends every waiting request.
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    fn register(&self) -> Result<(u64, mpsc::UnboundedReceiver<Reply>), ExecutorError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(self.lost());
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = mpsc::unbounded_channel();
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, sender);
        Ok((id, receiver))
    }

    fn forget(&self, id: u64) {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
    }

    fn send(&self, id: u64, request: &Request) -> Result<(), ExecutorError> {
        self.outgoing
            .send(request.encode(id))
            .map_err(|_| self.lost())
    }
}

/// A connection to one running helper. Cheap to clone; every clone speaks
/// over the same stream.
#[derive(Clone)]
pub struct Executor {
    inner: Arc<Inner>,
}

impl Executor {
    /// Starts the reader and writer tasks and waits (at most `hello_within`)
    /// for the helper's greeting, refusing one of another protocol version.
    pub async fn connect<R, W>(
        incoming: R,
        outgoing: W,
        hello_within: Duration,
    ) -> Result<Self, ExecutorError>
    where
        R: Stream<Item = io::Result<Bytes>> + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let (frames, queue) = mpsc::unbounded_channel();
        let inner = Arc::new(Inner {
            outgoing: frames,
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            closed: AtomicBool::new(false),
            reason: Mutex::new(None),
        });
        let (hello_tx, hello_rx) = oneshot::channel();
        // The tasks hold the connection weakly: when the last handle (an
        // `Executor` or a `Process`) is dropped, the queue's sender goes with
        // it, the writer closes the helper's input, and the helper kills what
        // is left and exits.
        tokio::spawn(write_frames(queue, outgoing, Arc::downgrade(&inner)));
        tokio::spawn(read_replies(incoming, Arc::downgrade(&inner), hello_tx));
        let version = match tokio::time::timeout(hello_within, hello_rx).await {
            Ok(Ok(version)) => version,
            Ok(Err(_)) => return Err(inner.lost()),
            Err(_) => {
                let reason = format!("it did not greet within {} ms", hello_within.as_millis());
                inner.close(reason.clone());
                return Err(ExecutorError::Lost(reason));
            }
        };
        if version != PROTOCOL_VERSION {
            let reason = format!(
                "it speaks protocol version {version}, this Roder speaks {PROTOCOL_VERSION}"
            );
            inner.close(reason.clone());
            return Err(ExecutorError::Lost(reason));
        }
        Ok(Self { inner })
    }

    /// Whether the connection is gone (a new helper must be started).
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }

    /// Starts a command. Its output and end arrive through the returned
    /// [`Process`]; dropping the process kills the command's tree.
    pub fn spawn(&self, spec: ExecSpec) -> Result<Process, ExecutorError> {
        let (id, replies) = self.inner.register()?;
        let process = Process {
            inner: Arc::clone(&self.inner),
            id,
            replies,
            ended: false,
        };
        self.inner.send(id, &Request::Exec(spec))?;
        Ok(process)
    }

    /// Runs a command to its end, passing output to `sink` as it arrives.
    /// When `cancelled` completes first, the tree is killed and the end is
    /// still awaited, so `Killed` is reported once the processes are gone.
    pub async fn run(
        &self,
        spec: ExecSpec,
        cancelled: impl Future<Output = ()>,
        sink: &mut (dyn FnMut(Output, &[u8]) + Send),
    ) -> Result<Finished, ExecutorError> {
        let mut process = self.spawn(spec)?;
        tokio::pin!(cancelled);
        let mut kill_sent = false;
        loop {
            let event = tokio::select! {
                biased;
                () = &mut cancelled, if !kill_sent => {
                    kill_sent = true;
                    process.kill()?;
                    continue;
                }
                event = process.next() => event?,
            };
            match event {
                ProcessEvent::Output(stream, data) => sink(stream, &data),
                ProcessEvent::Finished(finished) => return Ok(finished),
            }
        }
    }

    async fn ask(&self, request: Request) -> Result<Reply, ExecutorError> {
        let (id, mut replies) = self.inner.register()?;
        let guard = Forget {
            inner: &self.inner,
            id,
        };
        self.inner.send(id, &request)?;
        let reply = replies.recv().await.ok_or_else(|| self.inner.lost());
        drop(guard);
        match reply? {
            Reply::Failed { errno, message } => Err(ExecutorError::Failed { errno, message }),
            reply => Ok(reply),
        }
    }

    /// A regular file's contents; more than `max` bytes is refused.
    pub async fn read_file(&self, path: &[u8], max: u64) -> Result<Vec<u8>, ExecutorError> {
        match self
            .ask(Request::ReadFile {
                path: path.to_vec(),
                max,
            })
            .await?
        {
            Reply::Data(data) => Ok(data),
            other => Err(unexpected(&other)),
        }
    }

    /// Writes a file, creating parents; `mode` applies to a new file.
    pub async fn write_file(
        &self,
        path: &[u8],
        data: &[u8],
        mode: u32,
    ) -> Result<(), ExecutorError> {
        match self
            .ask(Request::WriteFile {
                path: path.to_vec(),
                data: data.to_vec(),
                mode,
            })
            .await?
        {
            Reply::Done => Ok(()),
            other => Err(unexpected(&other)),
        }
    }

    /// `lstat` of a path.
    pub async fn stat(&self, path: &[u8]) -> Result<FileStat, ExecutorError> {
        match self
            .ask(Request::Stat {
                path: path.to_vec(),
            })
            .await?
        {
            Reply::Stat(stat) => Ok(stat),
            other => Err(unexpected(&other)),
        }
    }

    /// Where `path` leads once its symbolic links are resolved.
    pub async fn resolve(&self, path: &[u8]) -> Result<Vec<u8>, ExecutorError> {
        match self
            .ask(Request::Resolve {
                path: path.to_vec(),
            })
            .await?
        {
            Reply::Data(resolved) => Ok(resolved),
            other => Err(unexpected(&other)),
        }
    }

    /// A directory's entries, sorted by name.
    pub async fn list(&self, path: &[u8]) -> Result<Vec<(Vec<u8>, FileKind)>, ExecutorError> {
        match self
            .ask(Request::List {
                path: path.to_vec(),
            })
            .await?
        {
            Reply::Listing(entries) => Ok(entries),
            other => Err(unexpected(&other)),
        }
    }
}

fn unexpected(reply: &Reply) -> ExecutorError {
    ExecutorError::Lost(format!("it answered with an unexpected {reply:?}"))
}

/// Removes a request's routing entry however its future ends.
struct Forget<'a> {
    inner: &'a Inner,
    id: u64,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.inner.forget(self.id);
    }
}

/// What a running process reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessEvent {
    Output(Output, Vec<u8>),
    Finished(Finished),
}

/// A command started with [`Executor::spawn`]. Dropped before it finished,
/// it kills the command's tree.
pub struct Process {
    inner: Arc<Inner>,
    id: u64,
    replies: mpsc::UnboundedReceiver<Reply>,
    ended: bool,
}

impl Process {
    /// The next output chunk or the end. After the end, the end again.
    pub async fn next(&mut self) -> Result<ProcessEvent, ExecutorError> {
        let Some(reply) = self.replies.recv().await else {
            return Err(self.inner.lost());
        };
        match reply {
            Reply::Stdout(data) => Ok(ProcessEvent::Output(Output::Stdout, data)),
            Reply::Stderr(data) => Ok(ProcessEvent::Output(Output::Stderr, data)),
            Reply::Exited {
                ending,
                output_complete,
            } => {
                self.ended = true;
                self.inner.forget(self.id);
                Ok(ProcessEvent::Finished(Finished {
                    ending,
                    output_complete,
                }))
            }
            Reply::Failed { errno, message } => {
                self.ended = true;
                self.inner.forget(self.id);
                Err(ExecutorError::Failed { errno, message })
            }
            other => Err(unexpected(&other)),
        }
    }

    /// Sends bytes to the process's stdin (started with `stdin: true`).
    pub fn write_stdin(&self, data: &[u8]) -> Result<(), ExecutorError> {
        if data.is_empty() {
            return Ok(());
        }
        self.inner.send(self.id, &Request::Stdin(data.to_vec()))
    }

    /// Closes the process's stdin.
    pub fn close_stdin(&self) -> Result<(), ExecutorError> {
        self.inner.send(self.id, &Request::Stdin(Vec::new()))
    }

    /// Kills the process's tree; its end follows as `Killed`.
    pub fn kill(&self) -> Result<(), ExecutorError> {
        self.inner.send(self.id, &Request::Kill)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if !self.ended {
            let _ = self.inner.send(self.id, &Request::Kill);
            self.inner.forget(self.id);
        }
    }
}

/// Sends queued frames in order, several per flush when they pile up.
async fn write_frames<W: AsyncWrite + Unpin>(
    mut queue: mpsc::UnboundedReceiver<Vec<u8>>,
    mut out: W,
    inner: Weak<Inner>,
) {
    while let Some(frame) = queue.recv().await {
        let mut result = out.write_all(&frame).await;
        while result.is_ok() {
            match queue.try_recv() {
                Ok(frame) => result = out.write_all(&frame).await,
                Err(_) => break,
            }
        }
        if let Err(error) = result.and(out.flush().await) {
            if let Some(inner) = inner.upgrade() {
                inner.close(format!("writing to it failed: {error}"));
            }
            return;
        }
    }
    let _ = out.shutdown().await;
}

/// Routes each reply to the request it answers, until the stream ends.
async fn read_replies<R>(mut incoming: R, inner: Weak<Inner>, hello: oneshot::Sender<u32>)
where
    R: Stream<Item = io::Result<Bytes>> + Unpin,
{
    let mut hello = Some(hello);
    let mut reader = FrameReader::default();
    let reason = 'read: loop {
        match incoming.next().await {
            None => break "its output ended".to_string(),
            Some(Err(error)) => break format!("reading from it failed: {error}"),
            Some(Ok(chunk)) => reader.push(&chunk),
        }
        loop {
            let frame = match reader.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(error) => break 'read format!("it sent an unreadable stream: {error}"),
            };
            let reply = match Reply::decode(&frame) {
                Ok(reply) => reply,
                Err(error) => break 'read format!("it sent a malformed reply: {error}"),
            };
            match (frame.id, reply) {
                (0, Reply::Hello { version, .. }) => {
                    if let Some(hello) = hello.take() {
                        let _ = hello.send(version);
                    }
                }
                (0, Reply::Failed { message, .. }) => break 'read message,
                (0, other) => break 'read format!("it sent {other:?} outside any request"),
                (id, reply) => {
                    let Some(inner) = inner.upgrade() else {
                        return;
                    };
                    let pending = inner.pending.lock().unwrap_or_else(PoisonError::into_inner);
                    if let Some(sender) = pending.get(&id) {
                        let _ = sender.send(reply);
                    }
                }
            }
        }
    };
    tracing::debug!(%reason, "sandbox executor connection closed");
    if let Some(inner) = inner.upgrade() {
        inner.close(reason);
    }
}
