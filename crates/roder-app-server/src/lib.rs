//! Roder's control plane: products drive the runtime over JSON-RPC 2.0
//! instead of linking Rust.
//!
//! Two transports share one connection logic: [`serve_stdio`] (one message
//! per line) and [`bind_ws`] (one message per WebSocket text frame, plus
//! `/healthz` and `/readyz`). A connection `initialize`s, then creates or
//! resumes threads, which subscribes it to their events: each runtime event
//! arrives as a `thread/event` notification carrying its `seq`, so a client
//! that reconnects resumes from its last seq and misses nothing.
//!
//! Where to look:
//! * `protocol/`: the wire types (the schema is derived from them).
//! * `methods.rs`: the method table (name, params, result, handler).
//! * `handlers/`: one file per method group.
//! * `connection/`: subscriptions, the bounded outgoing queue, the router of
//!   events to the connections following their thread (`fanout`), the
//!   forwarder.
//! * `follow.rs`: events of threads other replicas write.
//! * `stdio.rs`, `ws/`: the transports.
//! * `web/`: the web page the WebSocket server serves (built in).
//!
//! ```no_run
//! # async fn example(runtime: std::sync::Arc<roder_core::Runtime>) -> anyhow::Result<()> {
//! use roder_app_server::{WsServerConfig, bind_ws};
//!
//! let server = bind_ws(runtime, WsServerConfig::default()).await?;
//! println!("listening on ws://{}", server.local_addr());
//! server.serve().await
//! # }
//! ```
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod connection;
mod convert;
mod decode;
pub mod error;
pub mod follow;
pub mod framing;
mod handlers;
mod methods;
pub mod protocol;
mod schema;
mod stdio;
mod web;
mod ws;

pub use connection::ConnectionLimits;
pub use error::codes;
pub use follow::{FollowStream, SentCursor, SharedFollowSource, ThreadFollowSource};
pub use handlers::session::PROTOCOL_VERSION;
pub use methods::METHODS;
pub use schema::{protocol_schema, protocol_schema_json};
pub use stdio::{serve_stdio, serve_stdio_following, serve_stdio_with};
pub use ws::{
    ListenAddressError, WsServer, WsServerConfig, bind_ws, bind_ws_following,
    resolve_listen_address,
};
