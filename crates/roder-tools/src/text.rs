//! Text helpers shared by the file tools: decoding and diffs.

use roder_api::approval::FilePreview;
use roder_api::tools::FileChange;
use similar::TextDiff;

use crate::tool::ToolError;

/// How far into a file the binary check looks (as git does).
const BINARY_SNIFF_BYTES: usize = 8 * 1024;

/// Decodes a file the model wants to read or edit as text.
///
/// Binary files are refused rather than shown as mojibake: a NUL in the first
/// 8 KiB or invalid UTF-8 anywhere.
pub(crate) fn decode_text(bytes: Vec<u8>, display: &str) -> Result<String, ToolError> {
    let sniff = &bytes[..bytes.len().min(BINARY_SNIFF_BYTES)];
    if sniff.contains(&0) {
        return Err(ToolError::new(format!(
            "{display} is a binary file; only UTF-8 text files can be read or edited"
        )));
    }
    String::from_utf8(bytes).map_err(|error| {
        ToolError::new(format!(
            "{display} is not valid UTF-8 text (invalid byte at offset {}); only UTF-8 text files can be read or edited",
            error.utf8_error().valid_up_to()
        ))
    })
}

/// A unified diff of one file's change, as clients show it.
pub(crate) fn unified_diff(display: &str, old: &str, new: &str) -> String {
    TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{display}"), &format!("b/{display}"))
        .to_string()
}

/// What a person sees of a change before it is made: the diff, and the
/// whole texts when they are small enough to carry (`None`: absent).
pub(crate) fn file_preview(
    absolute: &std::path::Path,
    display: &str,
    old: Option<&str>,
    new: Option<&str>,
) -> FilePreview {
    let whole = |text: Option<&str>| {
        text.filter(|text| text.len() <= FilePreview::WHOLE_TEXT_LIMIT)
            .map(str::to_string)
    };
    FilePreview {
        path: absolute.display().to_string(),
        diff: unified_diff(display, old.unwrap_or_default(), new.unwrap_or_default()),
        old_text: whole(old),
        new_text: whole(new),
    }
}

pub(crate) fn file_change(display: &str, old: &str, new: &str) -> FileChange {
    FileChange {
        path: display.to_string(),
        diff: unified_diff(display, old, new),
    }
}

/// Shortens `line` to at most `max_chars` characters, saying how much was cut.
pub(crate) fn truncate_line(line: &str, max_chars: usize) -> std::borrow::Cow<'_, str> {
    match line.char_indices().nth(max_chars) {
        None => std::borrow::Cow::Borrowed(line),
        Some((cut, _)) => {
            let dropped = line[cut..].chars().count();
            std::borrow::Cow::Owned(format!("{}... [{dropped} more characters]", &line[..cut]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_binary_and_invalid_utf8() {
        assert_eq!(decode_text(b"hi\n".to_vec(), "a").unwrap(), "hi\n");
        let binary = decode_text(b"a\0b".to_vec(), "img.png").unwrap_err();
        assert!(binary.0.contains("img.png is a binary file"), "{binary}");
        let latin1 = decode_text(b"caf\xe9".to_vec(), "x.txt").unwrap_err();
        assert!(latin1.0.contains("not valid UTF-8"), "{latin1}");
        assert!(latin1.0.contains("offset 3"), "{latin1}");
    }

    #[test]
    fn diffs_are_unified_with_paths() {
        let diff = unified_diff("src/a.rs", "one\ntwo\n", "one\nTWO\n");
        assert!(
            diff.starts_with("--- a/src/a.rs\n+++ b/src/a.rs\n"),
            "{diff}"
        );
        assert!(diff.contains("-two\n+TWO\n"), "{diff}");
    }

    #[test]
    fn truncates_long_lines_on_char_boundaries() {
        assert_eq!(truncate_line("short", 10), "short");
        assert_eq!(truncate_line("ééééé", 2), "éé... [3 more characters]");
    }
}
