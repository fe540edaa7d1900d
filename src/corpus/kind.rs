//! What a corpus file is, by its name: HotpotQA / `{"title", "text"}` records, or a document
//! (plain text, Markdown, HTML) that is cut into passages. `.gz` and `.bz2` are looked through
//! (`notes.md.gz` is Markdown).

use std::path::Path;

use serde::Serialize;

/// The kinds of file a corpus folder is read for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    Text,
    Markdown,
    Html,
    /// JSON or JSON lines of records (`.json`, `.jsonl`, and files without an extension such
    /// as the Wikipedia dump's `wiki_00.bz2`).
    Json,
}

impl FileKind {
    /// The kind of a file inside a corpus folder, or `None` for a file the folder holds that is
    /// not read (an image, a PDF): a notes folder holds all sorts.
    pub fn of(path: &Path) -> Option<Self> {
        let name = path.file_name()?.to_str()?.to_ascii_lowercase();
        let name = name
            .strip_suffix(".gz")
            .or_else(|| name.strip_suffix(".bz2"))
            .unwrap_or(&name);
        let Some((stem, extension)) = name.rsplit_once('.') else {
            // The dump's files have no extension of their own.
            return Some(Self::Json);
        };
        if stem.is_empty() {
            return None;
        }
        match extension {
            "txt" | "text" => Some(Self::Text),
            "md" | "markdown" => Some(Self::Markdown),
            "html" | "htm" => Some(Self::Html),
            "json" | "jsonl" => Some(Self::Json),
            _ => None,
        }
    }

    /// The kind of a file named on the command line: any name is read, records unless the
    /// name says it is a document (as `--corpus` read every file before documents existed).
    pub fn of_named(path: &Path) -> Self {
        Self::of(path).unwrap_or(Self::Json)
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Markdown => "markdown",
            Self::Html => "html",
            Self::Json => "json",
        }
    }

    pub fn is_document(self) -> bool {
        self != Self::Json
    }
}

/// A file's name without `.gz`/`.bz2` and its own extension: `Scott Derrickson.txt.gz` ->
/// `Scott Derrickson`, the title of a document that names no title of its own.
pub fn bare_name(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let lower = name.to_ascii_lowercase();
    let mut cut = name.len();
    for suffix in [".gz", ".bz2"] {
        if lower.ends_with(suffix) {
            cut -= suffix.len();
            break;
        }
    }
    let name = &name[..cut];
    match name.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() => stem.to_string(),
        _ => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_name_through_compression() {
        let kind = |name: &str| FileKind::of(Path::new(name));
        assert_eq!(kind("a/notes.TXT"), Some(FileKind::Text));
        assert_eq!(kind("README.md.gz"), Some(FileKind::Markdown));
        assert_eq!(kind("page.htm.bz2"), Some(FileKind::Html));
        assert_eq!(kind("x.jsonl"), Some(FileKind::Json));
        assert_eq!(kind("AA/wiki_00.bz2"), Some(FileKind::Json));
        assert_eq!(kind("photo.png"), None);
        assert_eq!(FileKind::of_named(Path::new("corpus.dat")), FileKind::Json);
        assert_eq!(
            bare_name(Path::new("d/Scott Derrickson.txt.gz")),
            "Scott Derrickson"
        );
        assert_eq!(bare_name(Path::new("notes")), "notes");
    }
}
