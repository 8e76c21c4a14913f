//! `roder app-server --listen` as a process, and a WebSocket JSON-RPC
//! client of it that also answers the server's own requests
//! (`approval/request`).

use std::collections::VecDeque;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// A listening app server and the address it printed.
pub struct ListeningServer {
    pub child: tokio::process::Child,
    pub address: String,
}

impl ListeningServer {
    pub async fn start(home: &Path, workspace: &Path) -> Self {
        Self::start_with(home, workspace, "127.0.0.1:0", None).await
    }

    /// Listening at `listen`, with `--token-env RODER_TEST_TOKEN` set to
    /// `token` when given.
    pub async fn start_with(
        home: &Path,
        workspace: &Path,
        listen: &str,
        token: Option<&str>,
    ) -> Self {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_roder"));
        command.args(["app-server", "--listen", listen]);
        if let Some(token) = token {
            command
                .args(["--token-env", "RODER_TEST_TOKEN"])
                .env("RODER_TEST_TOKEN", token);
        }
        let mut child = command
            .arg("-C")
            .arg(workspace)
            .env("RODER_HOME", home)
            .env("FAKE_MODEL_KEY", "test-key")
            .env_remove("RODER_MODEL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let address = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the server prints its address")
            .unwrap()
            .unwrap();
        Self { child, address }
    }

    /// `kill -9`, and waits for it to be gone.
    pub async fn kill(mut self) {
        self.child.start_kill().unwrap();
        self.child.wait().await.unwrap();
    }
}

pub struct WsClient {
    socket: WebSocketStream<MaybeTlsStream<TcpStream>>,
    next_id: u64,
    /// Messages read while waiting for something else.
    unread: VecDeque<Value>,
    pub client_id: String,
}

impl WsClient {
    /// Connects and initializes; `approvals` says it answers approvals.
    pub async fn connect(address: &str, name: &str, approvals: bool) -> Self {
        let (socket, _) = tokio_tungstenite::connect_async(address).await.unwrap();
        let mut client = Self {
            socket,
            next_id: 0,
            unread: VecDeque::new(),
            client_id: String::new(),
        };
        let init = client
            .call(
                "initialize",
                json!({"clientInfo": {"name": name}, "capabilities": {"approvals": approvals}}),
            )
            .await
            .unwrap();
        client.client_id = init["clientId"].as_str().unwrap().to_string();
        client
    }

    async fn send(&mut self, message: Value) {
        self.socket
            .send(Message::text(message.to_string()))
            .await
            .unwrap();
    }

    async fn read(&mut self, what: &str) -> Value {
        loop {
            let frame = tokio::time::timeout(Duration::from_secs(60), self.socket.next())
                .await
                .unwrap_or_else(|_| panic!("nothing within 60 s while waiting for {what}"))
                .unwrap_or_else(|| panic!("the server closed the socket while waiting for {what}"))
                .unwrap();
            if let Message::Text(text) = frame {
                return serde_json::from_str(&text).unwrap();
            }
        }
    }

    /// A request's result or error object; other messages are kept.
    pub async fn call(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let message = self.read(method).await;
            if message["id"] == id && message.get("method").is_none() {
                return match message.get("error") {
                    Some(error) if !error.is_null() => Err(error.clone()),
                    _ => Ok(message["result"].clone()),
                };
            }
            self.unread.push_back(message);
        }
    }

    /// The next message `accept` takes (kept ones first).
    pub async fn next(&mut self, what: &str, accept: impl Fn(&Value) -> bool) -> Value {
        if let Some(index) = self.unread.iter().position(&accept) {
            return self.unread.remove(index).unwrap();
        }
        loop {
            let message = self.read(what).await;
            if accept(&message) {
                return message;
            }
            self.unread.push_back(message);
        }
    }

    /// The next `approval/request` (the whole request: `id` and `params`).
    pub async fn approval_request(&mut self) -> Value {
        self.next("approval/request", |message| {
            message["method"] == "approval/request" && message.get("id").is_some()
        })
        .await
    }

    /// The next `approval/resolved`'s params.
    pub async fn approval_resolved(&mut self) -> Value {
        self.next("approval/resolved", |message| {
            message["method"] == "approval/resolved"
        })
        .await["params"]
            .clone()
    }

    /// Answers a server request.
    pub async fn answer(&mut self, request: &Value, result: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": request["id"], "result": result}))
            .await;
    }

    /// Events of `thread_id` until one of type `last`, as their `event`
    /// objects.
    pub async fn events_until(&mut self, thread_id: &str, last: &str) -> Vec<Value> {
        let mut events = Vec::new();
        loop {
            let message = self
                .next(last, |message| {
                    message["method"] == "thread/event"
                        && message["params"]["threadId"] == thread_id
                })
                .await;
            let event = message["params"]["event"].clone();
            let done = event["type"] == last;
            events.push(event);
            if done {
                return events;
            }
        }
    }

    /// Whether a message `accept` takes arrived (among those read so far).
    pub fn saw(&self, accept: impl Fn(&Value) -> bool) -> bool {
        self.unread.iter().any(accept)
    }
}
