//! HotpotQA ingestion: records in the original JSON format (one JSON array) or as JSONL, read
//! as a stream so that a corpus far larger than memory (the full 5.2M-paragraph Wikipedia dump)
//! goes through in bounded memory.

mod stream;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use stream::{for_each_record, ParagraphStream, StreamStats};

/// The default text that gets encoded for a paragraph.
pub const DEFAULT_TEMPLATE: &str = "{title}: {text}";

/// One corpus document: a Wikipedia paragraph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Paragraph {
    pub title: String,
    pub text: String,
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
}

/// A paragraph body given either as one string or as its list of sentences.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum ParagraphText {
    Joined(String),
    Sentences(Vec<String>),
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
                })
                .collect());
        }
        match (&self.title, &self.text) {
            (Some(title), Some(text)) => Ok(vec![Paragraph {
                title: title.clone(),
                text: match text {
                    ParagraphText::Joined(s) => s.clone(),
                    ParagraphText::Sentences(s) => s.concat(),
                },
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

/// A corpus input file with the sha256 the index manifest records for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorpusFile {
    pub path: PathBuf,
    pub sha256: String,
    pub bytes: u64,
}

impl CorpusFile {
    pub fn inspect(path: &Path) -> anyhow::Result<Self> {
        use anyhow::Context;
        let bytes = std::fs::metadata(path)
            .with_context(|| format!("corpus file {}", path.display()))?
            .len();
        Ok(Self {
            path: path.to_path_buf(),
            sha256: crate::files::sha256_file(path)?,
            bytes,
        })
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
