//! The contributor that registers the builtin tools with a runtime.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use roder_api::extension::ToolProviderId;
use roder_api::tools::{ToolContributor, ToolRegistry};

use crate::tools;

/// The id the builtin bundle registers under.
pub const CONTRIBUTOR_ID: &str = "builtin-coding-tools";

/// The builtin coding tools as one [`ToolContributor`].
///
/// The directory it was created for is checked once, up front, so a typo in a
/// configuration fails at start-up rather than on the model's first call. The
/// tools themselves run in whatever workspace each call's context names (a
/// thread's local directory or its runner), never implicitly in this one.
#[derive(Debug, Clone)]
pub struct BuiltinCodingTools {
    workspace: PathBuf,
}

impl BuiltinCodingTools {
    /// The directory this bundle was created for.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }
}

/// Creates the builtin coding tools for `workspace`, which must be an
/// existing directory.
///
/// This is a synchronous, one-time start-up check (a single `stat`), so it
/// uses `std::fs`; nothing on a tool's hot path blocks.
pub fn builtin_coding_tools_contributor(
    workspace: impl Into<PathBuf>,
) -> anyhow::Result<Arc<dyn ToolContributor>> {
    let workspace = workspace.into();
    let metadata = std::fs::metadata(&workspace).with_context(|| {
        format!(
            "workspace {} for the builtin coding tools does not exist or cannot be read",
            workspace.display()
        )
    })?;
    if !metadata.is_dir() {
        anyhow::bail!(
            "workspace {} for the builtin coding tools is not a directory",
            workspace.display()
        );
    }
    Ok(Arc::new(BuiltinCodingTools { workspace }))
}

impl ToolContributor for BuiltinCodingTools {
    fn id(&self) -> ToolProviderId {
        CONTRIBUTOR_ID.to_string()
    }

    fn contribute(&self, registry: &mut ToolRegistry) -> anyhow::Result<()> {
        for tool in tools::all() {
            registry.register(tool)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_every_workspace_tool_once() {
        let dir = tempfile::tempdir().unwrap();
        let contributor = builtin_coding_tools_contributor(dir.path()).unwrap();
        assert_eq!(contributor.id(), CONTRIBUTOR_ID);
        let mut registry = ToolRegistry::new();
        contributor.contribute(&mut registry).unwrap();
        let mut names: Vec<&str> = registry.names().collect();
        names.sort_unstable();
        let mut expected = roder_api::tools::WORKSPACE_TOOL_NAMES.to_vec();
        expected.sort_unstable();
        assert_eq!(names, expected);
    }

    #[test]
    fn every_schema_forbids_additional_properties() {
        let mut registry = ToolRegistry::new();
        for tool in tools::all() {
            registry.register(tool).unwrap();
        }
        for spec in registry.specs() {
            assert_eq!(spec.parameters["type"], "object", "{}", spec.name);
            assert_eq!(
                spec.parameters["additionalProperties"],
                serde_json::Value::Bool(false),
                "{}",
                spec.name
            );
            assert!(!spec.description.is_empty(), "{}", spec.name);
        }
    }

    #[test]
    fn rejects_a_missing_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let error = builtin_coding_tools_contributor(&missing)
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("does not exist"), "{error}");
        assert!(error.contains("nope"), "{error}");
    }

    #[test]
    fn rejects_a_file_as_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file.txt");
        std::fs::write(&file, "x").unwrap();
        let error = builtin_coding_tools_contributor(&file)
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("is not a directory"), "{error}");
    }
}
