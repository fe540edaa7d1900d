//! A document file (plain text, Markdown, HTML) as passages: its text parsed into sections
//! (under their headings) of blocks (paragraphs, list items, code, table rows), each block
//! knowing where its text came from in the file, then cut by [`chunk`](super::chunk) into
//! passages that fit the encoder, each a [`Paragraph`] with its [`Source`].

use std::ops::Range;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::chunk::Chunker;
use super::kind::{bare_name, FileKind};
use super::Paragraph;

/// Where a passage came from: its file and the characters of it the passage holds (for plain
/// text and Markdown, characters of the file as read; for HTML, whose markup is not text,
/// characters of the page's text as extracted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    pub path: String,
    /// Character offsets (not bytes), end exclusive.
    pub start: usize,
    pub end: usize,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}-{}", self.path, self.start, self.end)
    }
}

/// A run of text (a paragraph, a list item, a code block, a table row) and where each piece of
/// it lies in the source.
#[derive(Debug, Clone, Default)]
pub struct Block {
    pub text: String,
    segments: Vec<Segment>,
}

#[derive(Debug, Clone)]
struct Segment {
    text: Range<usize>,
    source: Range<usize>,
}

impl Block {
    /// Appends `piece`, which stands for `source` (byte offsets) in the source.
    pub fn push(&mut self, piece: &str, source: Range<usize>) {
        let start = self.text.len();
        self.text.push_str(piece);
        self.segments.push(Segment {
            text: start..self.text.len(),
            source,
        });
    }

    /// A space between pieces that the source separates (a line break, a table cell), unless
    /// the text already ends in white space.
    pub fn push_space(&mut self) {
        if !self.text.is_empty() && !self.text.ends_with(char::is_whitespace) {
            self.text.push(' ');
        }
    }

    pub fn is_blank(&self) -> bool {
        self.text.trim().is_empty()
    }

    /// The source byte offset of text offset `at`: exact inside a piece copied verbatim, else
    /// the piece's start (for a start) or end (for an end), as entities and escapes differ in
    /// length from what they stand for.
    pub fn source_at(&self, at: usize, is_end: bool) -> usize {
        let found = if is_end {
            self.segments.iter().rev().find(|s| s.text.start < at)
        } else {
            self.segments.iter().find(|s| at < s.text.end)
        };
        let Some(segment) = found.or(self.segments.last()) else {
            return 0;
        };
        let inside = at.clamp(segment.text.start, segment.text.end) - segment.text.start;
        if segment.text.len() == segment.source.len() {
            segment.source.start + inside
        } else if is_end {
            segment.source.end
        } else {
            segment.source.start
        }
    }
}

/// Blocks under one heading (`None` before the first section heading).
#[derive(Debug, Clone, Default)]
pub struct Section {
    pub heading: Option<String>,
    pub blocks: Vec<Block>,
}

/// A parsed document: its own title if it names one, its sections, and the text that the
/// blocks' source offsets point into.
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    pub title: Option<String>,
    pub sections: Vec<Section>,
    pub source: String,
}

impl Parsed {
    /// Starts a new section under `heading`.
    pub fn open_section(&mut self, heading: String) {
        let heading = collapse_space(&heading);
        self.sections.push(Section {
            heading: (!heading.is_empty()).then_some(heading),
            blocks: Vec::new(),
        });
    }

    /// Adds `block` to the current section, if it holds any text.
    pub fn add_block(&mut self, block: Block) {
        if block.is_blank() {
            return;
        }
        if self.sections.is_empty() {
            self.sections.push(Section::default());
        }
        self.sections.last_mut().expect("pushed").blocks.push(block);
    }

    fn is_blank(&self) -> bool {
        self.sections.iter().all(|s| s.blocks.is_empty())
    }
}

/// Plain text: paragraphs are runs of lines between blank lines, copied as they are.
pub fn parse_text(text: &str) -> Parsed {
    let mut parsed = Parsed {
        source: text.to_string(),
        ..Parsed::default()
    };
    let mut block: Option<Range<usize>> = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let content = line.trim_end();
        if content.trim().is_empty() {
            if let Some(range) = block.take() {
                parsed.add_block(verbatim(text, range));
            }
            continue;
        }
        let end = start + content.len();
        block = Some(block.map_or(start..end, |b| b.start..end));
    }
    if let Some(range) = block {
        parsed.add_block(verbatim(text, range));
    }
    parsed
}

fn verbatim(text: &str, range: Range<usize>) -> Block {
    let mut block = Block::default();
    block.push(&text[range.clone()], range);
    block
}

/// Runs of white space as one space, ends trimmed.
pub fn collapse_space(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Why a document file cannot be read (named with its path by the caller).
pub fn check_text(bytes: &[u8]) -> Result<&str, String> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = std::str::from_utf8(bytes)
        .map_err(|e| format!("not UTF-8 (at byte {})", e.valid_up_to()))?;
    if text.contains('\0') {
        return Err("binary, not text (holds NUL bytes)".into());
    }
    if text.trim().is_empty() {
        return Err("empty".into());
    }
    Ok(text)
}

/// The passages of one document file, whose (decompressed) bytes are `bytes`: parsed by
/// `kind`, titled, cut to fit by `chunker`. `Err` is the reason the file is bad.
pub fn passages(
    path: &Path,
    kind: FileKind,
    bytes: &[u8],
    chunker: &Chunker,
) -> Result<Vec<Paragraph>, String> {
    let text = check_text(bytes)?;
    let parsed = match kind {
        FileKind::Markdown => super::markdown::parse(text),
        FileKind::Html => super::html::parse(text)?,
        FileKind::Text | FileKind::Json => parse_text(text),
    };
    if parsed.is_blank() {
        return Err("no text".into());
    }
    let title = parsed
        .title
        .clone()
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| bare_name(path));
    let path_text = path.display().to_string();
    // Byte offsets to characters, counted on from the last offset asked for (they come in
    // order), so a long file is not counted from its start for every passage.
    let mut cursor = (0, 0);
    let mut to_chars = |byte: usize| {
        let (from_byte, from_chars) = if byte >= cursor.0 { cursor } else { (0, 0) };
        let chars = from_chars + parsed.source[from_byte..byte].chars().count();
        cursor = (byte, chars);
        chars
    };
    let mut out = Vec::new();
    for section in &parsed.sections {
        let section_title = match &section.heading {
            Some(heading) if heading != &title => format!("{title} — {heading}"),
            _ => title.clone(),
        };
        let pieces = chunker.chunk(&section_title, &section.blocks);
        let parts = pieces.len();
        for (i, piece) in pieces.into_iter().enumerate() {
            let title = match parts {
                1 => section_title.clone(),
                _ => format!("{section_title} (part {} of {parts})", i + 1),
            };
            let (start, end) = (to_chars(piece.source.start), to_chars(piece.source.end));
            out.push(Paragraph {
                title,
                text: piece.text,
                links: Vec::new(),
                source: Some(Source {
                    path: path_text.clone(),
                    start,
                    end,
                }),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_paragraphs_are_runs_of_lines_with_exact_sources() {
        let text = "First line\nsecond line.\n\n\n  Another one.  \n";
        let parsed = parse_text(text);
        let blocks = &parsed.sections[0].blocks;
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0].text, "First line\nsecond line.");
        let second = &blocks[1];
        let (start, end) = (
            second.source_at(2, false),
            second.source_at(second.text.len(), true),
        );
        assert_eq!(&text[start..end], "Another one.");
    }

    #[test]
    fn bad_text_is_named() {
        assert!(check_text(b"caf\xE9").unwrap_err().contains("not UTF-8"));
        assert_eq!(check_text(b" \n ").unwrap_err(), "empty");
        assert!(check_text(b"a\0b").unwrap_err().contains("binary"));
        assert_eq!(check_text(b"\xEF\xBB\xBFhi").unwrap(), "hi");
    }
}
