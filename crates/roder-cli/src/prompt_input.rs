//! `roder exec -`: the prompt read from standard input instead of argv, so
//! a long or secret-bearing instruction never shows in `ps` and a task that
//! runs `pkill -f PATTERN` cannot match Roder by its prompt (evaluation
//! harnesses pipe the instruction in).

use tokio::io::AsyncReadExt as _;

/// The argument that means "read the prompt from standard input".
pub const FROM_STDIN: &str = "-";

/// A prompt larger than this is refused rather than read into memory
/// without bound (the model could not take it anyway).
const MAX_PROMPT_BYTES: u64 = 16 * 1024 * 1024;

/// The prompt `roder exec` runs: `argument` itself, or all of standard
/// input when it is `-`. Standard input must be UTF-8 and not empty.
pub async fn resolve(argument: &str) -> anyhow::Result<String> {
    if argument != FROM_STDIN {
        return Ok(argument.to_string());
    }
    read_prompt(tokio::io::stdin()).await
}

async fn read_prompt(input: impl tokio::io::AsyncRead + Unpin) -> anyhow::Result<String> {
    let mut bytes = Vec::new();
    input
        .take(MAX_PROMPT_BYTES + 1)
        .read_to_end(&mut bytes)
        .await
        .map_err(|error| anyhow::anyhow!("cannot read the prompt from standard input: {error}"))?;
    if bytes.len() as u64 > MAX_PROMPT_BYTES {
        anyhow::bail!(
            "the prompt on standard input is larger than {} MiB",
            MAX_PROMPT_BYTES / (1024 * 1024)
        );
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("the prompt on standard input is not UTF-8"))?;
    if text.trim().is_empty() {
        anyhow::bail!("`roder exec -` read no prompt from standard input (it was empty)");
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_everything_and_keeps_it_verbatim() {
        let text = read_prompt(&b"fix the bug\n\nin main.rs\n"[..])
            .await
            .unwrap();
        assert_eq!(text, "fix the bug\n\nin main.rs\n");
    }

    #[tokio::test]
    async fn empty_or_blank_input_is_an_error() {
        for input in [&b""[..], &b" \n\t\n"[..]] {
            let error = read_prompt(input).await.unwrap_err().to_string();
            assert!(error.contains("read no prompt"), "{error}");
        }
    }

    #[tokio::test]
    async fn input_that_is_not_utf8_is_an_error() {
        let error = read_prompt(&[0xff, 0xfe, b'a'][..])
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains("not UTF-8"), "{error}");
    }

    #[tokio::test]
    async fn input_past_the_bound_is_refused_without_reading_on() {
        let endless = tokio::io::repeat(b'a');
        let error = read_prompt(endless).await.unwrap_err().to_string();
        assert!(error.contains("larger than 16 MiB"), "{error}");
    }

    #[tokio::test]
    async fn an_argument_other_than_dash_is_the_prompt() {
        assert_eq!(resolve("--").await.unwrap(), "--");
        assert_eq!(resolve("hello").await.unwrap(), "hello");
    }
}
