//! HotpotQA ingestion: records in the original JSON format (one JSON array) or as JSONL, read
//! as a stream so that a corpus far larger than memory (the full 5.2M-paragraph Wikipedia dump)
//! goes through in bounded memory; files plain or compressed, alone or in folders ([`input`]).
//! Folders may also hold documents (plain text, Markdown, HTML: [`document`]), cut into
//! passages that fit the encoder ([`chunk`]), each remembering its [`Source`].

pub mod chunk;
pub mod document;
mod html;
pub mod input;
pub mod kind;
pub mod links;
mod markdown;
mod records;
mod stream;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use chunk::Chunker;
pub use document::Source;
pub use input::CorpusInput;
pub use kind::FileKind;
pub use records::for_each_record;
pub use stream::{ParagraphStream, StreamStats};

/// The default text that gets encoded for a paragraph.
pub const DEFAULT_TEMPLATE: &str = "{title}: {text}";

/// One corpus document: a Wikipedia paragraph.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Paragraph {
    pub title: String,
    pub text: String,
    /// The titles this paragraph links to, when its record carried hyperlinks (the Wikipedia
    /// dump's `text_with_links`; see [`links`]); stored only when there are some.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<String>,
    /// The file and span a passage of a document came from (absent for records, and in
    /// indexes from before documents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
}

impl Paragraph {
    /// The paragraph with HTML entities decoded (`Vernon Crawford &quot;Jack&quot; Cooke` ->
    /// `Vernon Crawford "Jack" Cooke`), as people and the generator read it. HotpotQA keeps the
    /// entities its Wikipedia dump had; indexes store the text as given, and everything read
    /// from them or from question files goes through here, so titles still match.
    pub fn decoded(self) -> Self {
        Self {
            title: decode_entities(self.title),
            text: decode_entities(self.text),
            links: self.links,
            source: self.source,
        }
    }

    /// The text handed to the encoder: `template` with `{title}` and `{text}` filled in.
    pub fn render(&self, template: &str) -> String {
        template
            .replace("{title}", &self.title)
            .replace("{text}", &self.text)
    }
}

/// `text` with HTML entities decoded; untouched (no copy) when it has none.
pub fn decode_entities(text: String) -> String {
    match html_escape::decode_html_entities(&text) {
        std::borrow::Cow::Borrowed(_) => text,
        std::borrow::Cow::Owned(decoded) => decoded,
    }
}

/// `title` without a trailing parenthesised part: "Kiss (band)" -> "Kiss",
/// the subject the paragraph is about.
pub fn without_disambiguation(title: &str) -> &str {
    let title = title.trim();
    match title.strip_suffix(')').and_then(|t| t.rfind(" (")) {
        Some(open) => title[..open].trim_end(),
        None => title,
    }
}

/// Checks a `--template` before hours of encoding depend on it.
pub fn validate_template(template: &str) -> anyhow::Result<()> {
    if !template.contains("{text}") {
        anyhow::bail!("--template must contain {{text}} (got {template:?})");
    }
    Ok(())
}

/// A HotpotQA record. Questions carry every field; corpus-only files may carry just `context`,
/// or be plain paragraphs with `title` and `text`.
#[derive(Debug, Clone, Deserialize, Serialize, Default)]
pub struct Record {
    #[serde(rename = "_id", default)]
    pub id: Option<String>,
    #[serde(default)]
    pub question: Option<String>,
    #[serde(default)]
    pub answer: Option<String>,
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub level: Option<String>,
    #[serde(default)]
    pub supporting_facts: Vec<(String, i64)>,
    #[serde(default)]
    pub context: Option<Vec<(String, Vec<String>)>>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub text: Option<ParagraphText>,
    /// The Wikipedia dump's sentences with their hyperlinks as `<a href>` tags (its
    /// `charoffset*` fields, token offsets, are not needed and not read).
    #[serde(default)]
    pub text_with_links: Option<ParagraphText>,
}

/// A paragraph body given either as one string or as its list of sentences.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum ParagraphText {
    Joined(String),
    Sentences(Vec<String>),
}

impl ParagraphText {
    /// The sentences, or the one string.
    fn parts(&self) -> Vec<&str> {
        match self {
            ParagraphText::Joined(s) => vec![s.as_str()],
            ParagraphText::Sentences(s) => s.iter().map(String::as_str).collect(),
        }
    }
}

impl Record {
    /// The paragraphs this record contributes to the corpus. HotpotQA sentences already carry
    /// their leading spaces, so they are concatenated as they are.
    /// A paragraph without a title is malformed: the corpus is deduplicated by title, so a
    /// second untitled paragraph would be dropped as a copy of the first.
    pub fn paragraphs(&self) -> Result<Vec<Paragraph>, String> {
        let paragraphs = self.all_paragraphs()?;
        match paragraphs.iter().position(|p| p.title.trim().is_empty()) {
            Some(i) if paragraphs.len() > 1 => {
                Err(format!("paragraph {} has an empty title", i + 1))
            }
            Some(_) => Err("has an empty title".into()),
            None => Ok(paragraphs),
        }
    }

    fn all_paragraphs(&self) -> Result<Vec<Paragraph>, String> {
        if let Some(context) = &self.context {
            return Ok(context
                .iter()
                .map(|(title, sentences)| Paragraph {
                    title: title.clone(),
                    text: sentences.concat(),
                    links: Vec::new(),
                    source: None,
                })
                .collect());
        }
        match (&self.title, &self.text) {
            (Some(title), Some(text)) => Ok(vec![Paragraph {
                title: title.clone(),
                text: text.parts().concat(),
                links: self
                    .text_with_links
                    .as_ref()
                    .map_or_else(Vec::new, |t| links::targets(t.parts())),
                source: None,
            }]),
            _ => Err("has neither `context` nor `title` and `text`".into()),
        }
    }

    /// The distinct titles of the supporting facts, in order of first mention.
    pub fn supporting_titles(&self) -> Vec<String> {
        let mut titles: Vec<String> = Vec::new();
        for (title, _) in &self.supporting_facts {
            if !titles.contains(title) {
                titles.push(title.clone());
            }
        }
        titles
    }
}

/// A HotpotQA question with what evaluation needs of it.
#[derive(Debug, Clone, Serialize)]
pub struct Question {
    pub id: String,
    pub question: String,
    pub answer: String,
    pub kind: Option<String>,
    pub supporting_titles: Vec<String>,
    /// The paragraphs of the supporting titles, for oracle-context runs.
    pub gold_paragraphs: Vec<Paragraph>,
}

/// The first `limit` questions of a HotpotQA file, in file order.
pub fn read_questions(path: &Path, limit: usize) -> anyhow::Result<Vec<Question>> {
    use anyhow::Context;
    let mut questions = Vec::new();
    for_each_record(path, |number, record| {
        if questions.len() >= limit {
            return Ok(());
        }
        let record = record.map_err(|e| anyhow::anyhow!("record {number}: {e}"))?;
        let (Some(question), Some(answer)) = (record.question.clone(), record.answer.clone())
        else {
            anyhow::bail!("record {number} has no question or answer");
        };
        let supporting_titles: Vec<String> = record
            .supporting_titles()
            .into_iter()
            .map(decode_entities)
            .collect();
        let gold_paragraphs = record
            .paragraphs()
            .unwrap_or_default()
            .into_iter()
            .map(Paragraph::decoded)
            .filter(|p| supporting_titles.contains(&p.title))
            .collect();
        questions.push(Question {
            id: record
                .id
                .clone()
                .unwrap_or_else(|| format!("record-{number}")),
            question,
            answer,
            kind: record.kind.clone(),
            supporting_titles,
            gold_paragraphs,
        });
        Ok(())
    })
    .with_context(|| format!("reading questions from {}", path.display()))?;
    Ok(questions)
}

/// A corpus input (a file, or a folder of files) as the manifest records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorpusFile {
    pub path: PathBuf,
    /// sha256 of the raw bytes, computed while they were read for the build (see
    /// [`CorpusInput::read`]).
    pub sha256: String,
    pub bytes: u64,
    /// [`CorpusInput::fingerprint`], by which a later build finds the input unchanged without
    /// reading it (empty in an index from before it, which is checked by its sha256 instead).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fingerprint: String,
}

impl CorpusFile {
    pub fn new(input: &CorpusInput, sha256: String) -> Self {
        Self {
            path: input.path.clone(),
            sha256,
            bytes: input.bytes,
            fingerprint: input.fingerprint.clone(),
        }
    }

    /// Whether `input` is still what this records: by fingerprint, else (a record without
    /// one, or a file whose time changed: a copy, or data provisioned again) by reading the
    /// input for its sha256.
    pub fn describes(&self, input: &CorpusInput) -> bool {
        if self.path != input.path || self.bytes != input.bytes {
            return false;
        }
        if !self.fingerprint.is_empty() && self.fingerprint == input.fingerprint {
            return true;
        }
        input::sha256(input).is_ok_and(|sha| sha == self.sha256)
    }

    /// The same input read on another machine: path, size and checksum (not the fingerprint,
    /// whose times differ between copies).
    pub fn same_content(&self, other: &Self) -> bool {
        (&self.path, &self.sha256, self.bytes) == (&other.path, &other.sha256, other.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disambiguation_is_dropped() {
        assert_eq!(without_disambiguation("Kiss (band)"), "Kiss");
        assert_eq!(without_disambiguation("Kiss"), "Kiss");
        assert_eq!(without_disambiguation("(band)"), "(band)");
        assert_eq!(without_disambiguation("A (b) c"), "A (b) c");
    }

    #[test]
    fn paragraphs_concatenate_sentences_and_render_template() {
        let record: Record = serde_json::from_str(
            r#"{"_id":"a","question":"q?","answer":"x","supporting_facts":[["T1",0],["T1",1],["T2",0]],
                "context":[["T1",["One.", " Two."]],["T2",["Three."]]]}"#,
        )
        .unwrap();
        let paragraphs = record.paragraphs().unwrap();
        assert_eq!(paragraphs[0].text, "One. Two.");
        assert_eq!(paragraphs[1].render("{title}. {text}"), "T2. Three.");
        assert_eq!(record.supporting_titles(), vec!["T1", "T2"]);
    }

    #[test]
    fn dump_records_keep_their_links() {
        let record: Record = serde_json::from_str(
            r#"{"id":"12","url":"https://en.wikipedia.org/wiki?curid=12","title":"Anarchism",
                "text":["Anarchism is a philosophy.", " It rejects hierarchy."],
                "charoffset":[[[0,9]],[[0,3]]],
                "text_with_links":["Anarchism is a <a href=\"political%20philosophy\">philosophy</a>.", " It rejects <a href=\"Hierarchy\">hierarchy</a>."],
                "charoffset_with_links":[[[0,9]],[[0,3]]]}"#,
        )
        .unwrap();
        let paragraph = record.paragraphs().unwrap().remove(0);
        assert_eq!(
            paragraph.text,
            "Anarchism is a philosophy. It rejects hierarchy."
        );
        assert_eq!(paragraph.links, ["Political philosophy", "Hierarchy"]);
        // Stored only when there are links.
        let json = serde_json::to_string(&paragraph).unwrap();
        assert!(
            json.contains("\"links\":[\"Political philosophy\""),
            "{json}"
        );
        let plain = Paragraph {
            links: Vec::new(),
            ..paragraph
        };
        assert!(!serde_json::to_string(&plain).unwrap().contains("links"));
    }

    #[test]
    fn plain_paragraph_records_are_accepted() {
        let record: Record = serde_json::from_str(r#"{"title":"T","text":["A.", " B."]}"#).unwrap();
        assert_eq!(record.paragraphs().unwrap()[0].text, "A. B.");
        let bad: Record = serde_json::from_str(r#"{"question":"q"}"#).unwrap();
        assert!(bad.paragraphs().is_err());
    }

    #[test]
    fn an_empty_title_is_named() {
        let untitled: Record = serde_json::from_str(r#"{"title":" ","text":"A."}"#).unwrap();
        assert_eq!(untitled.paragraphs().unwrap_err(), "has an empty title");
        let context: Record =
            serde_json::from_str(r#"{"context":[["T",["a."]],["",["b."]]]}"#).unwrap();
        assert_eq!(
            context.paragraphs().unwrap_err(),
            "paragraph 2 has an empty title"
        );
    }

    #[test]
    fn entities_are_decoded_for_people_and_matching() {
        let p = Paragraph {
            title: "Vernon Crawford &quot;Jack&quot; Cooke".into(),
            text: "Tom &amp; Jerry".into(),
            links: Vec::new(),
            source: None,
        }
        .decoded();
        assert_eq!(p.title, "Vernon Crawford \"Jack\" Cooke");
        assert_eq!(p.text, "Tom & Jerry");
        assert_eq!(decode_entities("plain".into()), "plain");
    }

    #[test]
    fn template_must_contain_text() {
        assert!(validate_template("{title}").is_err());
        assert!(validate_template(DEFAULT_TEMPLATE).is_ok());
    }
}
