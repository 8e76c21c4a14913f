//! A prompt's content blocks as a turn's input: one message text plus
//! images. Text is kept as written; an embedded resource (an @-mentioned
//! file) is appended as a fenced block under its URI, a resource link as a
//! line naming it, so the model can read it with its tools.

use agent_client_protocol_schema::v1 as acp;

/// What a turn receives.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct TurnInput {
    pub message: String,
    /// Data URLs (or the image's own URL).
    pub images: Vec<String>,
}

/// Turns `blocks` into a turn's input, or says which block cannot be taken.
pub(crate) fn turn_input(blocks: &[acp::ContentBlock]) -> Result<TurnInput, String> {
    let mut parts: Vec<String> = Vec::new();
    let mut images = Vec::new();
    for block in blocks {
        match block {
            acp::ContentBlock::Text(text) => parts.push(text.text.clone()),
            acp::ContentBlock::Image(image) => images.push(image_url(image)),
            acp::ContentBlock::ResourceLink(link) => {
                let mut line = format!("[@{}]({})", link.name, link.uri);
                if let Some(description) = &link.description {
                    line.push_str(&format!(" — {description}"));
                }
                parts.push(line);
            }
            acp::ContentBlock::Resource(resource) => match &resource.resource {
                acp::EmbeddedResourceResource::TextResourceContents(contents) => {
                    parts.push(fenced(&contents.uri, &contents.text));
                }
                acp::EmbeddedResourceResource::BlobResourceContents(blob) => {
                    match blob.mime_type.as_deref() {
                        Some(mime) if mime.starts_with("image/") => {
                            images.push(format!("data:{mime};base64,{}", blob.blob));
                        }
                        mime => {
                            return Err(format!(
                                "binary resource {} ({}) is not supported: send text or an image",
                                blob.uri,
                                mime.unwrap_or("no mime type")
                            ));
                        }
                    }
                }
                _ => return Err("this kind of embedded resource is not supported".into()),
            },
            acp::ContentBlock::Audio(_) => {
                return Err(
                    "audio prompts are not supported (promptCapabilities.audio is false)".into(),
                );
            }
            _ => return Err("this kind of content block is not supported".into()),
        }
    }
    if parts.is_empty() && images.is_empty() {
        return Err("the prompt is empty".into());
    }
    Ok(TurnInput {
        message: parts.join("\n\n"),
        images,
    })
}

fn image_url(image: &acp::ImageContent) -> String {
    match &image.uri {
        Some(uri) if image.data.is_empty() => uri.clone(),
        _ => format!("data:{};base64,{}", image.mime_type, image.data),
    }
}

/// `text` in a fence longer than any backtick run inside it.
fn fenced(uri: &str, text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{uri}\n{fence}\n{text}\n{fence}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn blocks(value: serde_json::Value) -> Vec<acp::ContentBlock> {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn text_links_resources_and_images_make_one_input() {
        let input = turn_input(&blocks(serde_json::json!([
            {"type": "text", "text": "fix"},
            {"type": "resource_link", "uri": "file:///w/a.rs", "name": "a.rs"},
            {"type": "resource", "resource": {"uri": "file:///w/b.rs", "text": "x ``` y"}},
            {"type": "image", "mimeType": "image/png", "data": "AAAA"}
        ])))
        .unwrap();
        assert_eq!(
            input.message,
            "fix\n\n[@a.rs](file:///w/a.rs)\n\nfile:///w/b.rs\n````\nx ``` y\n````"
        );
        assert_eq!(input.images, vec!["data:image/png;base64,AAAA".to_string()]);
    }

    #[test]
    fn audio_binary_resources_and_empty_prompts_are_refused() {
        let audio =
            blocks(serde_json::json!([{"type": "audio", "mimeType": "audio/wav", "data": "AA"}]));
        assert!(turn_input(&audio).unwrap_err().contains("audio"));
        let blob = blocks(
            serde_json::json!([{"type": "resource", "resource": {"uri": "file:///x.bin", "blob": "AA", "mimeType": "application/zip"}}]),
        );
        assert!(turn_input(&blob).unwrap_err().contains("not supported"));
        assert!(turn_input(&[]).is_err());
    }

    proptest! {
        #[test]
        fn any_text_survives_in_a_fence(text in ".*") {
            let fenced = fenced("u", &text);
            prop_assert!(fenced.contains(&text));
        }
    }
}
