//! Which profile a caller asked for, normalised once.
//!
//! Grammar: `""` is the runtime default (`default_profile` in
//! `config.toml`, else `builtin:default`); `builtin:NAME` a compiled-in
//! profile; a bare `NAME` a profile looked up in the request's archive, the
//! workspace's `.roder/profiles/`, then `$RODER_HOME/profiles/`; anything
//! with a `/` or ending in `.md`/`.toml` a path. The `builtin:` prefix is
//! added once: `builtin:builtin:x` is refused, never collapsed, so a typo
//! cannot pick a different profile than the one written.

use std::fmt;
use std::path::PathBuf;

use crate::error::ProfileError;

/// The `builtin:` prefix; reserved.
pub const BUILTIN_PREFIX: &str = "builtin:";

/// A parsed selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// Nothing was asked: the runtime default applies.
    RuntimeDefault,
    /// A compiled-in profile, by its bare name (`plan`, not `builtin:plan`).
    Builtin(String),
    /// A profile by name.
    Named(String),
    /// A profile file by path.
    Path(PathBuf),
}

impl Selector {
    /// Parses a selector as a user or client wrote it.
    ///
    /// ```
    /// use roder_profiles::Selector;
    ///
    /// assert_eq!(Selector::parse("builtin:plan").unwrap(), Selector::Builtin("plan".into()));
    /// assert_eq!(Selector::parse("").unwrap(), Selector::RuntimeDefault);
    /// assert!(Selector::parse("builtin:builtin:plan").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<Selector, ProfileError> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(Selector::RuntimeDefault);
        }
        if let Some(name) = text.strip_prefix(BUILTIN_PREFIX) {
            if name.starts_with(BUILTIN_PREFIX) {
                return Err(ProfileError::Selector(format!(
                    "{text:?} has the builtin: prefix twice; write builtin:{}",
                    name.trim_start_matches(BUILTIN_PREFIX)
                )));
            }
            check_name(name).map_err(|why| ProfileError::Selector(format!("{text:?}: {why}")))?;
            return Ok(Selector::Builtin(name.to_string()));
        }
        if text.contains('/') || text.ends_with(".md") || text.ends_with(".toml") {
            return Ok(Selector::Path(PathBuf::from(text)));
        }
        check_name(text).map_err(|why| ProfileError::Selector(format!("{text:?}: {why}")))?;
        Ok(Selector::Named(text.to_string()))
    }

    /// A builtin by name, whether or not the caller already wrote the
    /// prefix (the seed's `Builtin("coder")` and `Builtin("builtin:coder")`
    /// both mean `builtin:coder`).
    ///
    /// ```
    /// use roder_profiles::Selector;
    ///
    /// assert_eq!(Selector::builtin("coder").unwrap().to_string(), "builtin:coder");
    /// assert_eq!(Selector::builtin("builtin:coder").unwrap().to_string(), "builtin:coder");
    /// ```
    pub fn builtin(name: &str) -> Result<Selector, ProfileError> {
        let bare = name.strip_prefix(BUILTIN_PREFIX).unwrap_or(name);
        Selector::parse(&format!("{BUILTIN_PREFIX}{bare}"))
    }
}

impl fmt::Display for Selector {
    /// The canonical text: what the thread's snapshot records.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selector::RuntimeDefault => Ok(()),
            Selector::Builtin(name) => write!(f, "{BUILTIN_PREFIX}{name}"),
            Selector::Named(name) => f.write_str(name),
            Selector::Path(path) => write!(f, "{}", path.display()),
        }
    }
}

/// Profile names: `[a-z0-9_-]{1,64}`, starting with a letter or digit (they
/// are file names and archive keys).
pub fn check_name(name: &str) -> Result<(), String> {
    let bytes = name.as_bytes();
    let valid = !bytes.is_empty()
        && bytes.len() <= 64
        && bytes[0].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-' || *b == b'_');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "profile name {name:?} must be 1 to 64 of a-z, 0-9, - and _, starting with a letter or digit"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn builtin_is_prefixed_once_and_never_twice() {
        let once = Selector::parse("builtin:review").unwrap();
        assert_eq!(once, Selector::Builtin("review".into()));
        assert_eq!(once.to_string(), "builtin:review");
        assert_eq!(Selector::parse(&once.to_string()).unwrap(), once);
        let error = Selector::parse("builtin:builtin:review").unwrap_err();
        assert!(error.to_string().contains("prefix twice"), "{error}");
        assert_eq!(Selector::builtin("review").unwrap(), once);
        assert_eq!(Selector::builtin("builtin:review").unwrap(), once);
        assert!(Selector::builtin("builtin:builtin:review").is_err());
    }

    #[test]
    fn names_paths_and_the_default() {
        assert_eq!(Selector::parse("  ").unwrap(), Selector::RuntimeDefault);
        assert_eq!(
            Selector::parse("reviewer").unwrap(),
            Selector::Named("reviewer".into())
        );
        assert_eq!(
            Selector::parse("./agents/x.md").unwrap(),
            Selector::Path("./agents/x.md".into())
        );
        assert!(Selector::parse("Reviewer").is_err());
        assert!(Selector::parse("builtin:").is_err());
        assert!(Selector::parse("a b").is_err());
    }

    proptest! {
        #[test]
        fn parsing_never_panics_and_canonical_text_round_trips(text in ".{0,80}") {
            if let Ok(selector) = Selector::parse(&text) {
                let again = Selector::parse(&selector.to_string()).unwrap();
                prop_assert_eq!(again, selector);
            }
        }
    }
}
