//! From a message's text to a request, and from `params` to a method's typed
//! params, with errors that say exactly what is wrong.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::RpcError;
use crate::protocol::{JsonRpcClientResponse, JsonRpcRequest, RequestId};

/// A message that could not become a request, with the id to answer to when
/// one could be read.
#[derive(Debug)]
pub(crate) struct Rejected {
    pub id: Option<RequestId>,
    pub error: RpcError,
}

/// One message from a client: a request (or notification), or its answer
/// to a request of the server's.
#[derive(Debug)]
pub(crate) enum Incoming {
    Request(JsonRpcRequest),
    Response(JsonRpcClientResponse),
}

/// Parses one message: a response (an object with an `id`, no `method`, and
/// a `result` or an `error`) or a request ([`parse_request`]).
// A rejection carries a JSON value; with serde_json's `preserve_order`
// (which `roder-acp`'s schema crate turns on workspace-wide) a `Value` is
// larger. Rejections are the cold path: not worth boxing.
#[allow(clippy::result_large_err)]
pub(crate) fn parse_message(text: &str) -> Result<Incoming, Rejected> {
    let value: Value = serde_json::from_str(text).map_err(|error| Rejected {
        id: None,
        error: RpcError::parse_error(error),
    })?;
    let is_response = value.as_object().is_some_and(|object| {
        !object.contains_key("method")
            && object.contains_key("id")
            && (object.contains_key("result") || object.contains_key("error"))
    });
    if is_response {
        return serde_json::from_value(value)
            .map(Incoming::Response)
            .map_err(|error| Rejected {
                id: None,
                error: RpcError::invalid_request(format!("a malformed response: {error}")),
            });
    }
    request_of(value).map(Incoming::Request)
}

/// Parses one message: -32700 when it is not JSON, -32600 when it is not a
/// single JSON-RPC 2.0 request object.
#[cfg(test)]
// See `parse_message`: a larger `Value` under `preserve_order`.
#[allow(clippy::result_large_err)]
pub(crate) fn parse_request(text: &str) -> Result<JsonRpcRequest, Rejected> {
    let value: Value = serde_json::from_str(text).map_err(|error| Rejected {
        id: None,
        error: RpcError::parse_error(error),
    })?;
    request_of(value)
}

// A rejection carries a JSON value; with serde_json's `preserve_order`
// (which `roder-acp`'s schema crate turns on workspace-wide) a `Value` is
// larger. Rejections are the cold path: not worth boxing.
#[allow(clippy::result_large_err)]
fn request_of(value: Value) -> Result<JsonRpcRequest, Rejected> {
    let id = match &value {
        Value::Object(object) => object
            .get("id")
            .and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok()),
        Value::Array(_) => {
            return Err(Rejected {
                id: None,
                error: RpcError::invalid_request(
                    "batches are not supported; send one request per message",
                ),
            });
        }
        _ => {
            return Err(Rejected {
                id: None,
                error: RpcError::invalid_request("a request must be a JSON object"),
            });
        }
    };
    let request: JsonRpcRequest = serde_json::from_value(value).map_err(|error| Rejected {
        id: id.clone(),
        error: RpcError::invalid_request(error),
    })?;
    if let Some(params) = &request.params
        && !params.is_object()
    {
        return Err(Rejected {
            id,
            error: RpcError::invalid_params(
                &request.method,
                "params",
                "params must be an object (by-position params are not supported)",
            ),
        });
    }
    Ok(request)
}

/// Decodes a method's params (absent params decode like `{}`), naming the
/// offending field as a dotted path in the error.
pub(crate) fn decode_params<T: DeserializeOwned>(
    method: &str,
    params: Option<Value>,
) -> Result<T, RpcError> {
    let params = params.unwrap_or_else(|| Value::Object(Default::default()));
    serde_path_to_error::deserialize(params).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner().to_string();
        let field = field_of(&path, &inner);
        RpcError::invalid_params(method, &field, inner)
    })
}

/// The field an error is about: the path where it happened, plus the field
/// serde names for "missing field" errors (whose path is the enclosing
/// object; an unknown field's path already ends with it).
fn field_of(path: &str, message: &str) -> String {
    let named = ["missing field `", "unknown field `"]
        .iter()
        .find_map(|prefix| message.strip_prefix(prefix))
        .and_then(|rest| rest.split('`').next());
    let path = if path == "." { "" } else { path };
    match (path, named) {
        ("", Some(name)) => name.to_string(),
        ("", None) => "params".to_string(),
        (path, Some(name)) if path == name || path.ends_with(&format!(".{name}")) => {
            path.to_string()
        }
        (path, Some(name)) => format!("{path}.{name}"),
        (path, None) => path.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::codes;
    use crate::protocol::{ThreadEventsParams, ThreadStartParams, TurnStartParams};

    #[test]
    fn not_json_is_a_parse_error() {
        let rejected = parse_request("{not json").unwrap_err();
        assert_eq!(rejected.error.code, codes::PARSE_ERROR);
        assert_eq!(rejected.id, None);
    }

    #[test]
    fn a_batch_is_refused_as_an_invalid_request() {
        let rejected = parse_request("[]").unwrap_err();
        assert_eq!(rejected.error.code, codes::INVALID_REQUEST);
        assert!(rejected.error.message.contains("batches"));
    }

    #[test]
    fn a_bad_envelope_keeps_its_id() {
        let rejected = parse_request(r#"{"jsonrpc":"2.0","id":4}"#).unwrap_err();
        assert_eq!(rejected.error.code, codes::INVALID_REQUEST);
        assert_eq!(rejected.id, Some(RequestId::Integer(4)));
        assert!(
            rejected.error.message.contains("method"),
            "{:?}",
            rejected.error
        );
    }

    #[test]
    fn answers_to_server_requests_are_responses() {
        let Ok(Incoming::Response(response)) =
            parse_message(r#"{"jsonrpc":"2.0","id":"approval-1","result":{"decision":"reject"}}"#)
        else {
            panic!("a response");
        };
        assert_eq!(response.id, RequestId::String("approval-1".into()));
        assert!(matches!(
            parse_message(r#"{"jsonrpc":"2.0","id":1,"method":"m"}"#),
            Ok(Incoming::Request(_))
        ));
        let bad = parse_message(r#"{"jsonrpc":"2.0","id":1,"result":1,"extra":2}"#).unwrap_err();
        assert_eq!(bad.error.code, codes::INVALID_REQUEST);
    }

    #[test]
    fn positional_params_are_refused() {
        let rejected =
            parse_request(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":[1]}"#).unwrap_err();
        assert_eq!(rejected.error.code, codes::INVALID_PARAMS);
    }

    #[test]
    fn a_missing_field_is_named() {
        let error = decode_params::<TurnStartParams>(
            "turn/start",
            Some(serde_json::json!({"message": "hi"})),
        )
        .unwrap_err();
        assert_eq!(error.code, codes::INVALID_PARAMS);
        assert_eq!(error.data, Some(serde_json::json!({"field": "threadId"})));
        assert!(error.message.contains("threadId"), "{}", error.message);
    }

    #[test]
    fn a_wrong_type_is_named_by_its_path() {
        let error = decode_params::<ThreadStartParams>(
            "thread/start",
            Some(serde_json::json!({"runner": {"providerId": "x", "workspace": 5}})),
        )
        .unwrap_err();
        assert_eq!(
            error.data,
            Some(serde_json::json!({"field": "runner.workspace"}))
        );
    }

    #[test]
    fn a_snake_case_field_is_named_as_unknown() {
        let error = decode_params::<ThreadEventsParams>(
            "thread/events",
            Some(serde_json::json!({"thread_id": "t"})),
        )
        .unwrap_err();
        assert_eq!(error.data, Some(serde_json::json!({"field": "thread_id"})));
    }

    #[test]
    fn absent_params_decode_as_an_empty_object() {
        let params: ThreadStartParams = decode_params("thread/start", None).unwrap();
        assert_eq!(params, ThreadStartParams::default());
    }
}
