//! The JSON-RPC 2.0 envelope: requests, responses, errors and notifications.
//!
//! Kept small and fully typed so the protocol schema can be derived from it;
//! method parameters and results live next to their method group.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// The `"jsonrpc": "2.0"` marker every message carries. Deserializing any
/// other value fails, so a message from another protocol is an invalid request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JsonRpcVersion;

pub const JSONRPC_VERSION: &str = "2.0";

impl Serialize for JsonRpcVersion {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(JSONRPC_VERSION)
    }
}

impl<'de> Deserialize<'de> for JsonRpcVersion {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let version = Cow::<str>::deserialize(deserializer)?;
        if version == JSONRPC_VERSION {
            Ok(JsonRpcVersion)
        } else {
            Err(serde::de::Error::custom(format!(
                "jsonrpc must be \"{JSONRPC_VERSION}\", got \"{version}\""
            )))
        }
    }
}

impl JsonSchema for JsonRpcVersion {
    fn schema_name() -> Cow<'static, str> {
        "JsonRpcVersion".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "const": JSONRPC_VERSION })
    }
}

/// A request id: whatever the client chose, echoed in the response.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RequestId {
    Integer(i64),
    String(String),
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestId::Integer(id) => write!(f, "{id}"),
            RequestId::String(id) => write!(f, "{id:?}"),
        }
    }
}

/// A message from the client. Without an `id` it is a notification and gets
/// no answer. `params` are decoded per method (see the method table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JsonRpcRequest {
    pub jsonrpc: JsonRpcVersion,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<RequestId>,
    pub method: String,
    /// An object (by-position arrays are not accepted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
}

/// The answer to a request that succeeded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JsonRpcResponse {
    pub jsonrpc: JsonRpcVersion,
    pub id: RequestId,
    pub result: Value,
}

/// The answer to a request that failed. `id` is null when the request's id
/// could not be read (parse errors, oversized messages) and for the
/// server-initiated "client lagged" error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JsonRpcError {
    pub jsonrpc: JsonRpcVersion,
    pub id: Option<RequestId>,
    pub error: ErrorObject,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorObject {
    /// See the error code table in the README (`crate::error::codes`).
    pub code: i64,
    pub message: String,
    /// Structured details, e.g. `{"field": "threadId"}` for invalid params.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// A message from the server that expects no answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JsonRpcNotification {
    pub jsonrpc: JsonRpcVersion,
    pub method: String,
    pub params: Value,
}

/// A request from the server (`approval/request`): the client answers it
/// with a response carrying the same `id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JsonRpcServerRequest {
    pub jsonrpc: JsonRpcVersion,
    pub id: RequestId,
    pub method: String,
    pub params: Value,
}

/// A client's answer to a server request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JsonRpcClientResponse {
    pub jsonrpc: JsonRpcVersion,
    pub id: RequestId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorObject>,
}

/// Anything the server writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ServerMessage {
    Response(JsonRpcResponse),
    Error(JsonRpcError),
    Request(JsonRpcServerRequest),
    Notification(JsonRpcNotification),
}

impl ServerMessage {
    pub fn response(id: RequestId, result: Value) -> Self {
        ServerMessage::Response(JsonRpcResponse {
            jsonrpc: JsonRpcVersion,
            id,
            result,
        })
    }

    pub fn error(id: Option<RequestId>, error: ErrorObject) -> Self {
        ServerMessage::Error(JsonRpcError {
            jsonrpc: JsonRpcVersion,
            id,
            error,
        })
    }

    pub fn request(id: RequestId, method: &str, params: Value) -> Self {
        ServerMessage::Request(JsonRpcServerRequest {
            jsonrpc: JsonRpcVersion,
            id,
            method: method.to_string(),
            params,
        })
    }

    pub fn notification(method: &str, params: Value) -> Self {
        ServerMessage::Notification(JsonRpcNotification {
            jsonrpc: JsonRpcVersion,
            method: method.to_string(),
            params,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_other_than_two_is_refused() {
        let error = serde_json::from_str::<JsonRpcRequest>(
            r#"{"jsonrpc":"1.0","id":1,"method":"initialize"}"#,
        )
        .unwrap_err();
        assert!(
            error.to_string().contains("jsonrpc must be \"2.0\""),
            "{error}"
        );
    }

    #[test]
    fn ids_keep_their_type() {
        let request: JsonRpcRequest =
            serde_json::from_str(r#"{"jsonrpc":"2.0","id":"a","method":"m"}"#).unwrap();
        assert_eq!(request.id, Some(RequestId::String("a".into())));
        let request: JsonRpcRequest =
            serde_json::from_str(r#"{"jsonrpc":"2.0","id":7,"method":"m"}"#).unwrap();
        assert_eq!(request.id, Some(RequestId::Integer(7)));
    }

    #[test]
    fn errors_without_an_id_serialize_a_null_id() {
        let message = ServerMessage::error(
            None,
            ErrorObject {
                code: -32700,
                message: "parse error".into(),
                data: None,
            },
        );
        let json = serde_json::to_value(&message).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}})
        );
    }
}
