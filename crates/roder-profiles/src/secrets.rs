//! Profiles are shared (committed, archived, snapshotted with threads), so
//! they never hold a secret: MCP servers name the variables that hold
//! credentials (`env_vars`, `bearer_token_env_var`), and any string that
//! looks like a credential is refused when the profile loads.

use roder_api::profile::ProfileMcpServer;

use crate::error::ProfileError;

/// Refuses a profile any of whose strings looks like a credential.
pub fn refuse_literal_secrets(value: &serde_json::Value, origin: &str) -> Result<(), ProfileError> {
    match value {
        serde_json::Value::String(text) => refuse_in_text(text, "a value", origin),
        serde_json::Value::Array(items) => items
            .iter()
            .try_for_each(|item| refuse_literal_secrets(item, origin)),
        serde_json::Value::Object(table) => table.iter().try_for_each(|(key, item)| {
            refuse_in_text(key, "a key", origin)?;
            refuse_literal_secrets(item, origin)
        }),
        _ => Ok(()),
    }
}

/// Refuses `text` if it contains a token-shaped word.
pub fn refuse_in_text(text: &str, what: &str, origin: &str) -> Result<(), ProfileError> {
    match token_kind(text) {
        Some(kind) => Err(ProfileError::invalid(
            origin,
            format!(
                "{what} contains what looks like {kind}; profiles never hold secrets: name the environment variable instead (env_vars, bearer_token_env_var)"
            ),
        )),
        None => Ok(()),
    }
}

/// What kind of credential a word of `text` looks like, if any. Works on
/// bytes: no slicing of untrusted text.
fn token_kind(text: &str) -> Option<&'static str> {
    let is_token_byte = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-';
    for word in text.as_bytes().split(|b| !(is_token_byte(b) || *b == b'.')) {
        let run_after = |prefix: &[u8]| -> usize {
            word.strip_prefix(prefix)
                .map(|rest| rest.iter().take_while(|b| is_token_byte(b)).count())
                .unwrap_or(0)
        };
        if run_after(b"sk-") >= 20 {
            return Some("an API key (sk-...)");
        }
        if ["ghp_", "gho_", "ghs_", "ghu_", "github_pat_"]
            .iter()
            .any(|prefix| run_after(prefix.as_bytes()) >= 20)
        {
            return Some("a GitHub token");
        }
        if word.starts_with(b"AKIA")
            && word.len() >= 20
            && word[4..20]
                .iter()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        {
            return Some("an AWS access key id");
        }
        if ["xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-"]
            .iter()
            .any(|prefix| run_after(prefix.as_bytes()) >= 10)
        {
            return Some("a Slack token");
        }
        if word.starts_with(b"eyJ") && word.iter().filter(|b| **b == b'.').count() == 2 {
            let parts: Vec<&[u8]> = word.split(|b| *b == b'.').collect();
            if parts.iter().all(|part| part.len() >= 8) && parts[1].starts_with(b"eyJ") {
                return Some("a JSON Web Token");
            }
        }
    }
    None
}

/// An MCP server names its secrets' variables and nothing else.
pub fn check_mcp_server(
    name: &str,
    server: &ProfileMcpServer,
    origin: &str,
) -> Result<(), ProfileError> {
    let bad = |why: String| ProfileError::invalid(origin, format!("mcp_servers.{name}: {why}"));
    match (&server.command, &server.url) {
        (Some(_), Some(_)) => return Err(bad("give command or url, not both".into())),
        (None, None) => return Err(bad("needs command (stdio) or url (HTTP)".into())),
        _ => {}
    }
    for variable in server
        .env_vars
        .iter()
        .chain(server.bearer_token_env_var.iter())
    {
        let bytes = variable.as_bytes();
        let valid = !bytes.is_empty()
            && !bytes[0].is_ascii_digit()
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || *b == b'_');
        if !valid {
            return Err(bad(format!(
                "{variable:?} is not an environment variable name; name the variable that holds the value, never the value"
            )));
        }
    }
    if let Some(url) = &server.url {
        let after_scheme = url.split_once("://").map_or(url.as_str(), |(_, rest)| rest);
        let authority = after_scheme.split(['/', '?', '#']).next().unwrap_or("");
        if authority.contains('@') {
            return Err(bad(format!(
                "url {url:?} carries credentials; use bearer_token_env_var"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn token_shapes_are_caught() {
        assert!(token_kind("key sk-abcdefghijklmnopqrstuvwxyz012345").is_some());
        assert!(token_kind("ghp_abcdefghijklmnopqrstuvwxyz0123456789").is_some());
        assert!(token_kind("AKIAABCDEFGHIJKLMNOP").is_some());
        assert!(token_kind("xoxb-1234567890-abc").is_some());
        assert!(
            token_kind("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijk").is_some()
        );
        assert!(token_kind("use sk-learn and the GITHUB_TOKEN variable").is_none());
        assert!(token_kind("Review the diff; never edit files.").is_none());
    }

    #[test]
    fn mcp_servers_name_variables() {
        let server = ProfileMcpServer {
            url: Some("https://mcp.example/github".into()),
            bearer_token_env_var: Some("GITHUB_TOKEN".into()),
            ..Default::default()
        };
        check_mcp_server("github", &server, "p").unwrap();
        let literal = ProfileMcpServer {
            bearer_token_env_var: Some("Bearer abc".into()),
            ..server.clone()
        };
        assert!(check_mcp_server("github", &literal, "p").is_err());
        let userinfo = ProfileMcpServer {
            url: Some("https://me:pw@mcp.example/".into()),
            ..server
        };
        assert!(check_mcp_server("github", &userinfo, "p").is_err());
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,200}") {
            let _ = token_kind(&text);
        }
    }
}
