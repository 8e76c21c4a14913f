//! Errors a user can act on.
//!
//! Every variant says what failed and, where there is one, what to do about
//! it. Callers that need to branch (the runtime's fallback on a vanished
//! sprite, tests) downcast an `anyhow::Error` to [`SpritesError`].

use std::time::Duration;

use crate::TOKEN_ENV;

/// A failure talking to the Sprites API or preparing to.
#[derive(Debug, thiserror::Error)]
pub enum SpritesError {
    /// No API token in the environment.
    #[error(
        "Sprites API token is missing: set the {TOKEN_ENV} environment variable to a Sprites API token (it is read from the environment only, never from the destination config)"
    )]
    MissingToken,

    /// The destination config (or persisted session state) is invalid.
    #[error("invalid sprites runner config: {0}")]
    Config(String),

    /// 401 or 403: the token is wrong, expired or lacks access.
    #[error(
        "Sprites authentication failed (HTTP {status}) while {action}: {message}; check that {TOKEN_ENV} holds a valid Sprites API token for this organization"
    )]
    Auth {
        status: u16,
        action: String,
        message: String,
    },

    /// 429: too many requests or too many sprites.
    #[error("Sprites rate limit hit (HTTP 429) while {action}: {message}; {}", retry_hint(*retry_after))]
    RateLimited {
        action: String,
        message: String,
        retry_after: Option<Duration>,
    },

    /// The sprite does not exist (any more).
    #[error("sprite \"{name}\" was not found while {action}; it was deleted or never created")]
    SpriteNotFound { name: String, action: String },

    /// A file asked for does not exist in the sprite.
    #[error("no such file in sprite \"{name}\": {path}")]
    NoSuchFile { name: String, path: String },

    /// The base URL could not be reached at all.
    #[error(
        "cannot reach the Sprites API at {base_url} while {action}: {detail}; check the network and the runner's base_url (or SPRITES_API_URL)"
    )]
    Unreachable {
        base_url: String,
        action: String,
        detail: String,
    },

    /// 503 "Process not ready" on every attempt: the sprite's process
    /// supervisor did not come up within `RetryPolicy::not_ready_retries`.
    #[error(
        "the sprite was still starting (HTTP 503 \"Process not ready\") while {action}, on all {attempts} attempts over about {waited_s} s; a new or waking sprite is normally ready within seconds, so retry later (or raise RetryPolicy::not_ready_retries)"
    )]
    NotReady {
        action: String,
        attempts: u32,
        waited_s: u64,
    },

    /// 409 (or a 400 saying so) on create: a sprite with this name exists.
    #[error("a sprite named \"{name}\" already exists (HTTP {status}): {message}")]
    NameTaken {
        name: String,
        status: u16,
        message: String,
    },

    /// Any other non-success status.
    #[error("Sprites API returned HTTP {status} while {action}: {message}")]
    Api {
        status: u16,
        action: String,
        message: String,
    },

    /// The transfer broke after the request was sent, or timed out.
    #[error("Sprites API request failed while {action}: {detail}")]
    Transport { action: String, detail: String },

    /// A checkpoint could not be taken.
    #[error("Sprites checkpoint of sprite \"{name}\" failed: {message}")]
    Checkpoint { name: String, message: String },

    /// The server answered with something this client cannot read.
    #[error("unexpected Sprites API response while {action}: {detail}")]
    Protocol { action: String, detail: String },
}

fn retry_hint(retry_after: Option<Duration>) -> String {
    match retry_after {
        Some(wait) => format!("retry after {} s", wait.as_secs().max(1)),
        None => "retry later (the server did not say when)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_fix() {
        assert!(
            SpritesError::MissingToken
                .to_string()
                .contains("SPRITES_TOKEN")
        );
        let auth = SpritesError::Auth {
            status: 401,
            action: "creating sprite \"a\"".into(),
            message: "bad token".into(),
        };
        assert!(
            auth.to_string()
                .starts_with("Sprites authentication failed (HTTP 401)")
        );
        let limited = SpritesError::RateLimited {
            action: "creating sprite \"a\"".into(),
            message: "sprite_creation_rate_limited".into(),
            retry_after: Some(Duration::from_secs(12)),
        };
        assert!(
            limited.to_string().contains("retry after 12 s"),
            "{limited}"
        );
        let limited = SpritesError::RateLimited {
            action: "x".into(),
            message: "y".into(),
            retry_after: None,
        };
        assert!(limited.to_string().contains("retry later"), "{limited}");
        let starting = SpritesError::NotReady {
            action: "running a command in sprite \"a\"".into(),
            attempts: 9,
            waited_s: 21,
        };
        let text = starting.to_string();
        assert!(
            text.contains("Process not ready") && text.contains("9 attempts"),
            "{text}"
        );
        assert!(text.contains("not_ready_retries"), "{text}");
    }
}
