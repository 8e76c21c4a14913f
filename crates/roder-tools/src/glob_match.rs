//! File-name patterns for `glob` and `grep`'s `glob` filter.
//!
//! The semantics follow ripgrep and `.gitignore`, which is what models expect:
//! a pattern without `/` (`*.rs`) matches a file's name at any depth; a
//! pattern with `/` (`src/**/*.rs`) matches the whole path relative to the
//! searched directory, and `*` does not cross `/` (use `**`).

use std::path::Path;

use globset::{GlobBuilder, GlobMatcher};

use crate::tool::ToolError;

#[derive(Debug, Clone)]
pub(crate) struct PathPattern {
    matcher: GlobMatcher,
    name_only: bool,
}

impl PathPattern {
    pub fn new(pattern: &str) -> Result<Self, ToolError> {
        let trimmed = pattern.trim();
        if trimmed.is_empty() {
            return Err(ToolError::new("glob pattern must not be empty"));
        }
        let anchored = trimmed
            .strip_prefix("./")
            .or_else(|| trimmed.strip_prefix('/'))
            .unwrap_or(trimmed);
        let name_only = !anchored.contains('/');
        let glob = GlobBuilder::new(anchored)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|error| {
                ToolError::new(format!("invalid glob pattern {pattern:?}: {error}"))
            })?;
        Ok(Self {
            matcher: glob.compile_matcher(),
            name_only,
        })
    }

    /// Whether `relative` (a path relative to the searched directory) matches.
    pub fn matches(&self, relative: &Path) -> bool {
        if self.name_only {
            relative
                .file_name()
                .is_some_and(|name| self.matcher.is_match(Path::new(name)))
        } else {
            self.matcher.is_match(relative)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, path: &str) -> bool {
        PathPattern::new(pattern).unwrap().matches(Path::new(path))
    }

    #[test]
    fn names_match_at_any_depth() {
        assert!(matches("*.rs", "main.rs"));
        assert!(matches("*.rs", "src/deep/lib.rs"));
        assert!(!matches("*.rs", "src/lib.rsx"));
        assert!(matches("Cargo.toml", "crates/a/Cargo.toml"));
    }

    #[test]
    fn paths_with_slashes_are_anchored() {
        assert!(matches("src/*.rs", "src/lib.rs"));
        assert!(!matches("src/*.rs", "src/a/lib.rs"));
        assert!(matches("src/**/*.rs", "src/a/b/lib.rs"));
        assert!(matches("src/**/*.rs", "src/lib.rs"));
        assert!(matches("**/*.rs", "lib.rs"));
        assert!(matches("./src/*.rs", "src/lib.rs"));
        assert!(!matches("src/*.rs", "other/src/lib.rs"));
        assert!(matches("*.{rs,toml}", "a/Cargo.toml"));
    }

    #[test]
    fn bad_patterns_are_errors() {
        let error = PathPattern::new("a[").unwrap_err();
        assert!(error.0.contains("invalid glob pattern \"a[\""), "{error}");
        assert!(PathPattern::new("  ").is_err());
    }
}
