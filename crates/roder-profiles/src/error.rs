//! What can go wrong resolving a profile; callers branch on the kind (a
//! client's bad selector is invalid params, a failed fetch is not).

/// A profile could not be resolved. Each message names the thing, the value
/// and, where there is one, the fix.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The selector itself is malformed.
    #[error("profile selector {0}")]
    Selector(String),
    /// No source has a profile of that name.
    #[error("{0}")]
    NotFound(String),
    /// A profile file or archive manifest does not parse or is invalid.
    #[error("{0}")]
    Invalid(String),
    /// An archive does not match its reference (size or digest), or has a
    /// member Roder refuses.
    #[error("{0}")]
    Verification(String),
    /// The archive could not be fetched and is not cached.
    #[error("{0}")]
    Fetch(String),
    /// Reading or writing the cache or a file failed.
    #[error("{0}")]
    Io(String),
}

impl ProfileError {
    pub(crate) fn invalid(origin: &str, why: impl std::fmt::Display) -> ProfileError {
        ProfileError::Invalid(format!("profile {origin}: {why}"))
    }
}
