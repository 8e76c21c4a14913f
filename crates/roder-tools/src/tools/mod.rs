//! The builtin tools, one file each.

mod apply_patch;
mod command;
mod edit;
mod exec_command;
mod glob;
mod grep;
mod list_files;
mod multi_edit;
mod read_file;
mod shell;
mod write_file;

use std::sync::Arc;

use roder_api::tools::ToolExecutor;

use crate::tool::Registered;

/// Every builtin tool, ready to register.
pub(crate) fn all() -> Vec<Arc<dyn ToolExecutor>> {
    vec![
        Arc::new(Registered::<read_file::ReadFile>::new()),
        Arc::new(Registered::<write_file::WriteFile>::new()),
        Arc::new(Registered::<edit::Edit>::new()),
        Arc::new(Registered::<multi_edit::MultiEdit>::new()),
        Arc::new(Registered::<apply_patch::ApplyPatch>::new()),
        Arc::new(Registered::<list_files::ListFiles>::new()),
        Arc::new(Registered::<glob::Glob>::new()),
        Arc::new(Registered::<grep::Grep>::new()),
        Arc::new(Registered::<shell::Shell>::new()),
        Arc::new(Registered::<exec_command::ExecCommand>::new()),
    ]
}
