//! How shell-style tools turn a command string into a process.

use serde::{Deserialize, Serialize};

/// The program and leading arguments used to run a command string.
///
/// The command string is appended as the last argument: `program args.. <command>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandShell {
    pub program: String,
    pub args: Vec<String>,
}

impl CommandShell {
    /// The argv for `command`: the shell's arguments followed by the command string.
    pub fn argv(&self, command: &str) -> Vec<String> {
        let mut args = self.args.clone();
        args.push(command.to_string());
        args
    }
}

impl Default for CommandShell {
    fn default() -> Self {
        default_command_shell()
    }
}

/// `sh -c`: a POSIX shell that every sandbox image has.
///
/// Deliberately not a login shell (`-l`): a login shell sources the profile on
/// every command, which costs milliseconds (`bash -lc true` is ~140 ms on a
/// typical machine) and dominates a tool loop. Configure
/// `CommandShell { program: "sh", args: ["-lc"] }` where a runner's `PATH`
/// only exists in its profile.
pub fn default_command_shell() -> CommandShell {
    CommandShell {
        program: "sh".to_string(),
        args: vec!["-c".to_string()],
    }
}
