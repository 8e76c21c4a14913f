//! Test doubles shared by Roder's tests and benchmarks.
//!
//! Everything here is real enough to fail: the fake servers speak their
//! service's wire format over real TCP on 127.0.0.1.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod fake_models;
pub mod fake_sprites;
pub mod long_thread;
pub mod mock_runner;
pub mod scripted_engine;
pub mod tmpfs;
pub mod tool_loop_engine;

pub use mock_runner::{MOCK_RUNNER_ID, MockRunnerProvider};
pub use scripted_engine::{ScriptedEngine, ScriptedRound, final_round, tool_call, tool_round};
pub use tool_loop_engine::ToolLoopEngine;
