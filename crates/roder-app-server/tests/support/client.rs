//! A JSON-RPC test client over a real WebSocket or in-memory stdio pipes.
//! Notifications that arrive while it waits for a response are kept, in
//! order, for `next_notification`.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;

use futures::{SinkExt, StreamExt};
use roder_app_server::{ConnectionLimits, serve_stdio_with};
use roder_core::Runtime;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};

use super::WAIT;

pub struct Client {
    to_server: mpsc::UnboundedSender<String>,
    from_server: mpsc::UnboundedReceiver<Value>,
    tasks: Vec<JoinHandle<()>>,
    next_id: i64,
    pending: VecDeque<Value>,
}

impl Drop for Client {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Client {
    /// Connects to `ws://addr/`, with `Authorization: Bearer <token>` when
    /// given.
    pub async fn ws(addr: SocketAddr, token: Option<&str>) -> Result<Client, tungstenite::Error> {
        let mut request = format!("ws://{addr}/").into_client_request()?;
        if let Some(token) = token {
            request
                .headers_mut()
                .insert("authorization", format!("Bearer {token}").parse().unwrap());
        }
        let (socket, _) = tokio_tungstenite::connect_async(request).await?;
        let (mut sink, mut stream) = socket.split();
        let (to_server, mut outgoing) = mpsc::unbounded_channel::<String>();
        let (incoming, from_server) = mpsc::unbounded_channel();
        let writer = tokio::spawn(async move {
            while let Some(text) = outgoing.recv().await {
                if sink.send(Message::text(text)).await.is_err() {
                    return;
                }
            }
            let _ = sink.close().await;
        });
        let reader = tokio::spawn(async move {
            while let Some(Ok(message)) = stream.next().await {
                if let Message::Text(text) = message {
                    let value: Value = serde_json::from_str(text.as_str()).unwrap();
                    if incoming.send(value).is_err() {
                        return;
                    }
                }
            }
        });
        Ok(Client::from_parts(
            to_server,
            from_server,
            vec![writer, reader],
        ))
    }

    /// Serves a connection with `serve_stdio_with` over in-memory pipes.
    pub fn stdio(runtime: Arc<Runtime>, limits: ConnectionLimits) -> Client {
        let (client_out, server_in) = tokio::io::duplex(1 << 20);
        let (server_out, client_in) = tokio::io::duplex(1 << 20);
        let server = tokio::spawn(async move {
            serve_stdio_with(runtime, server_in, server_out, limits)
                .await
                .unwrap();
        });
        let (to_server, mut outgoing) = mpsc::unbounded_channel::<String>();
        let (incoming, from_server) = mpsc::unbounded_channel();
        let writer = tokio::spawn(async move {
            let mut client_out = client_out;
            while let Some(text) = outgoing.recv().await {
                client_out.write_all(text.as_bytes()).await.unwrap();
                client_out.write_all(b"\n").await.unwrap();
            }
        });
        let reader = tokio::spawn(async move {
            let mut lines = BufReader::new(client_in).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let value: Value = serde_json::from_str(&line).unwrap();
                if incoming.send(value).is_err() {
                    return;
                }
            }
        });
        // The server task is left running on drop: closing its stdin ends it.
        drop(server);
        Client::from_parts(to_server, from_server, vec![writer, reader])
    }

    fn from_parts(
        to_server: mpsc::UnboundedSender<String>,
        from_server: mpsc::UnboundedReceiver<Value>,
        tasks: Vec<JoinHandle<()>>,
    ) -> Client {
        Client {
            to_server,
            from_server,
            tasks,
            next_id: 1,
            pending: VecDeque::new(),
        }
    }

    pub fn send_raw(&self, text: impl Into<String>) {
        self.to_server.send(text.into()).unwrap();
    }

    /// The next message off the wire (not the kept notifications).
    pub async fn next_message(&mut self) -> Value {
        tokio::time::timeout(WAIT, self.from_server.recv())
            .await
            .expect("a message should arrive in time")
            .expect("the server should not hang up")
    }

    /// Waits until the server hangs up, skipping whatever it sent before.
    pub async fn until_closed(&mut self) {
        tokio::time::timeout(WAIT, async {
            while self.from_server.recv().await.is_some() {}
        })
        .await
        .expect("the server should hang up in time");
    }

    /// Sends a request and waits for its answer: `Ok(result)` or
    /// `Err(error object)`.
    pub async fn request(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send_raw(
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        );
        loop {
            let message = self.next_message().await;
            if message.get("id") == Some(&json!(id)) {
                assert_eq!(message["jsonrpc"], "2.0");
                return match message.get("error") {
                    Some(error) => Err(error.clone()),
                    None => Ok(message["result"].clone()),
                };
            }
            assert!(
                message.get("method").is_some(),
                "unexpected message while waiting for {method}: {message}"
            );
            self.pending.push_back(message);
        }
    }

    /// A request that must succeed.
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        match self.request(method, params).await {
            Ok(result) => result,
            Err(error) => panic!("{method} failed: {error}"),
        }
    }

    /// A request that must fail; returns the error object.
    pub async fn call_err(&mut self, method: &str, params: Value) -> Value {
        match self.request(method, params).await {
            Ok(result) => panic!("{method} should have failed, got {result}"),
            Err(error) => error,
        }
    }

    pub async fn initialize(&mut self) -> Value {
        self.call("initialize", json!({"clientInfo": {"name": "test"}}))
            .await
    }

    /// Takes the notifications kept while waiting for responses.
    pub fn take_kept(&mut self) -> Vec<Value> {
        self.pending.drain(..).collect()
    }

    /// The next server notification, kept or fresh.
    pub async fn next_notification(&mut self) -> Value {
        if let Some(message) = self.pending.pop_front() {
            return message;
        }
        let message = self.next_message().await;
        assert!(
            message.get("method").is_some(),
            "expected a notification, got {message}"
        );
        message
    }

    /// `thread/event` notifications of `thread_id` up to and including the
    /// first whose event type is `until`.
    pub async fn events_until(&mut self, thread_id: &str, until: &str) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let notification = self.next_notification().await;
            assert_eq!(notification["method"], "thread/event");
            if notification["params"]["threadId"] != thread_id {
                continue;
            }
            let done = super::event_type(&notification) == until;
            seen.push(notification);
            if done {
                return seen;
            }
        }
    }

    /// Every persisted event of `thread_id` after `cursor`, paging with
    /// `limit` through `thread/events`.
    pub async fn read_events(&mut self, thread_id: &str, cursor: u64, limit: u32) -> Vec<Value> {
        let mut cursor = cursor;
        let mut events = Vec::new();
        loop {
            let page = self
                .call(
                    "thread/events",
                    json!({"threadId": thread_id, "cursor": cursor, "limit": limit}),
                )
                .await;
            let batch = page["events"].as_array().unwrap().clone();
            assert!(batch.len() <= limit as usize);
            events.extend(batch);
            cursor = page["nextCursor"].as_u64().unwrap();
            if !page["hasMore"].as_bool().unwrap() {
                return events;
            }
        }
    }
}
