//! The protocol's types: the JSON-RPC envelope, and the params and results
//! of each method group. Every type derives `JsonSchema`; the committed
//! schema (`schema/protocol.schema.json`) is generated from them.
//!
//! Names on the wire are camelCase. The one exception is the runtime event
//! inside a `thread/event` notification, which keeps its persisted
//! (snake_case) form so it is byte-for-byte what the thread's log holds.

pub mod approval;
pub mod envelope;
pub mod event;
pub mod initialize;
pub mod rewind;
pub mod runner;
pub mod thread;
pub mod turn;
pub mod workdir;

pub use approval::*;
pub use envelope::{
    ErrorObject, JsonRpcClientResponse, JsonRpcError, JsonRpcNotification, JsonRpcRequest,
    JsonRpcResponse, JsonRpcServerRequest, JsonRpcVersion, RequestId, ServerMessage,
};
pub use event::{LaggedData, RuntimeEvent, THREAD_EVENT, ThreadCursor, ThreadEvent};
pub use initialize::*;
pub use rewind::*;
pub use runner::*;
pub use thread::*;
pub use turn::*;
pub use workdir::*;
