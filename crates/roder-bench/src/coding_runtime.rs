//! The runtime most benchmarks drive: a JSONL store, the builtin coding
//! tools and the bench's own engine, working in one directory.

use std::path::Path;
use std::sync::Arc;

use roder_api::extension::ExtensionRegistryBuilder;
use roder_api::inference::InferenceEngine;
use roder_core::{Runtime, RuntimeConfig};
use roder_ext_jsonl_thread_store::store::JsonlThreadStoreFactory;

/// A builder with `engine`, the JSONL store under `store` and the builtin
/// tools over `workspace`; add what the bench needs besides.
pub fn builder(
    engine: Arc<dyn InferenceEngine>,
    store: &Path,
    workspace: &Path,
) -> anyhow::Result<ExtensionRegistryBuilder> {
    let mut builder = ExtensionRegistryBuilder::new();
    builder.inference_engine(engine);
    builder.thread_store_factory(Arc::new(JsonlThreadStoreFactory {
        base_path: store.to_path_buf(),
    }));
    builder.tool_contributor(roder_tools::builtin_coding_tools_contributor(workspace)?);
    Ok(builder)
}

/// The runtime of `builder` with `workspace` as its workspace and the rest
/// of `config` as given.
pub fn runtime(
    builder: ExtensionRegistryBuilder,
    workspace: &Path,
    config: RuntimeConfig,
) -> anyhow::Result<Arc<Runtime>> {
    Ok(Arc::new(Runtime::new(
        builder.build()?,
        RuntimeConfig {
            workspace: Some(workspace.display().to_string()),
            ..config
        },
    )?))
}
