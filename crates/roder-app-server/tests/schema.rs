//! The committed protocol schema must be what the Rust types generate.
//!
//! When it is stale, regenerate it with
//! `UPDATE_SCHEMA=1 cargo test -p roder-app-server --test schema`
//! and commit `schema/protocol.schema.json`.

use std::path::PathBuf;

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schema/protocol.schema.json")
}

#[test]
fn schema_is_up_to_date() {
    let generated = roder_app_server::protocol_schema_json();
    let path = committed_path();
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed.replace("\r\n", "\n") == generated,
        "{} is stale (or missing): the protocol types changed. Regenerate it with \
         `UPDATE_SCHEMA=1 cargo test -p roder-app-server --test schema` and commit it.",
        path.display()
    );
}

#[test]
fn schema_lists_every_method_and_error_code() {
    let schema = roder_app_server::protocol_schema();
    for method in roder_app_server::METHODS {
        assert!(schema["x-methods"][method].is_object(), "{method}");
    }
    let codes: Vec<i64> = schema["x-errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["code"].as_i64().unwrap())
        .collect();
    for code in [
        -32700, -32600, -32601, -32602, -32603, -32001, -32002, -32003, -32004, -32005, -32006,
        -32007, -32008,
    ] {
        assert!(codes.contains(&code), "{code} missing from x-errors");
    }
}
