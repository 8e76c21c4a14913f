//! Profiles compiled into Roder, reachable only as `builtin:NAME` (users
//! cannot shadow them). Written in the same format as user profiles and
//! parsed by the same code, so they obey the same rules.

/// `(name, file text)` of every builtin.
pub const BUILTINS: &[(&str, &str)] = &[
    (
        "default",
        "+++\nname = \"default\"\ndescription = \"Roder as configured: every tool, the configured mode and sandbox\"\n+++\n",
    ),
    (
        "plan",
        "+++\nname = \"plan\"\ndescription = \"Read and search only; propose a plan, change nothing\"\n\
         policy_mode = \"plan\"\n\
         tools = [\"read_file\", \"list_files\", \"glob\", \"grep\"]\n+++\n\
         Investigate the code and answer with a plan: the files to change, the changes, and how to \
         check them. Do not change any file and do not run commands.\n",
    ),
    (
        "review",
        "+++\nname = \"review\"\ndescription = \"Review changes; report findings, never edit\"\n\
         tools = [\"read_file\", \"list_files\", \"glob\", \"grep\", \"exec_command\"]\n\
         disallowed_tools = [\"write_file\", \"edit\", \"multi_edit\", \"apply_patch\", \"exec:git push\", \"exec:git commit\"]\n\
         sandbox = { network = false }\n+++\n\
         You review code changes. Read the diff (git diff, git log) and the code around it, then \
         report findings ordered by severity, each with file:line and a concrete fix. Never edit files.\n",
    ),
    (
        "readonly",
        "+++\nname = \"readonly\"\ndescription = \"Read and search tools only, no network\"\n\
         tools = [\"read_file\", \"list_files\", \"glob\", \"grep\"]\n\
         sandbox = { network = false }\n+++\n",
    ),
];

/// The text of a builtin, by bare name.
pub fn text(name: &str) -> Option<&'static str> {
    BUILTINS
        .iter()
        .find(|(builtin, _)| *builtin == name)
        .map(|(_, text)| *text)
}

#[cfg(test)]
mod tests {
    use crate::file::{FileKind, parse};

    #[test]
    fn every_builtin_parses() {
        for (name, text) in super::BUILTINS {
            let doc = parse(text, FileKind::Markdown, name).unwrap();
            assert_eq!(doc.name.as_deref(), Some(*name));
        }
    }
}
