//! What a tool does to the world, as the tool itself declares it.
//!
//! Approvals are decided from these declarations, never from a tool's name:
//! a tool that declares nothing is taken to write files and run commands
//! ([`ToolEffects::UNDECLARED`]), so an unknown tool is never waved through.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A set of effects (a small bit set): a tool may read, search, write,
/// delete, move, execute and reach the network, in any combination.
///
/// ```
/// use roder_api::approval::{ToolEffects, ToolKind};
///
/// let patch = ToolEffects::WRITE | ToolEffects::DELETE | ToolEffects::MOVE;
/// assert!(patch.edits() && !patch.executes() && !patch.only_reads());
/// assert_eq!(patch.kind(), ToolKind::Edit);
/// assert!(ToolEffects::UNDECLARED.executes() && ToolEffects::UNDECLARED.edits());
/// assert_eq!(serde_json::to_string(&ToolEffects::READ).unwrap(), r#"["read"]"#);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ToolEffects(u8);

/// Each effect with its wire name, in a fixed order.
const NAMES: [(ToolEffects, &str); 7] = [
    (ToolEffects::READ, "read"),
    (ToolEffects::SEARCH, "search"),
    (ToolEffects::WRITE, "write"),
    (ToolEffects::DELETE, "delete"),
    (ToolEffects::MOVE, "move"),
    (ToolEffects::EXECUTE, "execute"),
    (ToolEffects::NETWORK, "network"),
];

impl ToolEffects {
    /// Changes nothing and reads nothing outside its arguments.
    pub const NONE: ToolEffects = ToolEffects(0);
    /// Reads files.
    pub const READ: ToolEffects = ToolEffects(1);
    /// Lists or searches files.
    pub const SEARCH: ToolEffects = ToolEffects(1 << 1);
    /// Creates or changes files.
    pub const WRITE: ToolEffects = ToolEffects(1 << 2);
    /// Deletes files.
    pub const DELETE: ToolEffects = ToolEffects(1 << 3);
    /// Moves or renames files.
    pub const MOVE: ToolEffects = ToolEffects(1 << 4);
    /// Runs commands (which may do anything the sandbox lets them).
    pub const EXECUTE: ToolEffects = ToolEffects(1 << 5);
    /// Reaches the network.
    pub const NETWORK: ToolEffects = ToolEffects(1 << 6);
    /// What a tool that declares nothing is taken to do.
    pub const UNDECLARED: ToolEffects = ToolEffects(Self::WRITE.0 | Self::EXECUTE.0);

    const READING: u8 = Self::READ.0 | Self::SEARCH.0;
    const EDITING: u8 = Self::WRITE.0 | Self::DELETE.0 | Self::MOVE.0;

    /// Both sets together (`|` in a `const`).
    pub const fn union(self, other: ToolEffects) -> ToolEffects {
        ToolEffects(self.0 | other.0)
    }

    /// Whether every effect of `other` is in this set.
    pub const fn contains(self, other: ToolEffects) -> bool {
        self.0 & other.0 == other.0
    }

    /// Reads or searches at most: such a call runs in every mode.
    pub const fn only_reads(self) -> bool {
        self.0 & !Self::READING == 0
    }

    /// Writes, deletes or moves files.
    pub const fn edits(self) -> bool {
        self.0 & Self::EDITING != 0
    }

    /// Edits files and does nothing beyond reading: what `accept_edits`
    /// lets run.
    pub const fn only_edits(self) -> bool {
        self.0 & !(Self::READING | Self::EDITING) == 0
    }

    pub const fn executes(self) -> bool {
        self.contains(Self::EXECUTE)
    }

    pub const fn reaches_network(self) -> bool {
        self.contains(Self::NETWORK)
    }

    /// The effect names in this set, in a fixed order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        NAMES
            .into_iter()
            .filter(move |(effect, _)| self.contains(*effect))
            .map(|(_, name)| name)
    }

    /// The set named by `name`, if it names an effect.
    pub fn from_name(name: &str) -> Option<ToolEffects> {
        NAMES
            .into_iter()
            .find(|(_, known)| *known == name)
            .map(|(effect, _)| effect)
    }

    /// The one word a client shows for a call with these effects (ACP's
    /// tool kinds): the most consequential effect wins.
    pub fn kind(self) -> ToolKind {
        if self.executes() {
            ToolKind::Execute
        } else if self.contains(Self::WRITE) {
            ToolKind::Edit
        } else if self.contains(Self::DELETE) {
            ToolKind::Delete
        } else if self.contains(Self::MOVE) {
            ToolKind::Move
        } else if self.reaches_network() {
            ToolKind::Fetch
        } else if self.contains(Self::SEARCH) {
            ToolKind::Search
        } else if self.contains(Self::READ) {
            ToolKind::Read
        } else {
            ToolKind::Other
        }
    }
}

impl std::ops::BitOr for ToolEffects {
    type Output = ToolEffects;

    fn bitor(self, other: ToolEffects) -> ToolEffects {
        ToolEffects(self.0 | other.0)
    }
}

impl std::fmt::Debug for ToolEffects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl std::fmt::Display for ToolEffects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.names().collect();
        if names.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&names.join(", "))
        }
    }
}

impl Serialize for ToolEffects {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.names())
    }
}

impl<'de> Deserialize<'de> for ToolEffects {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let names = Vec::<String>::deserialize(deserializer)?;
        names.iter().try_fold(ToolEffects::NONE, |set, name| {
            ToolEffects::from_name(name).map(|effect| set | effect).ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "unknown effect \"{name}\" (known: read, search, write, delete, move, execute, network)"
                ))
            })
        })
    }
}

/// How a client labels a tool call: the Agent Client Protocol's tool kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    Read,
    Edit,
    Delete,
    Move,
    Search,
    Execute,
    Fetch,
    Other,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_round_trip_by_name_and_refuse_unknown_names() {
        let set = ToolEffects::READ | ToolEffects::EXECUTE | ToolEffects::NETWORK;
        let json = serde_json::to_string(&set).unwrap();
        assert_eq!(json, r#"["read","execute","network"]"#);
        assert_eq!(serde_json::from_str::<ToolEffects>(&json).unwrap(), set);
        let error = serde_json::from_str::<ToolEffects>(r#"["teleport"]"#).unwrap_err();
        assert!(error.to_string().contains("unknown effect \"teleport\""));
    }

    #[test]
    fn classes_of_effects() {
        assert!(ToolEffects::NONE.only_reads());
        assert!((ToolEffects::READ | ToolEffects::SEARCH).only_reads());
        assert!(!(ToolEffects::READ | ToolEffects::NETWORK).only_reads());
        assert!((ToolEffects::READ | ToolEffects::WRITE).only_edits());
        assert!(!(ToolEffects::WRITE | ToolEffects::EXECUTE).only_edits());
        assert!(!ToolEffects::NETWORK.only_edits());
        assert_eq!(ToolEffects::NETWORK.kind(), ToolKind::Fetch);
        assert_eq!(ToolEffects::SEARCH.kind(), ToolKind::Search);
        assert_eq!(ToolEffects::NONE.kind(), ToolKind::Other);
        assert_eq!(ToolEffects::UNDECLARED.kind(), ToolKind::Execute);
        assert_eq!(ToolEffects::NONE.to_string(), "none");
    }
}
