//! Prompts for answering from retrieved paragraphs: the ESE paper's (its Table 4) sent as one
//! user turn, or the same task split FlashRAG's way (instruction and documents in the system
//! turn, question in the user turn), which small chat models follow far better. Context that
//! would overflow the model is trimmed from the lowest-ranked paragraph up.

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::Digest;

use crate::corpus::Paragraph;

/// The ESE paper's RAG prompt (Table 4), verbatim.
pub const PAPER_TEMPLATE: &str = "As an advanced QA system, your role is to provide accurate and straightforward answers based on the provided context. Utilize the following information to answer the given question, directly output the straightforward answer, and do not explain it:

Context: {context}.

Question: {question}.

Requirement: For 'yes/no' question, directly output 'yes' or 'no'. For the 'who' question, directly output the people's names. For the 'when' question, directly output the date or time, so on and so forth.

Output:";

/// What the chat layout calls each document ("Doc 1(Title: ...) ..."); answers that name one
/// by it are read back with [`PromptSpec::labelled_subject`].
const DOC_LABEL: &str = "Doc";

/// FlashRAG's system instruction; the documents follow it.
pub const CHAT_INSTRUCTION: &str = "Answer the question based on the given document. Only give me the answer and do not output any other words.\nThe following are given documents.\n\n";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum PromptStyle {
    /// The paper's Table 4 text as one user turn.
    Paper,
    /// Instruction and documents in the system turn, the question in the user turn.
    #[default]
    Chat,
}

impl std::fmt::Display for PromptStyle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PromptStyle::Paper => "paper",
            PromptStyle::Chat => "chat",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

/// A conversation to send to the generator; it applies the model's chat template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Prompt {
    pub messages: Vec<Message>,
}

/// How the prompt is laid out: a style and its text: for `paper` the text with `{context}` and
/// `{question}`, for `chat` the system instruction the documents follow (the defaults, or
/// `--prompt-file`'s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptSpec {
    pub style: PromptStyle,
    pub template: String,
}

impl PromptSpec {
    /// `--prompt-style` and `--prompt-file` together: a file replaces the paper's text (the
    /// layout a file implies), or with `chat` the instruction.
    pub fn from_flags(style: Option<PromptStyle>, file: Option<&Path>) -> Result<Self> {
        let style = style.unwrap_or(if file.is_some() {
            PromptStyle::Paper
        } else {
            PromptStyle::Chat
        });
        let Some(file) = file else {
            return Ok(Self {
                style,
                template: Self::default_text(style).to_string(),
            });
        };
        let template = std::fs::read_to_string(file)
            .with_context(|| format!("reading prompt file {}", file.display()))?;
        for placeholder in ["{context}", "{question}"] {
            match style {
                PromptStyle::Paper if !template.contains(placeholder) => {
                    bail!("prompt file {} has no {placeholder}", file.display())
                }
                PromptStyle::Chat if template.contains(placeholder) => bail!(
                    "prompt file {} has {placeholder}, but a chat instruction takes none (the documents follow it, the question is the user's turn); use --prompt-style paper for a template",
                    file.display()
                ),
                _ => {}
            }
        }
        Ok(Self { style, template })
    }

    fn default_text(style: PromptStyle) -> &'static str {
        match style {
            PromptStyle::Paper => PAPER_TEMPLATE,
            PromptStyle::Chat => CHAT_INSTRUCTION,
        }
    }

    /// The style, and for a text other than its default the first 12 hex digits of its sha256
    /// (`chat+1f2e...`): what a run records, so that runs with other texts are not mixed.
    pub fn label(&self) -> String {
        if self.template == Self::default_text(self.style) {
            return self.style.to_string();
        }
        let digest = sha2::Sha256::digest(self.template.as_bytes());
        format!("{}+{}", self.style, &hex::encode(digest)[..12])
    }

    /// The passages as the prompt lays them out.
    pub fn context(&self, passages: &[Paragraph]) -> String {
        match self.style {
            PromptStyle::Paper => passages
                .iter()
                .map(|p| format!("{}: {}", p.title, p.text))
                .collect::<Vec<_>>()
                .join("\n"),
            PromptStyle::Chat => passages
                .iter()
                .enumerate()
                .map(|(i, p)| format!("{DOC_LABEL} {}(Title: {}) {}\n", i + 1, p.title, p.text))
                .collect(),
        }
    }

    /// The subject of the document an answer names by its label instead of answering ("Doc 2"
    /// for the second document's title, disambiguation dropped): small models do that when the
    /// answer is a document's subject. None for any other answer, and in the paper's layout,
    /// which has no labels.
    pub fn labelled_subject(&self, answer: &str, passages: &[Paragraph]) -> Option<String> {
        if self.style != PromptStyle::Chat {
            return None;
        }
        let rest = answer.trim().strip_prefix(DOC_LABEL)?;
        let number = rest.trim().trim_end_matches(['.', ':']);
        let n: usize = number.parse().ok()?;
        let passage = passages.get(n.checked_sub(1)?)?;
        Some(crate::corpus::without_disambiguation(&passage.title).to_string())
    }

    pub fn render(&self, question: &str, passages: &[Paragraph]) -> Prompt {
        let context = self.context(passages);
        match self.style {
            PromptStyle::Paper => {
                // One pass over the template, so a `{question}` inside a paragraph stays text.
                let content = fill(&self.template, &context, question);
                Prompt {
                    messages: vec![Message {
                        role: Role::User,
                        content,
                    }],
                }
            }
            PromptStyle::Chat => Prompt {
                messages: vec![
                    Message {
                        role: Role::System,
                        content: format!("{}{context}", self.template),
                    },
                    Message {
                        role: Role::User,
                        content: format!("Question: {question}"),
                    },
                ],
            },
        }
    }

    /// The prompt with as many of the best-ranked `passages` as `fits` accepts (it is asked
    /// about ever fewer, dropping from the end), and how many were dropped. Fails when even the
    /// bare question does not fit.
    pub fn build_within(
        &self,
        question: &str,
        passages: &[Paragraph],
        mut fits: impl FnMut(&Prompt) -> Result<bool>,
    ) -> Result<(Prompt, usize)> {
        for kept in (0..=passages.len()).rev() {
            let prompt = self.render(question, &passages[..kept]);
            if fits(&prompt)? {
                return Ok((prompt, passages.len() - kept));
            }
        }
        bail!("the question alone does not fit in the model's context; raise --ctx-size")
    }
}

/// Replaces `{context}` and `{question}` in one left-to-right pass.
fn fill(template: &str, context: &str, question: &str) -> String {
    let mut out = String::with_capacity(template.len() + context.len() + question.len());
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        if let Some(after) = tail.strip_prefix("{context}") {
            out.push_str(context);
            rest = after;
        } else if let Some(after) = tail.strip_prefix("{question}") {
            out.push_str(question);
            rest = after;
        } else {
            out.push('{');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paragraphs(n: usize) -> Vec<Paragraph> {
        (1..=n)
            .map(|i| Paragraph {
                title: format!("T{i}"),
                text: format!("text {i} has {{question}} in it."),
                links: Vec::new(),
                source: None,
            })
            .collect()
    }

    #[test]
    fn paper_style_fills_the_table_4_text_as_one_user_turn() {
        let spec = PromptSpec::from_flags(Some(PromptStyle::Paper), None).unwrap();
        let prompt = spec.render("Who won?", &paragraphs(2));
        assert_eq!(prompt.messages.len(), 1);
        assert_eq!(prompt.messages[0].role, Role::User);
        let text = &prompt.messages[0].content;
        assert!(text.starts_with("As an advanced QA system"));
        assert!(text.contains(
            "Context: T1: text 1 has {question} in it.\nT2: text 2 has {question} in it..\n\nQuestion: Who won?.\n"
        ));
        assert!(text.ends_with("so on and so forth.\n\nOutput:"));
    }

    #[test]
    fn an_answer_naming_a_document_label_becomes_its_subject() {
        let chat = PromptSpec::from_flags(None, None).unwrap();
        let mut passages = paragraphs(3);
        passages[1].title = "Kiss (band)".into();
        let subject = |answer: &str| chat.labelled_subject(answer, &passages);
        assert_eq!(subject("Doc 2").as_deref(), Some("Kiss"));
        assert_eq!(subject(" Doc 3. ").as_deref(), Some("T3"));
        assert_eq!(subject("Doc 1:").as_deref(), Some("T1"));
        for other in [
            "Doc 4",
            "Doc 0",
            "Doc",
            "Doc 2 and Doc 3",
            "Docklands",
            "Kiss",
        ] {
            assert_eq!(subject(other), None, "{other}");
        }
        let paper = PromptSpec::from_flags(Some(PromptStyle::Paper), None).unwrap();
        assert_eq!(paper.labelled_subject("Doc 2", &passages), None);
    }

    #[test]
    fn chat_style_puts_documents_in_the_system_turn() {
        let spec = PromptSpec::from_flags(None, None).unwrap();
        assert_eq!(spec.style, PromptStyle::Chat);
        let prompt = spec.render("Who won?", &paragraphs(2));
        assert_eq!(prompt.messages[0].role, Role::System);
        assert!(prompt.messages[0].content.starts_with(CHAT_INSTRUCTION));
        assert!(prompt.messages[0]
            .content
            .ends_with("Doc 1(Title: T1) text 1 has {question} in it.\nDoc 2(Title: T2) text 2 has {question} in it.\n"));
        assert_eq!(prompt.messages[1].content, "Question: Who won?");
    }

    #[test]
    fn trimming_drops_the_lowest_ranked_paragraphs_first() {
        let spec = PromptSpec::from_flags(None, None).unwrap();
        let words = |p: &Prompt| {
            p.messages
                .iter()
                .map(|m| m.content.split_whitespace().count())
                .sum::<usize>()
        };
        let all = paragraphs(5);
        let full = words(&spec.render("q", &all));
        let (prompt, dropped) = spec
            .build_within("q", &all, |p| Ok(words(p) <= full))
            .unwrap();
        assert_eq!(dropped, 0);
        assert_eq!(words(&prompt), full);
        // A budget one word short of all five paragraphs keeps four.
        let (prompt, dropped) = spec
            .build_within("q", &all, |p| Ok(words(p) < full))
            .unwrap();
        assert_eq!(dropped, 1);
        assert!(prompt.messages[0].content.contains("Doc 4(Title: T4)"));
        assert!(!prompt.messages[0].content.contains("T5"));
        let bare = words(&spec.render("q", &[]));
        let (_, dropped) = spec
            .build_within("q", &all, |p| Ok(words(p) <= bare))
            .unwrap();
        assert_eq!(dropped, 5);
        assert!(spec
            .build_within("q", &all, |p| Ok(words(p) < bare))
            .is_err());
    }

    #[test]
    fn paper_prompt_files_need_both_placeholders_and_chat_ones_none() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.txt");
        std::fs::write(&good, "C={context} Q={question} {other}").unwrap();
        let spec = PromptSpec::from_flags(None, Some(&good)).unwrap();
        assert_eq!(spec.style, PromptStyle::Paper);
        let prompt = spec.render("q?", &paragraphs(1));
        assert_eq!(
            prompt.messages[0].content,
            "C=T1: text 1 has {question} in it. Q=q? {other}"
        );
        assert!(PromptSpec::from_flags(Some(PromptStyle::Chat), Some(&good)).is_err());
        let bad = dir.path().join("bad.txt");
        std::fs::write(&bad, "only {question}").unwrap();
        assert!(PromptSpec::from_flags(None, Some(&bad)).is_err());
        assert!(PromptSpec::from_flags(None, Some(&dir.path().join("missing"))).is_err());
        assert_eq!(PromptSpec::from_flags(None, None).unwrap().label(), "chat");
        let paper = PromptSpec::from_flags(Some(PromptStyle::Paper), None).unwrap();
        assert_eq!(paper.label(), "paper");
        assert!(
            spec.label().starts_with("paper+") && spec.label().len() == 18,
            "{}",
            spec.label()
        );
    }

    #[test]
    fn a_chat_prompt_file_replaces_the_instruction() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("instruction.txt");
        std::fs::write(&file, "Answer briefly.\n").unwrap();
        let spec = PromptSpec::from_flags(Some(PromptStyle::Chat), Some(&file)).unwrap();
        let prompt = spec.render("Who won?", &paragraphs(1));
        assert_eq!(
            prompt.messages[0].content,
            "Answer briefly.\nDoc 1(Title: T1) text 1 has {question} in it.\n"
        );
        assert_eq!(prompt.messages[1].content, "Question: Who won?");
        assert!(spec.label().starts_with("chat+"), "{}", spec.label());
        // The default instruction from a file is the default.
        std::fs::write(&file, CHAT_INSTRUCTION).unwrap();
        let spec = PromptSpec::from_flags(Some(PromptStyle::Chat), Some(&file)).unwrap();
        assert_eq!(
            (spec.label(), spec),
            (
                "chat".to_string(),
                PromptSpec::from_flags(None, None).unwrap()
            )
        );
    }
}
