//! The protocol's JSON Schema, generated from the Rust types.
//!
//! The committed copy (`schema/protocol.schema.json`) is what client authors
//! read and generate code from; a test regenerates it and fails when the
//! committed one is stale (`UPDATE_SCHEMA=1 cargo test -p roder-app-server
//! schema` rewrites it).

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::error::ERROR_CODES;
use crate::handlers::session::PROTOCOL_VERSION;
use crate::methods;
use crate::protocol::{
    APPROVAL_REQUEST, APPROVAL_RESOLVED, ApprovalRequestParams, ApprovalResolvedParams,
    ApprovalResult, JsonRpcRequest, LaggedData, ServerMessage, THREAD_EVENT, ThreadEvent,
};

/// The whole protocol as one JSON Schema (draft 2020-12) document: messages
/// in `oneOf`, every type under `$defs`, and the method, notification and
/// error tables under `x-` keywords.
pub fn protocol_schema() -> Value {
    let mut generator = SchemaSettings::draft2020_12().into_generator();
    let request = generator.subschema_for::<JsonRpcRequest>();
    let server_message = generator.subschema_for::<ServerMessage>();
    let methods = methods::method_schemas(&mut generator);
    let thread_event = generator.subschema_for::<ThreadEvent>();
    let lagged = generator.subschema_for::<LaggedData>();
    let approval_request = generator.subschema_for::<ApprovalRequestParams>();
    let approval_result = generator.subschema_for::<ApprovalResult>();
    let approval_resolved = generator.subschema_for::<ApprovalResolvedParams>();
    let definitions = generator.take_definitions(true);
    let errors: Vec<Value> = ERROR_CODES
        .iter()
        .map(|(code, name, meaning)| json!({ "code": code, "name": name, "meaning": meaning }))
        .collect();
    let mut notifications = Map::new();
    notifications.insert(
        THREAD_EVENT.to_string(),
        json!({
            "description": "One runtime event of a subscribed thread, in seq order.",
            "params": thread_event,
        }),
    );
    notifications.insert(
        APPROVAL_RESOLVED.to_string(),
        json!({
            "description": "An ask this approver was sent is settled (by any approver, a rule, the timeout or an interrupt).",
            "params": approval_resolved,
        }),
    );
    let mut server_requests = Map::new();
    server_requests.insert(
        APPROVAL_REQUEST.to_string(),
        json!({
            "description": "Sent to connections that said capabilities.approvals in initialize, for each pending ask of a thread they follow: decide the call. The first answer of any approver wins.",
            "params": approval_request,
            "result": approval_result,
        }),
    );
    sorted(json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Roder app-server protocol",
        "description": "JSON-RPC 2.0, one message per line (stdio) or per text frame (WebSocket). Client messages are JsonRpcRequest; server messages are ServerMessage. x-methods gives each method's params and result, x-notifications the server's notifications, x-serverRequests the requests the server sends (a client answers them with a response), x-errors the error codes.",
        "oneOf": [request, server_message],
        "x-protocolVersion": PROTOCOL_VERSION,
        "x-methods": methods,
        "x-notifications": notifications,
        "x-serverRequests": server_requests,
        "x-errors": errors,
        "x-clientLaggedData": lagged,
        "$defs": definitions,
    }))
}

/// [`protocol_schema`] as the committed file holds it: pretty, keys sorted,
/// ending with a newline. Stable whatever serde_json's map order is.
pub fn protocol_schema_json() -> String {
    let mut text =
        serde_json::to_string_pretty(&protocol_schema()).unwrap_or_else(|_| "{}".to_string());
    text.push('\n');
    text
}

fn sorted(value: Value) -> Value {
    match value {
        Value::Object(object) => {
            let mut entries: Vec<(String, Value)> = object.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(key, value)| (key, sorted(value)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_and_its_types_are_in_the_schema() {
        let schema = protocol_schema();
        for method in methods::METHODS {
            let entry = &schema["x-methods"][method];
            assert!(entry["params"].is_object(), "{method} has no params schema");
            assert!(entry["result"].is_object(), "{method} has no result schema");
        }
        for name in [
            "ThreadStartParams",
            "ThreadEvent",
            "JsonRpcRequest",
            "RunnerSelection",
        ] {
            assert!(
                schema["$defs"][name].is_object(),
                "{name} missing from $defs"
            );
        }
        // camelCase on the wire.
        assert!(schema["$defs"]["ThreadStartParams"]["properties"]["externalTools"].is_object());
    }
}
