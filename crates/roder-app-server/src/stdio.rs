//! The stdio transport: one JSON-RPC message per line on stdin, answers and
//! notifications one per line on stdout. Generic over the streams so tests
//! (and embedders) can use in-memory pipes.

use std::sync::Arc;

use roder_core::Runtime;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::mpsc;

use crate::connection::{Connection, ConnectionLimits, Fanout};
use crate::follow::SharedFollowSource;
use crate::framing::{Frame, read_frame};
use crate::protocol::ServerMessage;

/// Serves one client on `stdin`/`stdout` with default limits until stdin
/// ends; returns once every answer is written.
pub async fn serve_stdio<R, W>(runtime: Arc<Runtime>, stdin: R, stdout: W) -> anyhow::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    serve_stdio_with(runtime, stdin, stdout, ConnectionLimits::default()).await
}

/// [`serve_stdio`] with explicit limits.
pub async fn serve_stdio_with<R, W>(
    runtime: Arc<Runtime>,
    stdin: R,
    stdout: W,
    limits: ConnectionLimits,
) -> anyhow::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    serve_stdio_following(runtime, stdin, stdout, limits, None).await
}

/// [`serve_stdio_with`] for one of many replicas on a shared store: `follow`
/// brings the events of threads other processes write.
pub async fn serve_stdio_following<R, W>(
    runtime: Arc<Runtime>,
    stdin: R,
    stdout: W,
    limits: ConnectionLimits,
    follow: Option<SharedFollowSource>,
) -> anyhow::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    limits.validate()?;
    let fanout = Fanout::start(&runtime, follow);
    let (connection, queue) = Connection::open(runtime, fanout, limits);
    let mut writer = tokio::spawn(write_lines(stdout, queue));
    let mut reader = BufReader::new(stdin);
    // The writer ends early only when stdout fails (its reader went away):
    // then reading stops at once, as nobody would see another answer.
    let mut stopped_writer = None;
    let read = loop {
        let frame = tokio::select! {
            frame = read_frame(&mut reader, limits.max_message_bytes) => frame,
            written = &mut writer => {
                stopped_writer = Some(written);
                break Ok(());
            }
        };
        match frame {
            Ok(Frame::Eof) => break Ok(()),
            Ok(Frame::TooLong(size)) => connection.reject_oversized(size).await,
            Ok(Frame::Line(bytes)) => match String::from_utf8(bytes) {
                Ok(text) if text.trim().is_empty() => {}
                Ok(text) => connection.receive(&text).await,
                Err(error) => connection.reject_unreadable(error).await,
            },
            Err(error) => break Err(anyhow::Error::from(error).context("reading stdin")),
        }
    };
    // Answer what is still running, then close the queue so the writer ends.
    connection.finish().await;
    drop(connection);
    let written = match stopped_writer {
        Some(written) => written,
        None => writer.await,
    }
    .map_err(|error| anyhow::anyhow!("stdout writer failed: {error}"))?;
    read?;
    written.map_err(|error| anyhow::Error::from(error).context("writing stdout"))
}

/// Writes each message as one line, flushing when the queue is momentarily
/// empty so bursts go out in one write.
async fn write_lines<W: AsyncWrite + Unpin>(
    stdout: W,
    mut queue: mpsc::Receiver<ServerMessage>,
) -> std::io::Result<()> {
    let mut out = BufWriter::new(stdout);
    while let Some(message) = queue.recv().await {
        write_line(&mut out, &message).await?;
        while let Ok(next) = queue.try_recv() {
            write_line(&mut out, &next).await?;
        }
        out.flush().await?;
    }
    out.flush().await
}

async fn write_line<W: AsyncWrite + Unpin>(
    out: &mut BufWriter<W>,
    message: &ServerMessage,
) -> std::io::Result<()> {
    // JSON escapes newlines inside strings, so a message is always one line.
    let mut line = serde_json::to_vec(message)?;
    line.push(b'\n');
    out.write_all(&line).await
}
