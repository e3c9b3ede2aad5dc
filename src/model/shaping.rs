//! Shaping tool results for the model: what of a `tools/call` result a model
//! should see (its `structuredContent` checked with `schema.rs`).
//!
//! A server may answer with anything: megabytes of text, images in formats no
//! model reads, audio, blobs, links, or blocks of a type invented last week.
//! The model's context is small and expensive, and a model API rejects a whole
//! request over one bad image, so [`shape_result`] keeps what a model can use
//! (text, and a bounded number of bounded images of the four common formats)
//! and turns everything else into a one-line note that says what was left out
//! and why. Long text keeps its head and tail, the parts that most often say
//! what the text is and how it ended, and the full text is saved to a file the
//! model is told about, so nothing is lost for a host that can read files.
//!
//! Shaping never fails: malformed blocks become notes, a spill file that
//! cannot be written becomes a warning, and a `structuredContent` that does not
//! match the tool's `outputSchema` is a warning too, since the server's answer
//! is still the best answer there is.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use serde_json::Value;

use super::tools::READ_RESOURCE;
use super::{clip, floor_char_boundary};
use crate::protocol::{decoded_size, ContentBlock, Tool, ToolResult};
use crate::schema::output_mismatch;

/// The image formats models accept, as MIME types.
const IMAGE_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

/// The most characters of the server's and the tool's name in a spill file's
/// name, which keeps the name well under file system limits.
const MAX_FILE_NAME_PART: usize = 64;

/// How much of a result reaches the model: the defaults, changed with the
/// `with_` methods.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResultLimits {
    /// The most bytes of text the model sees; longer text keeps its head and
    /// tail and is saved in full to a file (default 20,000).
    pub max_text_bytes: usize,
    /// The largest image, in decoded bytes, shown as an image (default 5 MiB).
    pub max_image_bytes: usize,
    /// The most images shown from one result (default 4).
    pub max_images: usize,
    /// Where full texts are saved; `None` means `tether-results` in the
    /// system's temporary folder.
    pub spill_dir: Option<PathBuf>,
    /// The largest audio clip, in decoded bytes, passed on as audio for a
    /// model that takes it; 0 (the default) makes every clip a note.
    pub max_audio_bytes: usize,
}

impl Default for ResultLimits {
    fn default() -> ResultLimits {
        ResultLimits {
            max_text_bytes: 20_000,
            max_image_bytes: 5 * 1024 * 1024,
            max_images: 4,
            spill_dir: None,
            max_audio_bytes: 0,
        }
    }
}

impl ResultLimits {
    /// The most bytes of text the model sees.
    pub fn with_max_text_bytes(mut self, bytes: usize) -> ResultLimits {
        self.max_text_bytes = bytes;
        self
    }

    /// The largest image, in decoded bytes, shown as an image.
    pub fn with_max_image_bytes(mut self, bytes: usize) -> ResultLimits {
        self.max_image_bytes = bytes;
        self
    }

    /// The most images shown from one result.
    pub fn with_max_images(mut self, images: usize) -> ResultLimits {
        self.max_images = images;
        self
    }

    /// Where full texts are saved.
    pub fn with_spill_dir(mut self, dir: PathBuf) -> ResultLimits {
        self.spill_dir = Some(dir);
        self
    }

    /// Audio clips up to `bytes` (decoded) reach the model as
    /// [`ModelBlock::Audio`], for a model that takes audio; 0 makes each a
    /// note, as by default.
    pub fn with_max_audio_bytes(mut self, bytes: usize) -> ResultLimits {
        self.max_audio_bytes = bytes;
        self
    }
}

/// One block of what the model sees.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
#[non_exhaustive]
pub enum ModelBlock {
    /// Text: the server's own, or a note about a block left out.
    Text {
        /// The text.
        text: String,
    },
    /// An image in one of the formats models accept.
    Image {
        /// Its MIME type, as the server sent it.
        #[serde(rename = "mimeType")]
        mime_type: String,
        /// Its bytes in base64, as the server sent them.
        data: String,
    },
    /// An audio clip, only when the limits allow audio
    /// ([`ResultLimits::with_max_audio_bytes`]).
    Audio {
        /// Its MIME type, as the server sent it.
        #[serde(rename = "mimeType")]
        mime_type: String,
        /// Its bytes in base64, as the server sent them.
        data: String,
    },
}

/// A tool result shaped for the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ModelResult {
    /// The blocks, in the server's order.
    pub blocks: Vec<ModelBlock>,
    /// True when the tool reported an error (a tool error, not a transport one).
    pub is_error: bool,
    /// The result's `structuredContent`, if any.
    pub structured_content: Option<Value>,
    /// What was odd about the result, for the host's log, not for the model.
    pub warnings: Vec<String>,
    /// The file the full text was saved to, when it was too long.
    pub saved_to: Option<PathBuf>,
}

/// A block on its way to the model. Content text is kept apart from notes
/// because only content text counts towards the text budget and is merged
/// when truncated; notes stay where the blocks they describe were.
enum Piece {
    Content(String),
    Note(String),
    Image { mime_type: String, data: String },
    Audio { mime_type: String, data: String },
}

/// Turns a tool result into what the model should see.
///
/// `server` is the server's configured name (for notes and the spill file's
/// name) and `tool` the tool that was called (for its `outputSchema`).
pub fn shape_result(
    server: &str,
    tool: &Tool,
    result: &ToolResult,
    limits: &ResultLimits,
) -> ModelResult {
    let is_error = result.is_error();
    // An explicit `null` is no structured content at all: the MCP schema
    // requires an object, and a `null` is what a careless serializer writes
    // for a missing one.
    let structured_content = result.structured_content().filter(|value| !value.is_null());
    let mut warnings = Vec::new();

    let mut pieces = Vec::new();
    let mut images = 0;
    // A block whose `annotations.audience` leaves the assistant out is the
    // person's, not the model's.
    let for_the_model = |block: &&Value| match block.pointer("/annotations/audience") {
        Some(Value::Array(audience)) => audience.iter().any(|who| who == "assistant"),
        _ => true,
    };
    for block in result.content().iter().filter(for_the_model) {
        pieces.push(shape_block(server, block, limits, &mut images));
    }
    if pieces.is_empty() && !result.content().is_empty() {
        pieces.push(Piece::Note(format!(
            "[every block of the result from {} is meant for the user, not shown]",
            clip(server)
        )));
    }
    if pieces.is_empty() {
        // The MCP specification asks servers to repeat structured content as
        // text for clients that do not read it; when a server did not, this
        // is that text.
        if let Some(structured) = structured_content {
            pieces.push(Piece::Content(structured.to_string()));
        }
    }

    let mut saved_to = None;
    let total: usize = pieces
        .iter()
        .map(|piece| match piece {
            Piece::Content(text) => text.len(),
            _ => 0,
        })
        .sum();
    if total > limits.max_text_bytes {
        pieces = truncate(server, &tool.name, pieces, limits, &mut saved_to, &mut warnings);
    }

    // The client checked it when it knew the tool's schema; a result made
    // elsewhere is checked here.
    let mismatch = result.schema_mismatch.clone().or_else(|| {
        tool.output_schema
            .as_ref()
            .and_then(|schema| output_mismatch(&tool.name, schema, &result.raw))
    });
    warnings.extend(mismatch);

    let blocks = pieces
        .into_iter()
        .map(|piece| match piece {
            Piece::Content(text) | Piece::Note(text) => ModelBlock::Text { text },
            Piece::Image { mime_type, data } => ModelBlock::Image { mime_type, data },
            Piece::Audio { mime_type, data } => ModelBlock::Audio { mime_type, data },
        })
        .collect();
    ModelResult {
        blocks,
        is_error,
        structured_content: structured_content.cloned(),
        warnings,
        saved_to,
    }
}

/// Shapes one content block; `images` counts the images kept so far.
fn shape_block(server: &str, block: &Value, limits: &ResultLimits, images: &mut usize) -> Piece {
    let server = clip(server);
    match ContentBlock::of(block) {
        ContentBlock::Text(Some(text)) => Piece::Content(text.to_owned()),
        ContentBlock::Text(None) => {
            Piece::Note(format!("[text block without text from {server}, not shown]"))
        }
        ContentBlock::Untyped => {
            Piece::Note(format!("[block without a type from {server}, not shown]"))
        }
        ContentBlock::Image { mime_type, data } => {
            let note = |why: &str| {
                Piece::Note(format!(
                    "[{} image from {server}, {} bytes, not shown: {why}]",
                    clip_or(mime_type, "unknown"),
                    decoded_size(data)
                ))
            };
            if !IMAGE_TYPES.iter().any(|known| known.eq_ignore_ascii_case(mime_type)) {
                note("not a PNG, JPEG, GIF or WebP image")
            } else if !is_base64(data) {
                // Passing bad base64 on would make the model's API refuse the
                // whole request, not just this image.
                note("its data is not valid base64")
            } else if decoded_size(data) > limits.max_image_bytes {
                note(&format!("larger than the limit of {} bytes", limits.max_image_bytes))
            } else if *images >= limits.max_images {
                note(&format!("only {} images are shown per result", limits.max_images))
            } else {
                *images += 1;
                Piece::Image { mime_type: mime_type.to_owned(), data: data.to_owned() }
            }
        }
        ContentBlock::Audio { mime_type, data } => {
            let size = decoded_size(data);
            let why = if limits.max_audio_bytes == 0 {
                None
            } else if !is_base64(data) {
                Some(": its data is not valid base64".to_owned())
            } else if size > limits.max_audio_bytes {
                Some(format!(": larger than the limit of {} bytes", limits.max_audio_bytes))
            } else {
                return Piece::Audio { mime_type: mime_type.to_owned(), data: data.to_owned() };
            };
            Piece::Note(format!(
                "[{} audio from {server}, {size} bytes, not shown{}]",
                clip_or(mime_type, "unknown"),
                why.unwrap_or_default()
            ))
        }
        ContentBlock::ResourceLink { uri, name, description } => {
            let name = name.map(clip).filter(|name| !name.is_empty());
            let description = description.map(clip).filter(|text| !text.is_empty());
            let about = match (name, description) {
                (Some(name), Some(description)) => format!(": {name} ({description})"),
                (Some(text), None) | (None, Some(text)) => format!(": {text}"),
                (None, None) => String::new(),
            };
            // What `read_mcp_resource` takes to read it, as JSON.
            let read = serde_json::json!({"server": server, "uri": uri});
            Piece::Note(format!("[resource link{about}; read it with {READ_RESOURCE} {read}]"))
        }
        ContentBlock::Resource { uri, mime_type, text, blob } => {
            let uri = clip_or(uri, "without a URI");
            match (text, blob) {
                (Some(text), _) => Piece::Content(text.to_owned()),
                (None, Some(blob)) => Piece::Note(format!(
                    "[resource {uri} from {server}, {}, {} bytes, not shown]",
                    clip_or(mime_type.unwrap_or(""), "binary"),
                    decoded_size(blob)
                )),
                (None, None) => Piece::Note(format!(
                    "[resource {uri} from {server} without text or data, not shown]"
                )),
            }
        }
        ContentBlock::Other(kind) => {
            Piece::Note(format!("[{} block from {server}, not shown]", clip(kind)))
        }
    }
}

/// True for non-empty standard base64 (padding optional, no whitespace):
/// what a model's API accepts as image data.
fn is_base64(data: &str) -> bool {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    use base64::{alphabet, Engine};
    const STANDARD: GeneralPurpose = GeneralPurpose::new(
        &alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    !data.is_empty() && STANDARD.decode(data).is_ok()
}

/// Like [`clip`], with a stand-in for an empty string.
fn clip_or(text: &str, empty: &str) -> String {
    if text.is_empty() {
        empty.to_owned()
    } else {
        clip(text)
    }
}

/// Merges the content text into one block at the place of the first, keeping
/// the head and tail of the budget, and saves the full text to a file.
fn truncate(
    server: &str,
    tool: &str,
    pieces: Vec<Piece>,
    limits: &ResultLimits,
    saved_to: &mut Option<PathBuf>,
    warnings: &mut Vec<String>,
) -> Vec<Piece> {
    let mut texts = Vec::new();
    let mut first = None;
    let mut kept = Vec::with_capacity(pieces.len());
    for piece in pieces {
        match piece {
            Piece::Content(text) => {
                first.get_or_insert(kept.len());
                texts.push(text);
            }
            other => kept.push(other),
        }
    }
    let full = texts.join("\n");

    let head_end = floor_char_boundary(&full, limits.max_text_bytes / 2);
    let tail_budget = limits.max_text_bytes - limits.max_text_bytes / 2;
    let tail_start =
        ceil_char_boundary(&full, full.len().saturating_sub(tail_budget)).max(head_end);
    let removed = full[head_end..tail_start].chars().count();
    let mut text =
        format!("{}\n…{removed} chars truncated…\n{}\n", &full[..head_end], &full[tail_start..]);

    let dir =
        limits.spill_dir.clone().unwrap_or_else(|| std::env::temp_dir().join("tether-results"));
    match save(&dir, server, tool, &full) {
        Ok(path) => {
            let _ = write!(text, "[full text saved to {}]", path.display());
            *saved_to = Some(path);
        }
        Err(error) => {
            // The model still gets the head and tail; it is told the rest is
            // gone rather than pointed at a file that does not exist.
            text.push_str("[the full text could not be saved]");
            warnings.push(format!("could not save the full text in {}: {error}", dir.display()));
        }
    }

    // There is at least one content piece, or the budget was not exceeded.
    kept.insert(first.unwrap_or(0), Piece::Content(text));
    kept
}

/// The smallest char boundary of `text` at or after `index`.
fn ceil_char_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index += 1;
    }
    index
}

/// Numbers spill files within this process; with the process id in the name
/// they are unique across processes too.
static SPILL_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `text` to a new file in `dir` and returns its path.
///
/// The file is created exclusively, so an existing file (or a link planted in
/// a shared temporary folder) is never written through, and on Unix it and the
/// folder are private to the user, since tool output may be anything.
fn save(dir: &Path, server: &str, tool: &str, text: &str) -> std::io::Result<PathBuf> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)?;

    let prefix = format!("{}-{}", file_name_part(server), file_name_part(tool));
    loop {
        let counter = SPILL_COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("{prefix}-{}-{counter}.txt", std::process::id()));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        match options.open(&path) {
            Ok(mut file) => {
                file.write_all(text.as_bytes())?;
                return Ok(path);
            }
            // A file left by an earlier process with the same id: try the
            // next number.
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(error),
        }
    }
}

/// A name made safe for a file name: `[A-Za-z0-9._-]` only, and short.
fn file_name_part(name: &str) -> String {
    let part: String = name
        .chars()
        .take(MAX_FILE_NAME_PART)
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' })
        .collect();
    if part.is_empty() {
        "_".to_owned()
    } else {
        part
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(output_schema: Option<Value>) -> Tool {
        Tool {
            name: "fetch".to_owned(),
            title: None,
            description: None,
            input_schema: json!({"type": "object"}),
            output_schema,
            annotations: None,
            execution: None,
            icons: Vec::new(),
            meta: None,
        }
    }

    fn shape(raw: Value) -> ModelResult {
        shape_with(raw, &ResultLimits::default())
    }

    fn shape_with(raw: Value, limits: &ResultLimits) -> ModelResult {
        shape_result("demo", &tool(None), &ToolResult::new(raw), limits)
    }

    fn text(text: &str) -> ModelBlock {
        ModelBlock::Text { text: text.to_owned() }
    }

    /// A spill folder of its own for each test, removed when dropped.
    struct SpillDir(PathBuf);

    impl SpillDir {
        fn new(test: &str) -> SpillDir {
            let dir =
                std::env::temp_dir().join(format!("tether-shaping-{test}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            SpillDir(dir)
        }

        fn limits(&self, max_text_bytes: usize) -> ResultLimits {
            ResultLimits { max_text_bytes, spill_dir: Some(self.0.clone()), ..Default::default() }
        }
    }

    impl Drop for SpillDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn text_blocks_are_text() {
        let result = shape(json!({"content": [
            {"type": "text", "text": "one"},
            {"type": "text", "text": "two"}
        ]}));
        assert_eq!(result.blocks, vec![text("one"), text("two")]);
        assert!(!result.is_error);
        assert_eq!(result.structured_content, None);
        assert!(result.warnings.is_empty());
        assert_eq!(result.saved_to, None);
    }

    #[test]
    fn supported_images_are_kept() {
        let result = shape(json!({"content": [
            {"type": "image", "mimeType": "image/png", "data": "iVBORw=="},
            {"type": "image", "mimeType": "image/webp", "data": "UklGRg"}
        ]}));
        assert_eq!(
            result.blocks,
            vec![
                ModelBlock::Image {
                    mime_type: "image/png".to_owned(),
                    data: "iVBORw==".to_owned()
                },
                ModelBlock::Image { mime_type: "image/webp".to_owned(), data: "UklGRg".to_owned() },
            ]
        );
        assert_eq!(
            serde_json::to_value(&result.blocks[0]).unwrap(),
            json!({"type": "image", "mimeType": "image/png", "data": "iVBORw=="})
        );
    }

    #[test]
    fn images_over_the_size_limit_are_a_note() {
        // Twelve characters with two of padding are seven bytes.
        let limits = ResultLimits { max_image_bytes: 6, ..Default::default() };
        let result = shape_with(
            json!({"content": [
                {"type": "image", "mimeType": "image/jpeg", "data": "AAAAAAAAAA=="},
                {"type": "image", "mimeType": "image/jpeg", "data": "AAAAAAAA"}
            ]}),
            &limits,
        );
        assert_eq!(
            result.blocks[0],
            text("[image/jpeg image from demo, 7 bytes, not shown: larger than the limit of 6 bytes]")
        );
        assert!(matches!(result.blocks[1], ModelBlock::Image { .. }));
    }

    #[test]
    fn images_over_the_count_limit_are_a_note() {
        let limits = ResultLimits { max_images: 2, ..Default::default() };
        let image = json!({"type": "image", "mimeType": "image/gif", "data": "AAAA"});
        let result = shape_with(json!({"content": [image, image, image]}), &limits);
        assert!(matches!(result.blocks[0], ModelBlock::Image { .. }));
        assert!(matches!(result.blocks[1], ModelBlock::Image { .. }));
        assert_eq!(
            result.blocks[2],
            text("[image/gif image from demo, 3 bytes, not shown: only 2 images are shown per result]")
        );
    }

    #[test]
    fn images_of_other_types_or_bad_data_are_a_note() {
        let result = shape(json!({"content": [
            {"type": "image", "mimeType": "image/svg+xml", "data": "PHN2Zz4="},
            // A skipped image does not use up the count.
            {"type": "image", "mimeType": "image/png", "data": "not base64!"},
            {"type": "image", "data": "AAAA"}
        ]}));
        assert_eq!(
            result.blocks,
            vec![
                text("[image/svg+xml image from demo, 5 bytes, not shown: not a PNG, JPEG, GIF or WebP image]"),
                text("[image/png image from demo, 8 bytes, not shown: its data is not valid base64]"),
                text("[unknown image from demo, 3 bytes, not shown: not a PNG, JPEG, GIF or WebP image]"),
            ]
        );
    }

    #[test]
    fn audio_is_a_note() {
        let result = shape(json!({"content": [
            {"type": "audio", "mimeType": "audio/wav", "data": "UklGRiQAAABXQVZF"},
            {"type": "audio"}
        ]}));
        assert_eq!(
            result.blocks,
            vec![
                text("[audio/wav audio from demo, 12 bytes, not shown]"),
                text("[unknown audio from demo, 0 bytes, not shown]"),
            ]
        );
    }

    #[test]
    fn resource_links_are_a_note() {
        let result = shape(json!({"content": [
            {"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt", "description": "notes"},
            {"type": "resource_link", "uri": "file:///b.txt", "name": "b.txt"},
            {"type": "resource_link", "uri": "file:///c.txt"}
        ]}));
        assert_eq!(
            result.blocks,
            vec![
                text(
                    r#"[resource link: a.txt (notes); read it with read_mcp_resource {"server":"demo","uri":"file:///a.txt"}]"#
                ),
                text(
                    r#"[resource link: b.txt; read it with read_mcp_resource {"server":"demo","uri":"file:///b.txt"}]"#
                ),
                text(
                    r#"[resource link; read it with read_mcp_resource {"server":"demo","uri":"file:///c.txt"}]"#
                ),
            ]
        );
    }

    #[test]
    fn audio_reaches_a_model_that_takes_it() {
        let limits = ResultLimits::default().with_max_audio_bytes(10);
        let result = shape_result(
            "demo",
            &tool(None),
            &ToolResult::new(json!({"content": [
                {"type": "audio", "mimeType": "audio/wav", "data": "UklGRg=="},
                {"type": "audio", "mimeType": "audio/wav", "data": "UklGRiQAAABXQVZF"},
                {"type": "audio", "mimeType": "audio/wav", "data": "not base64!"}
            ]})),
            &limits,
        );
        assert_eq!(
            result.blocks,
            vec![
                ModelBlock::Audio { mime_type: "audio/wav".into(), data: "UklGRg==".into() },
                text("[audio/wav audio from demo, 12 bytes, not shown: larger than the limit of 10 bytes]"),
                text("[audio/wav audio from demo, 8 bytes, not shown: its data is not valid base64]"),
            ]
        );
    }

    #[test]
    fn blocks_for_the_user_alone_do_not_reach_the_model() {
        let result = shape(json!({"content": [
            {"type": "text", "text": "for both", "annotations": {"audience": ["user", "assistant"]}},
            {"type": "text", "text": "for you", "annotations": {"audience": ["user"]}},
            {"type": "text", "text": "for the model", "annotations": {"audience": ["assistant"]}},
            {"type": "text", "text": "for anyone", "annotations": {"priority": 1}}
        ]}));
        assert_eq!(
            result.blocks,
            vec![text("for both"), text("for the model"), text("for anyone")]
        );
        let result = shape(json!({"content": [
            {"type": "text", "text": "for you", "annotations": {"audience": ["user"]}}
        ], "structuredContent": {"secret": 1}}));
        assert_eq!(
            result.blocks,
            vec![text("[every block of the result from demo is meant for the user, not shown]")]
        );
    }

    #[test]
    fn embedded_resources_give_their_text_or_a_note() {
        let result = shape(json!({"content": [
            {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "alpha"}},
            {"type": "resource", "resource":
                {"uri": "file:///b.pdf", "mimeType": "application/pdf", "blob": "JVBERi0="}},
            {"type": "resource", "resource": {"uri": "file:///c"}},
            {"type": "resource"}
        ]}));
        assert_eq!(
            result.blocks,
            vec![
                text("alpha"),
                text("[resource file:///b.pdf from demo, application/pdf, 5 bytes, not shown]"),
                text("[resource file:///c from demo without text or data, not shown]"),
                text("[resource without a URI from demo without text or data, not shown]"),
            ]
        );
    }

    #[test]
    fn unknown_and_malformed_blocks_are_a_note() {
        let result = shape(json!({"content": [
            {"type": "hologram", "data": "…"},
            {"type": "text"},
            {"text": "no type"},
            "not even an object",
            {"type": 7}
        ]}));
        assert_eq!(
            result.blocks,
            vec![
                text("[hologram block from demo, not shown]"),
                text("[text block without text from demo, not shown]"),
                text("[block without a type from demo, not shown]"),
                text("[block without a type from demo, not shown]"),
                text("[block without a type from demo, not shown]"),
            ]
        );
    }

    #[test]
    fn a_result_with_only_structured_content_shows_it_as_json() {
        let result = shape(json!({"structuredContent": {"temperature": 21.5, "unit": "C"}}));
        assert_eq!(result.blocks, vec![text(r#"{"temperature":21.5,"unit":"C"}"#)]);
        assert_eq!(result.structured_content, Some(json!({"temperature": 21.5, "unit": "C"})));

        // With content, the content is what the model sees.
        let result = shape(json!({
            "content": [{"type": "text", "text": "21.5 C"}],
            "structuredContent": {"temperature": 21.5}
        }));
        assert_eq!(result.blocks, vec![text("21.5 C")]);

        // Nothing at all is nothing.
        assert!(shape(json!({})).blocks.is_empty());
        assert_eq!(shape(json!({"structuredContent": null})).structured_content, None);
    }

    #[test]
    fn long_text_is_truncated_and_saved() {
        let spill = SpillDir::new("truncated");
        let first = "a".repeat(30);
        let second = "b".repeat(30);
        let result = shape_result(
            "my server",
            &Tool { name: "read/file".to_owned(), ..tool(None) },
            &ToolResult::new(json!({"content": [
                {"type": "image", "mimeType": "image/png", "data": "AAAA"},
                {"type": "text", "text": first},
                {"type": "audio", "mimeType": "audio/wav", "data": "AAAA"},
                {"type": "text", "text": second}
            ]})),
            &spill.limits(21),
        );
        let path = result.saved_to.clone().expect("the full text is saved");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("{first}\n{second}"));
        assert_eq!(path.parent(), Some(spill.0.as_path()));
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(
            name.starts_with(&format!("my_server-read_file-{}-", std::process::id())),
            "{name}"
        );
        assert!(name.ends_with(".txt"));

        // 61 characters, of which the first 10 and the last 11 are kept.
        assert_eq!(result.blocks.len(), 3);
        assert!(matches!(result.blocks[0], ModelBlock::Image { .. }));
        assert_eq!(
            result.blocks[1],
            text(&format!(
                "aaaaaaaaaa\n…40 chars truncated…\nbbbbbbbbbbb\n[full text saved to {}]",
                path.display()
            ))
        );
        assert_eq!(result.blocks[2], text("[audio/wav audio from my server, 3 bytes, not shown]"));
        assert!(result.warnings.is_empty());
    }

    #[test]
    fn text_within_the_limit_is_not_truncated() {
        let spill = SpillDir::new("within");
        let result = shape_with(
            json!({"content": [
                {"type": "text", "text": "0123456789"},
                {"type": "text", "text": "0123456789"}
            ]}),
            &spill.limits(20),
        );
        assert_eq!(result.blocks, vec![text("0123456789"), text("0123456789")]);
        assert_eq!(result.saved_to, None);
        assert!(!spill.0.exists());
    }

    #[test]
    fn truncation_cuts_on_char_boundaries() {
        let spill = SpillDir::new("multibyte");
        // Each "é" is two bytes, so a budget of 7 keeps 3 bytes at the head
        // (one "é" and an "x") and 4 at the tail (two "é").
        let full = format!("x{}", "é".repeat(20));
        let result =
            shape_with(json!({"content": [{"type": "text", "text": full}]}), &spill.limits(7));
        let path = result.saved_to.clone().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), full);
        assert_eq!(
            result.blocks,
            vec![text(&format!(
                "xé\n…17 chars truncated…\néé\n[full text saved to {}]",
                path.display()
            ))]
        );

        // A head of one byte cannot hold a two-byte character at all.
        let result =
            shape_with(json!({"content": [{"type": "text", "text": "ééééé"}]}), &spill.limits(3));
        let ModelBlock::Text { text } = &result.blocks[0] else { panic!("not text") };
        assert!(text.starts_with("\n…4 chars truncated…\né\n"), "{text}");
    }

    #[test]
    fn truncation_without_a_spill_file_warns() {
        let spill = SpillDir::new("unwritable");
        // A file where the folder should be makes the folder impossible.
        std::fs::create_dir_all(spill.0.parent().unwrap()).unwrap();
        std::fs::write(&spill.0, "in the way").unwrap();
        let result = shape_with(
            json!({"content": [{"type": "text", "text": "abcdefghij"}]}),
            &spill.limits(4),
        );
        let _ = std::fs::remove_file(&spill.0);
        assert_eq!(
            result.blocks,
            vec![text("ab\n…6 chars truncated…\nij\n[the full text could not be saved]")]
        );
        assert_eq!(result.saved_to, None);
        assert_eq!(result.warnings.len(), 1);
        assert!(result.warnings[0].starts_with("could not save the full text in"));
    }

    #[test]
    fn structured_only_results_are_truncated_too() {
        let spill = SpillDir::new("structured");
        let result =
            shape_with(json!({"structuredContent": {"k": "0123456789"}}), &spill.limits(6));
        let path = result.saved_to.clone().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), r#"{"k":"0123456789"}"#);
        assert_eq!(
            result.blocks,
            vec![text(&format!(
                "{{\"k\n…12 chars truncated…\n9\"}}\n[full text saved to {}]",
                path.display()
            ))]
        );
        assert_eq!(result.structured_content, Some(json!({"k": "0123456789"})));
    }

    #[test]
    fn is_error_is_copied() {
        let result =
            shape(json!({"content": [{"type": "text", "text": "no such file"}], "isError": true}));
        assert!(result.is_error);
        assert_eq!(result.blocks, vec![text("no such file")]);
        assert!(!shape(json!({"content": [], "isError": false})).is_error);
    }

    #[test]
    fn structured_content_is_checked_against_the_output_schema() {
        let schema =
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        let call = |raw: Value| {
            shape_result(
                "demo",
                &tool(Some(schema.clone())),
                &ToolResult::new(raw),
                &Default::default(),
            )
        };

        assert!(call(json!({"structuredContent": {"n": 3}})).warnings.is_empty());
        assert_eq!(
            call(json!({"structuredContent": {"n": "3"}})).warnings,
            vec!["structuredContent does not match the outputSchema of fetch: $.n: expected an integer"]
        );
        assert_eq!(
            call(json!({"content": [{"type": "text", "text": "3"}]})).warnings,
            vec!["fetch has an outputSchema but its result has no structuredContent"]
        );
        // A tool error need not carry structured content.
        assert!(call(json!({"content": [], "isError": true})).warnings.is_empty());
        // Without an output schema, nothing is checked.
        assert!(shape(json!({"structuredContent": {"n": "3"}})).warnings.is_empty());
    }
}
