//! ACP shows an edit as the text before and after; a file change Roder
//! recorded carries a unified diff. The hunks give the changed region with
//! its context, which is what a client renders (not the whole file).

/// The old and new text of a unified diff's hunks (`None` for the old text
/// of a file the diff creates). Lines before the first `@@` are headers.
pub(crate) fn texts_of_unified(diff: &str) -> (Option<String>, String) {
    let mut old = String::new();
    let mut new = String::new();
    let mut in_hunks = false;
    let mut creates = false;
    let mut hunks = 0usize;
    for line in diff.split_inclusive('\n') {
        if line.starts_with("@@") {
            in_hunks = true;
            hunks += 1;
            if line.starts_with("@@ -0,0 ") {
                creates = true;
            }
            if hunks > 1 {
                old.push_str("⋮\n");
                new.push_str("⋮\n");
            }
            continue;
        }
        if !in_hunks {
            continue;
        }
        // Split on bytes: the marker is one ASCII byte, so the rest is
        // still valid UTF-8 whatever the line holds.
        let (marker, rest) = match line.as_bytes().first() {
            Some(b' ' | b'-' | b'+' | b'\\') => line.split_at(1),
            _ => ("", line),
        };
        match marker {
            " " => {
                old.push_str(rest);
                new.push_str(rest);
            }
            "-" => old.push_str(rest),
            "+" => new.push_str(rest),
            "\\" => {}
            // A context line whose leading space was lost.
            _ => {
                old.push_str(rest);
                new.push_str(rest);
            }
        }
    }
    let old = if creates && hunks == 1 {
        None
    } else {
        Some(old)
    };
    (old, new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hunks_become_before_and_after() {
        let diff = "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n@@ -9 +9 @@\n-x\n+y\n\\ No newline at end of file\n";
        let (old, new) = texts_of_unified(diff);
        assert_eq!(old.as_deref(), Some("a\nb\nc\n⋮\nx\n"));
        assert_eq!(new, "a\nB\nc\n⋮\ny\n");
        let (old, new) = texts_of_unified("--- /dev/null\n+++ b/n\n@@ -0,0 +1 @@\n+hi\n");
        assert_eq!(old, None);
        assert_eq!(new, "hi\n");
    }

    proptest! {
        #[test]
        fn any_input_is_taken_without_panicking(diff in "\\PC*(\n@@ \\PC*\n[ +-]\\PC*)*") {
            let _ = texts_of_unified(&diff);
        }
    }
}
