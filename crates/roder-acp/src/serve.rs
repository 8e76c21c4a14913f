//! The stdio loop: one JSON-RPC message per line in, one per line out.
//! Requests are handled concurrently (a `session/cancel` or a permission
//! answer arrives while a `session/prompt` runs); a line that is not a
//! message gets an error answer and the loop goes on; end of input ends
//! the connection, interrupting running turns.

use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol_schema::v1 as acp;
use roder_app_server::framing::{Frame, read_frame};
use roder_core::Runtime;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::AcpOptions;
use crate::agent::Agent;
use crate::peer::{Peer, QUEUE};

/// How long running prompts get to answer once the client has gone.
const DRAIN: Duration = Duration::from_secs(5);

/// Serves one ACP client on `stdin`/`stdout` until stdin ends.
pub async fn serve_stdio<R, W>(
    runtime: Arc<Runtime>,
    stdin: R,
    stdout: W,
    options: AcpOptions,
) -> anyhow::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (queue, lines) = mpsc::channel(QUEUE);
    let writer = tokio::spawn(write_lines(stdout, lines));
    let peer = Arc::new(Peer::new(queue));
    let max_message_bytes = options.max_message_bytes;
    let agent = Arc::new(Agent::new(runtime, peer.clone(), options));
    let mut reader = BufReader::new(stdin);
    let mut tasks = JoinSet::new();
    let read = loop {
        // Finished request tasks are reaped as we go.
        while tasks.try_join_next().is_some() {}
        match read_frame(&mut reader, max_message_bytes).await {
            Ok(Frame::Eof) => break Ok(()),
            Ok(Frame::TooLong(size)) => {
                let error = acp::Error::invalid_request().data(json!(format!(
                    "a message of {size} bytes is over the limit of {max_message_bytes}"
                )));
                peer.respond(&Value::Null, Err(error)).await;
            }
            Ok(Frame::Line(bytes)) => receive(&agent, &peer, &bytes, &mut tasks).await,
            Err(error) => break Err(anyhow::Error::from(error).context("reading stdin")),
        }
    };
    agent.shutdown().await;
    peer.close();
    // Prompts answer `cancelled` as their turns end; then the rest stops.
    let _ = tokio::time::timeout(DRAIN, async { while tasks.join_next().await.is_some() {} }).await;
    tasks.abort_all();
    drop(agent);
    drop(peer);
    let written = writer
        .await
        .map_err(|error| anyhow::anyhow!("stdout writer failed: {error}"))?;
    read?;
    // A client that closed stdout first is not an error of ours.
    if let Err(error) = written {
        tracing::debug!("writing stdout: {error}");
    }
    Ok(())
}

/// Handles one line.
async fn receive(agent: &Arc<Agent>, peer: &Arc<Peer>, bytes: &[u8], tasks: &mut JoinSet<()>) {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    let message: Value = match serde_json::from_slice(bytes) {
        Ok(message) => message,
        Err(error) => {
            let error = acp::Error::parse_error().data(json!(error.to_string()));
            peer.respond(&Value::Null, Err(error)).await;
            return;
        }
    };
    let id = message.get("id").cloned();
    let method = message.get("method").and_then(Value::as_str);
    match (method, id) {
        (Some(method), Some(id)) => {
            let method = method.to_string();
            let params = message.get("params").cloned().unwrap_or(json!({}));
            let agent = agent.clone();
            let peer = peer.clone();
            tasks.spawn(async move {
                let answer = agent.handle(&method, &params).await;
                peer.respond(&id, answer).await;
            });
        }
        (Some(method), None) => {
            let params = message.get("params").cloned().unwrap_or(json!({}));
            notification(agent, method, &params, tasks);
        }
        (None, Some(id)) if message.get("result").is_some() || message.get("error").is_some() => {
            let answer = match message.get("error") {
                Some(error) => Err(serde_json::from_value(error.clone())
                    .unwrap_or_else(|_| acp::Error::internal_error().data(error.clone()))),
                None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
            };
            if !peer.answered(&id, answer) {
                tracing::debug!("an answer to no request of ours (id {id})");
            }
        }
        (None, id) => {
            let error = acp::Error::invalid_request().data(json!(
                "a message needs a method (or a result or error answering ours)"
            ));
            peer.respond(&id.unwrap_or(Value::Null), Err(error)).await;
        }
    }
}

/// Notifications: `session/cancel`; any other is ignored, as JSON-RPC says.
fn notification(agent: &Arc<Agent>, method: &str, params: &Value, tasks: &mut JoinSet<()>) {
    if method != "session/cancel" {
        tracing::debug!("ignoring notification {method}");
        return;
    }
    match serde_json::from_value::<acp::CancelNotification>(params.clone()) {
        Ok(cancel) => {
            let agent = agent.clone();
            tasks.spawn(async move { agent.cancel(cancel.session_id.0.as_ref()).await });
        }
        Err(error) => tracing::warn!("session/cancel with unreadable params: {error}"),
    }
}

/// Writes each queued line, flushing when the queue is momentarily empty.
async fn write_lines<W: AsyncWrite + Unpin>(
    stdout: W,
    mut lines: mpsc::Receiver<Vec<u8>>,
) -> std::io::Result<()> {
    let mut out = BufWriter::new(stdout);
    while let Some(line) = lines.recv().await {
        out.write_all(&line).await?;
        while let Ok(next) = lines.try_recv() {
            out.write_all(&next).await?;
        }
        out.flush().await?;
    }
    out.flush().await
}
