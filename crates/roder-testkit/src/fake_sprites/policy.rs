//! The sprite's network policy: `GET` / `POST /v1/sprites/{name}/policy/network`.
//!
//! The wire format is the documented one (sprites.dev/api/sprites/policies,
//! docs `concepts/networking.mdx`): `{"rules": [...]}`, where each rule is
//! `{"domain": "<host>|*.<host>|*", "action": "allow"|"deny"}` or
//! `{"include": "defaults"}`, and `{"rules": []}` means no restriction. A
//! `POST` replaces the policy and answers 200 with it echoed back (the docs'
//! form; the Go SDK also accepts 204). Like the live sprite, the fake writes
//! the policy to `/.sprite/policy/network.json` inside the sprite, where a
//! command can read it.
//!
//! **The fake does not enforce it.** Its commands are host processes and
//! reach whatever the test process can; tests check that the policy was
//! sent and stored, not that connections are refused.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::routes::{json_error, missing_sprite};
use super::state::{Shared, host_path};

/// Where the live sprite exposes its policy, read-only, to its commands.
pub(crate) const POLICY_FILE: &str = "/.sprite/policy/network.json";

/// `GET /v1/sprites/{name}/policy/network`: the current policy.
pub(crate) async fn get(State(shared): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    match shared.lock().sprites.get(&name) {
        Some(sprite) => axum::Json(sprite.network_policy.clone()).into_response(),
        None => json_error(StatusCode::NOT_FOUND, &format!("sprite {name} not found")),
    }
}

/// `POST /v1/sprites/{name}/policy/network`: validates and stores the
/// policy, writes the in-sprite copy, and echoes it back.
pub(crate) async fn set(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    if let Some(response) = missing_sprite(&shared, &name) {
        return response;
    }
    let policy = match validate(&body) {
        Ok(policy) => policy,
        Err(errors) => {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({ "errors": errors })),
            )
                .into_response();
        }
    };
    let file = host_path(&shared.sprite_root(&name), POLICY_FILE);
    let written = async {
        if let Some(parent) = file.parent() {
            tokio::fs::create_dir_all(parent).await?;
        }
        tokio::fs::write(&file, policy.to_string()).await
    };
    if let Err(err) = written.await {
        return json_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("writing {POLICY_FILE}: {err}"),
        );
    }
    let mut inner = shared.lock();
    let Some(sprite) = inner.sprites.get_mut(&name) else {
        return json_error(StatusCode::NOT_FOUND, &format!("sprite {name} not found"));
    };
    sprite.network_policy = policy.clone();
    sprite.network_policy_sets += 1;
    axum::Json(policy).into_response()
}

/// The policy in `body`, or every problem found in it (the API's
/// validation-error list).
pub(crate) fn validate(body: &[u8]) -> Result<Value, Vec<String>> {
    let parsed: Value =
        serde_json::from_slice(body).map_err(|err| vec![format!("invalid JSON body: {err}")])?;
    let Some(object) = parsed.as_object() else {
        return Err(vec!["the policy must be a JSON object".to_string()]);
    };
    let mut errors: Vec<String> = object
        .keys()
        .filter(|key| key.as_str() != "rules")
        .map(|key| format!("unknown field {key:?}"))
        .collect();
    match object.get("rules").and_then(Value::as_array) {
        None => errors.push("rules is required and must be an array".to_string()),
        Some(rules) => {
            for (index, rule) in rules.iter().enumerate() {
                if let Err(why) = validate_rule(rule) {
                    errors.push(format!("rules[{index}]: {why}"));
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(parsed)
    } else {
        Err(errors)
    }
}

fn validate_rule(rule: &Value) -> Result<(), String> {
    let Some(rule) = rule.as_object() else {
        return Err("a rule must be an object".to_string());
    };
    if rule.contains_key("include") {
        return match (rule.len(), rule.get("include").and_then(Value::as_str)) {
            (1, Some("defaults")) => Ok(()),
            _ => Err("an include rule is exactly {\"include\": \"defaults\"}".to_string()),
        };
    }
    let keys_ok = rule.len() == 2 && rule.contains_key("domain") && rule.contains_key("action");
    if !keys_ok {
        return Err(format!(
            "a domain rule has exactly \"domain\" and \"action\", got {}",
            Value::Object(rule.clone())
        ));
    }
    match rule.get("domain").and_then(Value::as_str) {
        Some(domain) if valid_domain(domain) => {}
        _ => return Err(format!("invalid domain {}", field(rule, "domain"))),
    }
    match rule.get("action").and_then(Value::as_str) {
        Some("allow" | "deny") => Ok(()),
        _ => Err(format!(
            "action must be \"allow\" or \"deny\", got {}",
            field(rule, "action")
        )),
    }
}

fn field(rule: &Map<String, Value>, key: &str) -> String {
    rule.get(key).map_or_else(String::new, Value::to_string)
}

/// `*`, `*.<host>` or `<host>`: the three documented forms.
fn valid_domain(domain: &str) -> bool {
    let host = domain.strip_prefix("*.").unwrap_or(domain);
    domain == "*"
        || (!host.is_empty()
            && host.split('.').all(|label| {
                !label.is_empty()
                    && label
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_policies_are_accepted() {
        for body in [
            json!({"rules": []}),
            json!({"rules": [{"domain": "*", "action": "deny"}]}),
            json!({"rules": [
                {"include": "defaults"},
                {"domain": "example.com", "action": "allow"},
                {"domain": "*.example.com", "action": "allow"},
                {"domain": "blocked.com", "action": "deny"},
            ]}),
        ] {
            assert_eq!(validate(body.to_string().as_bytes()), Ok(body));
        }
    }

    #[test]
    fn malformed_policies_are_refused_naming_the_problem() {
        let cases = [
            (json!([]), "must be a JSON object"),
            (json!({}), "rules is required"),
            (
                json!({"rules": [], "mode": "deny"}),
                "unknown field \"mode\"",
            ),
            (
                json!({"rules": [{"domain": "*", "action": "block"}]}),
                "rules[0]: action must be",
            ),
            (
                json!({"rules": [{"domain": "a..b", "action": "deny"}]}),
                "invalid domain",
            ),
            (
                json!({"rules": [{"include": "everything"}]}),
                "include rule",
            ),
            (json!({"rules": [{"domain": "*"}]}), "exactly"),
            (json!({"rules": ["*"]}), "must be an object"),
        ];
        for (body, needle) in cases {
            let errors = validate(body.to_string().as_bytes()).unwrap_err();
            assert!(
                errors.iter().any(|e| e.contains(needle)),
                "{body}: {errors:?}"
            );
        }
        assert!(validate(b"{not json").is_err());
    }
}
