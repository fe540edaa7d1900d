//! A question or second-hop query as BM25 reads it: plain text, tokenised by each field's own
//! analyzer exactly as the documents were, one term per word. tantivy's query syntax (`+a`,
//! `-b`, `a~2`, `*`, quotes, `title:`) would turn ordinary punctuation into operators: "which
//! store - today owned by the State of Qatar - is the biggest?" excludes every paragraph with
//! "today" or "is", and second-hop queries carry whole paragraphs of quotes, colons and dashes.
//! [`QuerySyntax::Tantivy`] keeps the parser for those who ask for it.

use tantivy::query::{BooleanQuery, Occur, Query, QueryParser, TermQuery};
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

    /// The query of `text`. As plain text: a disjunction with one term per word occurrence and
    /// field, with no boost, the clauses the parser makes of a question of plain words (a
    /// repeated word counts again, as it did there), so only what was syntax changes.
    pub fn build(&self, text: &str, syntax: QuerySyntax) -> Box<dyn Query> {
        if syntax == QuerySyntax::Tantivy {
            return self.parser.parse_query_lenient(text).0;
        }
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for (field, analyzer) in &self.fields {
            // token_stream needs the analyzer mutably; searches share the builder.
            let mut analyzer = analyzer.clone();
            let mut tokens = analyzer.token_stream(text);
            while let Some(token) = tokens.next() {
                let term = Term::from_field_text(*field, &token.text);
                clauses.push((
                    Occur::Should,
                    Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs)),
                ));
            }
        }
        Box::new(BooleanQuery::new(clauses))
    }
}
