//! A shell command line, split the way approval rules read it.
//!
//! Rules match commands by their leading words (`exec:cargo test`). A model
//! writes command lines for `sh -c`, so a line may hold several commands
//! (`cd x && cargo test`), pipes, quotes and things no prefix can vouch for:
//! substitutions (`$(...)`, backquotes), redirections that write files,
//! subshells, here-documents, control keywords. This splitter reads quotes,
//! escapes and the list operators (`;`, `&&`, `||`, `|`, `&`, newlines), and
//! marks everything else it cannot see through as *opaque*: an allow rule
//! never vouches for an opaque line, so it asks instead.
//!
//! It is not a shell parser, and deny rules built on it are a guard against
//! mistakes, not a boundary: the sandbox policy is the boundary.

/// The simple commands of a line and whether anything in it is opaque.
///
/// ```
/// use roder_api::approval::CommandLine;
///
/// let line = CommandLine::parse("cd src && RUST_LOG=1 cargo test -p 'a b' 2>&1 | tail -5");
/// assert_eq!(line.commands, vec![
///     vec!["cd".to_string(), "src".to_string()],
///     vec!["cargo".into(), "test".into(), "-p".into(), "a b".into()],
///     vec!["tail".into(), "-5".into()],
/// ]);
/// assert!(!line.opaque);
/// assert!(CommandLine::parse("echo $(cat secret)").opaque);
/// assert!(CommandLine::parse("echo hi > notes.txt").opaque);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommandLine {
    /// Each simple command's words, with leading `NAME=value` assignments
    /// and harmless redirections (`2>&1`, `>/dev/null`, `<file`) dropped.
    pub commands: Vec<Vec<String>>,
    /// Whether the line holds something a prefix cannot vouch for.
    pub opaque: bool,
}

/// Words that open compound commands: their bodies are not simple commands.
pub(super) const KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "function", "select", "!", "[[", "]]", "{", "}",
];

/// One lexical piece of a line.
#[derive(Debug, PartialEq)]
enum Token {
    /// A word, unquoted; `plain` is false when any part of it was quoted or
    /// escaped (a quoted `>` is not a redirection).
    Word {
        text: String,
        plain: bool,
        /// Whether a `$` in it expands (unquoted or inside double quotes).
        expands: bool,
    },
    /// `;`, `&&`, `||`, `|`, `&` or a newline.
    Separator,
    /// `>`, `>>`, `<`, `<<`, `<<<`, `>|`, `&>`, with an optional fd before.
    Redirect(String),
}

impl CommandLine {
    /// Splits `line`. Never fails: what it cannot read makes the line opaque.
    pub fn parse(line: &str) -> CommandLine {
        let (tokens, mut opaque) = tokenize(line);
        let mut commands = Vec::new();
        let mut words: Vec<String> = Vec::new();
        let mut tokens = tokens.into_iter().peekable();
        while let Some(token) = tokens.next() {
            match token {
                Token::Separator => {
                    if !words.is_empty() {
                        commands.push(std::mem::take(&mut words));
                    }
                }
                Token::Redirect(operator) => {
                    let target = match tokens.peek() {
                        Some(Token::Word { text, .. }) => Some(text.clone()),
                        _ => None,
                    };
                    if target.is_some() {
                        tokens.next();
                    }
                    if !harmless_redirect(&operator, target.as_deref()) {
                        opaque = true;
                    }
                }
                Token::Word {
                    text,
                    plain,
                    expands,
                } => {
                    let leading = words.is_empty();
                    if leading && plain && is_assignment(&text) {
                        continue;
                    }
                    if leading && plain && KEYWORDS.contains(&text.as_str()) {
                        opaque = true;
                    }
                    if leading && expands {
                        // The program itself comes from a variable.
                        opaque = true;
                    }
                    words.push(text);
                }
            }
        }
        if !words.is_empty() {
            commands.push(words);
        }
        CommandLine { commands, opaque }
    }
}

/// `NAME=value` before a command sets its environment.
pub(super) fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// Redirections that neither write a file nor feed the command a script.
fn harmless_redirect(operator: &str, target: Option<&str>) -> bool {
    let op = operator.trim_start_matches(|c: char| c.is_ascii_digit());
    match (op, target) {
        // Duplicating or closing a descriptor: `2>&1`, `>&2`, `2>&-`.
        (">&" | "<&", _) => true,
        (">" | ">>" | "&>" | ">|", Some("/dev/null")) => true,
        ("<", Some(_)) => true,
        _ => false,
    }
}

/// The tokens of `line`, and whether it had something opaque at the lexical
/// level (substitutions, subshells, an unterminated quote).
fn tokenize(line: &str) -> (Vec<Token>, bool) {
    let mut tokens = Vec::new();
    let mut opaque = false;
    let mut chars = line.chars().peekable();
    let mut word = String::new();
    let mut in_word = false;
    let mut plain = true;
    let mut expands = false;
    macro_rules! end_word {
        () => {
            if in_word {
                tokens.push(Token::Word {
                    text: std::mem::take(&mut word),
                    plain,
                    expands,
                });
                in_word = false;
                plain = true;
                expands = false;
            }
        };
    }
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                plain = false;
                let mut closed = false;
                for inner in chars.by_ref() {
                    if inner == '\'' {
                        closed = true;
                        break;
                    }
                    word.push(inner);
                }
                opaque |= !closed;
            }
            '"' => {
                in_word = true;
                plain = false;
                let mut closed = false;
                while let Some(inner) = chars.next() {
                    match inner {
                        '"' => {
                            closed = true;
                            break;
                        }
                        '\\' => match chars.next() {
                            Some(escaped @ ('"' | '\\' | '$' | '`')) => word.push(escaped),
                            Some('\n') => {}
                            Some(other) => {
                                word.push('\\');
                                word.push(other);
                            }
                            None => break,
                        },
                        '`' => {
                            opaque = true;
                            word.push(inner);
                        }
                        '$' => {
                            opaque |= chars.peek() == Some(&'(');
                            expands = true;
                            word.push(inner);
                        }
                        _ => word.push(inner),
                    }
                }
                opaque |= !closed;
            }
            '\\' => {
                in_word = true;
                plain = false;
                match chars.next() {
                    Some('\n') => {}
                    Some(escaped) => word.push(escaped),
                    None => opaque = true,
                }
            }
            '`' => {
                opaque = true;
                in_word = true;
                word.push(c);
            }
            '$' => {
                opaque |= chars.peek() == Some(&'(');
                expands = true;
                in_word = true;
                word.push(c);
            }
            '#' if !in_word => {
                // A comment runs to the end of the line.
                for inner in chars.by_ref() {
                    if inner == '\n' {
                        tokens.push(Token::Separator);
                        break;
                    }
                }
            }
            ' ' | '\t' => end_word!(),
            '\n' | ';' => {
                end_word!();
                tokens.push(Token::Separator);
            }
            '&' | '|' => {
                if c == '&' && chars.peek() == Some(&'>') {
                    end_word!();
                    chars.next();
                    let mut operator = String::from("&>");
                    if chars.peek() == Some(&'>') {
                        chars.next();
                        operator.push('>');
                    }
                    tokens.push(Token::Redirect(operator));
                    continue;
                }
                end_word!();
                if chars.peek() == Some(&c) {
                    chars.next();
                }
                tokens.push(Token::Separator);
            }
            '(' | ')' => {
                // Subshells, process substitution, function bodies.
                opaque = true;
                end_word!();
                tokens.push(Token::Separator);
            }
            '<' | '>' => {
                // An all-digit word right before is the descriptor (`2>`).
                let mut operator = String::new();
                if in_word && plain && !word.is_empty() && word.chars().all(|d| d.is_ascii_digit())
                {
                    operator = std::mem::take(&mut word);
                    in_word = false;
                } else {
                    end_word!();
                }
                operator.push(c);
                while let Some(&next) = chars.peek() {
                    if next == '<' || next == '>' || next == '&' || next == '|' {
                        operator.push(next);
                        chars.next();
                    } else {
                        break;
                    }
                    if operator.ends_with('&') || operator.ends_with('|') {
                        break;
                    }
                }
                if operator.ends_with("<(") || chars.peek() == Some(&'(') {
                    opaque = true;
                }
                tokens.push(Token::Redirect(operator));
            }
            _ => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        tokens.push(Token::Word {
            text: word,
            plain,
            expands,
        });
    }
    (tokens, opaque)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn words(line: &str) -> Vec<Vec<String>> {
        CommandLine::parse(line).commands
    }

    #[test]
    fn lists_and_pipes_split_into_simple_commands() {
        assert_eq!(
            words("a 1; b 2 && c || d | e & f\ng"),
            vec![
                vec!["a", "1"],
                vec!["b", "2"],
                vec!["c"],
                vec!["d"],
                vec!["e"],
                vec!["f"],
                vec!["g"]
            ]
        );
        assert!(!CommandLine::parse("a 1; b 2 && c || d | e & f\ng").opaque);
    }

    #[test]
    fn quotes_and_escapes_make_one_word() {
        assert_eq!(
            words(r#"git commit -m "fix: the \"thing\"" 'a;b' c\ d"#),
            vec![vec![
                "git",
                "commit",
                "-m",
                "fix: the \"thing\"",
                "a;b",
                "c d"
            ]]
        );
    }

    #[test]
    fn what_a_prefix_cannot_vouch_for_is_opaque() {
        for line in [
            "echo $(id)",
            "echo `id`",
            "echo \"$(id)\"",
            "cat <(ls)",
            "(cd x; rm y)",
            "echo hi > out.txt",
            "echo hi >> out.txt",
            "cat <<EOF\nx\nEOF",
            "if true; then rm x; fi",
            "$CMD arg",
            "echo 'unterminated",
        ] {
            assert!(CommandLine::parse(line).opaque, "{line}");
        }
    }

    #[test]
    fn harmless_redirections_and_assignments_are_dropped() {
        let line = CommandLine::parse("FOO=1 BAR=x cargo test 2>&1 >/dev/null < input.txt");
        assert_eq!(line.commands, vec![vec!["cargo", "test"]]);
        assert!(!line.opaque);
        assert_eq!(words("# just a comment"), Vec::<Vec<String>>::new());
        assert_eq!(words("ls # list"), vec![vec!["ls"]]);
        // A quoted `>` is an argument, not a redirection.
        assert!(!CommandLine::parse("echo '>' x").opaque);
    }

    proptest! {
        #[test]
        fn never_panics(line in "\\PC{0,64}") {
            let _ = CommandLine::parse(&line);
        }

        #[test]
        fn quoted_words_come_back_whole(parts in proptest::collection::vec("[^'\u{0}]{1,12}", 1..5)) {
            let line: Vec<String> = parts.iter().map(|part| format!("'{part}'")).collect();
            let parsed = CommandLine::parse(&line.join(" "));
            prop_assert_eq!(parsed.commands, vec![parts]);
            prop_assert!(!parsed.opaque);
        }
    }
}
