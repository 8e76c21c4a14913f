//! Quoting for command strings sent to a runner's POSIX shell.

/// Quotes `word` for a POSIX shell: single quotes, with embedded single quotes
/// closed, escaped and reopened. Safe for any byte string without NUL.
pub(crate) fn quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@%".contains(&b));
    if safe {
        return word.to_string();
    }
    let mut quoted = String::with_capacity(word.len() + 2);
    quoted.push('\'');
    for ch in word.chars() {
        if ch == '\'' {
            quoted.push_str("'\\''");
        } else {
            quoted.push(ch);
        }
    }
    quoted.push('\'');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn leaves_plain_words_alone_and_quotes_the_rest() {
        assert_eq!(quote("/sandbox/workspace/src"), "/sandbox/workspace/src");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), "'it'\\''s'");
        assert_eq!(quote("$(rm -rf /)"), "'$(rm -rf /)'");
    }

    proptest! {
        #[test]
        fn the_shell_reads_back_the_same_word(word in "[^\u{0}]{0,24}") {
            let output = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("printf '%s' {}", quote(&word)))
                .output()
                .unwrap();
            prop_assert_eq!(String::from_utf8_lossy(&output.stdout), word);
        }
    }
}
