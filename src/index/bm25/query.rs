//! A question or second-hop query as BM25 reads it: plain text, tokenised by each field's own
//! analyzer exactly as the documents were, one term per word. tantivy's query syntax (`+a`,
//! `-b`, `a~2`, `*`, quotes, `title:`) would turn ordinary punctuation into operators: "which
//! store - today owned by the State of Qatar - is the biggest?" excludes every paragraph with
//! "today" or "is", and second-hop queries carry whole paragraphs of quotes, colons and dashes.
//! [`QuerySyntax::Tantivy`] keeps the parser for those who ask for it.

use tantivy::query::{BooleanQuery, Occur, PhraseQuery, Query, QueryParser, TermQuery};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{Index, Term};

/// How a query string is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QuerySyntax {
    /// Words, nothing else (the default).
    #[default]
    PlainText,
    /// tantivy's query language, read leniently (`--bm25-syntax`).
    Tantivy,
}

/// Builds the tantivy query of a query string for the searched fields.
pub struct QueryBuilder {
    /// Each searched field with its analyzer (the one its documents were indexed with).
    fields: Vec<(Field, TextAnalyzer)>,
    parser: QueryParser,
}

impl QueryBuilder {
    pub fn new(index: &Index, fields: &[Field]) -> tantivy::Result<Self> {
        Ok(Self {
            fields: fields
                .iter()
                .map(|&field| Ok((field, index.tokenizer_for_field(field)?)))
                .collect::<tantivy::Result<_>>()?,
            parser: QueryParser::for_index(index, fields.to_vec()),
        })
    }

    /// The query of `text`. As plain text: a disjunction with one clause per word and field,
    /// with no boost, the clauses the parser makes of a question of plain words (a repeated
    /// word counts again, as it did there), so only what was syntax changes. A word the
    /// analyzer splits ("1675-1679", "U.S.") and a span in paired double quotes (a title,
    /// mostly) stay phrases, as the parser read them: matched whole, they are the strongest
    /// evidence a question holds.
    pub fn build(&self, text: &str, syntax: QuerySyntax) -> Box<dyn Query> {
        if syntax == QuerySyntax::Tantivy {
            return self.parser.parse_query_lenient(text).0;
        }
        let pieces = words(text);
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for (field, analyzer) in &self.fields {
            // token_stream needs the analyzer mutably; searches share the builder.
            let mut analyzer = analyzer.clone();
            for &piece in &pieces {
                let mut terms = Vec::new();
                let mut tokens = analyzer.token_stream(piece);
                while let Some(token) = tokens.next() {
                    terms.push((token.position, Term::from_field_text(*field, &token.text)));
                }
                let clause: Box<dyn Query> = match terms.len() {
                    0 => continue,
                    1 => Box::new(TermQuery::new(
                        terms.pop().expect("one term").1,
                        IndexRecordOption::WithFreqs,
                    )),
                    _ => Box::new(PhraseQuery::new_with_offset(terms)),
                };
                clauses.push((Occur::Should, clause));
            }
        }
        Box::new(BooleanQuery::new(clauses))
    }
}

/// Characters that end a word as the query parser reads words: whitespace, the parser's
/// punctuation (an apostrophe too: "Dahl's" is "Dahl" and "s") and its operators, which here
/// only separate.
fn separates(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '^' | '`'
                | ':'
                | '{'
                | '}'
                | '\''
                | '['
                | ']'
                | '('
                | ')'
                | '\\'
                | '+'
                | '*'
                | '~'
                | '!'
        )
}

/// The words of `text`, each span in paired double quotes as one piece; an unpaired quote is
/// dropped.
fn words(text: &str) -> Vec<&str> {
    let spans: Vec<&str> = text.split('"').collect();
    // With an odd number of spans every quote is paired; otherwise the last one is not, and
    // the span after it is ordinary words.
    let paired = if spans.len() % 2 == 1 {
        spans.len()
    } else {
        spans.len() - 1
    };
    let mut pieces = Vec::new();
    for (i, span) in spans.iter().enumerate() {
        if i % 2 == 1 && i < paired {
            pieces.push(*span);
        } else {
            pieces.extend(span.split(separates).filter(|w| !w.is_empty()));
        }
    }
    pieces
}
