//! A `roder app-server` replica over stdio, for the multi-replica e2e
//! tests: JSON-RPC calls, with the `thread/event` notifications read
//! meanwhile kept for the caller.

use std::collections::VecDeque;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

pub struct Replica {
    pub child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
    /// `thread/event` notifications read while waiting for an answer.
    events: VecDeque<Value>,
}

impl Replica {
    /// `roder app-server` over stdio with `home`'s config and `extra` args.
    pub async fn start(home: &Path, root: &Path, extra: &[&str]) -> Self {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_roder"))
            .args(["app-server", "-C", root.to_str().unwrap()])
            .args(extra)
            .env("RODER_HOME", home)
            .env_remove("RODER_MODEL")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut replica = Self {
            stdin: child.stdin.take().unwrap(),
            lines: BufReader::new(child.stdout.take().unwrap()).lines(),
            child,
            next_id: 0,
            events: VecDeque::new(),
        };
        replica.call("initialize", json!({})).await.unwrap();
        replica
    }

    async fn read_message(&mut self, what: &str) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(30), self.lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("nothing within 30 s while waiting for {what}"))
            .unwrap()
            .unwrap_or_else(|| panic!("the server closed stdout while waiting for {what}"));
        serde_json::from_str(&line).unwrap()
    }

    /// Sends a request; its result or its error object. Notifications read
    /// meanwhile are kept for [`next_event`](Self::next_event).
    pub async fn call(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        self.next_id += 1;
        let id = self.next_id;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.stdin
            .write_all(format!("{request}\n").as_bytes())
            .await
            .unwrap();
        loop {
            let message = self.read_message(method).await;
            if message["id"] == id {
                if message["error"].is_null() {
                    return Ok(message["result"].clone());
                }
                return Err(message["error"].clone());
            }
            if message["method"] == "thread/event" {
                self.events.push_back(message["params"].clone());
            } else if message["id"].is_null() && !message["error"].is_null() {
                panic!("the server dropped the subscriptions: {message}");
            }
        }
    }

    /// The next `thread/event`'s params.
    pub async fn next_event(&mut self) -> Value {
        if let Some(event) = self.events.pop_front() {
            return event;
        }
        loop {
            let message = self.read_message("a thread/event").await;
            if message["method"] == "thread/event" {
                return message["params"].clone();
            }
            assert!(
                message["error"].is_null(),
                "an error instead of events: {message}"
            );
        }
    }

    /// Persisted events of `thread_id` until one of type `last` (included),
    /// as `(seq, type, turnId)`. Transient deltas are skipped.
    pub async fn events_until(
        &mut self,
        thread_id: &str,
        last: &str,
    ) -> Vec<(u64, String, String)> {
        let mut seen = Vec::new();
        loop {
            let params = self.next_event().await;
            assert_eq!(params["threadId"], thread_id, "{params}");
            let kind = params["event"]["type"].as_str().unwrap().to_string();
            if kind.ends_with("_delta") {
                continue;
            }
            let turn = params["turnId"].as_str().unwrap_or_default().to_string();
            seen.push((params["seq"].as_u64().unwrap(), kind.clone(), turn));
            if kind == last {
                return seen;
            }
        }
    }
}
