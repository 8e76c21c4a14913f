//! The names MCP tools are offered under: `mcp__SERVER__TOOL`, which no
//! builtin tool can have, within the character set and length every model
//! API accepts for a function name (`[A-Za-z0-9_-]`, at most 64).

use std::collections::BTreeSet;

/// Every MCP tool name starts with this.
pub const PREFIX: &str = "mcp__";

/// The longest function name OpenAI's APIs accept (Anthropic's too).
pub const MAX_NAME_LEN: usize = 64;

/// Whether `name` is usable as a server's name: non-empty, of the function
/// name characters only, so the tool names it makes stay readable.
pub fn valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
}

/// Hands out the model-facing names of one runtime's MCP tools, each once.
#[derive(Debug, Default)]
pub struct NameAllocator {
    taken: BTreeSet<String>,
}

impl NameAllocator {
    /// Reserves names already in use by other tools (the builtins), so an MCP
    /// tool can never shadow one even if its name were allowed.
    pub fn reserve(&mut self, name: &str) {
        self.taken.insert(name.to_string());
    }

    /// The name for `server`'s tool `tool`: `mcp__server__tool` with other
    /// characters replaced by `_`; a name that is too long or already taken
    /// (two tools that differ only in a replaced character) is cut and ends
    /// in a hash of the original pair instead, so it stays unique and stable.
    pub fn allocate(&mut self, server: &str, tool: &str) -> String {
        let plain = format!("{PREFIX}{}__{}", sanitize(server), sanitize(tool));
        let name = if plain.len() <= MAX_NAME_LEN && !self.taken.contains(&plain) {
            plain
        } else {
            let mut salt = 0u64;
            loop {
                let suffix = format!("_{:08x}", hash(server, tool, salt) as u32);
                let keep = MAX_NAME_LEN.saturating_sub(suffix.len()).min(plain.len());
                let candidate = format!("{}{suffix}", &plain[..keep]);
                if !self.taken.contains(&candidate) {
                    break candidate;
                }
                salt += 1;
            }
        };
        self.taken.insert(name.clone());
        name
    }
}

fn sanitize(part: &str) -> String {
    part.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// FNV-1a: stable across runs and builds (std's hasher is not), so a thread
/// resumed later calls the same names.
fn hash(server: &str, tool: &str, salt: u64) -> u64 {
    let mut state: u64 = 0xcbf2_9ce4_8422_2325;
    let bytes = server
        .bytes()
        .chain([0u8])
        .chain(tool.bytes())
        .chain(salt.to_le_bytes());
    for byte in bytes {
        state ^= u64::from(byte);
        state = state.wrapping_mul(0x0000_0100_0000_01b3);
    }
    state
}

#[cfg(test)]
mod tests {
    use super::*;

    fn legal(name: &str) -> bool {
        name.len() <= MAX_NAME_LEN && valid_server_name(name)
    }

    #[test]
    fn plain_names_are_prefixed_and_readable() {
        let mut names = NameAllocator::default();
        assert_eq!(
            names.allocate("time", "get_current_time"),
            "mcp__time__get_current_time"
        );
    }

    #[test]
    fn odd_characters_and_collisions_get_distinct_legal_names() {
        let mut names = NameAllocator::default();
        let dotted = names.allocate("fs", "read.file");
        let spaced = names.allocate("fs", "read file");
        assert_eq!(dotted, "mcp__fs__read_file");
        assert_ne!(dotted, spaced);
        assert!(legal(&dotted) && legal(&spaced), "{dotted} {spaced}");
        assert!(spaced.starts_with("mcp__fs__read_file_"));
    }

    #[test]
    fn long_names_are_cut_with_a_stable_hash() {
        let long = "x".repeat(100);
        let first = NameAllocator::default().allocate("server", &long);
        let again = NameAllocator::default().allocate("server", &long);
        assert_eq!(first, again);
        assert!(legal(&first), "{first}");
        let other = NameAllocator::default().allocate("server", &format!("{long}y"));
        assert_ne!(first, other);
    }

    #[test]
    fn reserved_names_are_never_handed_out() {
        let mut names = NameAllocator::default();
        names.reserve("mcp__a__b");
        let name = names.allocate("a", "b");
        assert_ne!(name, "mcp__a__b");
        assert!(legal(&name));
    }

    #[test]
    fn server_names_are_checked() {
        assert!(valid_server_name("git-2_x"));
        assert!(!valid_server_name(""));
        assert!(!valid_server_name("my server"));
        assert!(!valid_server_name("a.b"));
    }
}
