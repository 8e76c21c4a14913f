//! The builtin coding tools of Roder: `read_file`, `write_file`, `edit`,
//! `multi_edit`, `apply_patch`, `list_files`, `glob`, `grep`, `shell` and
//! `exec_command`.
//!
//! Every tool is written once, against one `Workspace` type: either a
//! directory on this host or a remote runner session, chosen per call from
//! `ToolExecutionContext::workspace`. Path confinement
//! (the workspace root for writes and working directories, the root plus its
//! read roots for reads) is enforced in one place, the `paths` module, before
//! any I/O.
//!
//! The only public entry point is [`builtin_coding_tools_contributor`]; the
//! runtime registers the contributor and routes each call's workspace.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod contributor;
mod glob_match;
mod output;
mod patch;
mod paths;
mod process;
mod shell_words;
mod text;
mod tool;
mod tools;
mod workspace;

pub use contributor::{BuiltinCodingTools, CONTRIBUTOR_ID, builtin_coding_tools_contributor};
