//! What a search answers: the ranked paragraphs, the depth and size they were ranked at, and the
//! time it took.

use serde::{Deserialize, Serialize};

use super::Mode;
use crate::corpus::Paragraph;
use crate::index::Cell;

/// A ranked document: its id, its score in the ranking, and the hop that found it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    pub id: u64,
    pub score: f32,
    pub hop: u8,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hit {
    pub rank: usize,
    pub id: u64,
    pub title: String,
    pub text: String,
    pub score: f32,
    /// 1 for the question's own search, 2 for a second-hop search.
    pub hop: u8,
    /// The file and span a document's passage came from (`rag index` on a folder of documents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<crate::corpus::Source>,
}

impl Hit {
    /// The paragraph this hit points at, as a prompt needs it.
    pub fn paragraph(&self) -> Paragraph {
        Paragraph {
            title: self.title.clone(),
            text: self.text.clone(),
            links: Vec::new(),
            source: self.source.clone(),
        }
    }
}

/// Time spent encoding and searching; a fusion search's dense and BM25 halves run side by side
/// and each counts whole, so the parts may sum past the total.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SearchTimings {
    pub encode_ms: f64,
    pub search_ms: f64,
    pub total_ms: f64,
}

impl SearchTimings {
    pub fn add(&mut self, other: &SearchTimings) {
        self.encode_ms += other.encode_ms;
        self.search_ms += other.search_ms;
        self.total_ms += other.total_ms;
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SearchResponse {
    pub query: String,
    pub mode: Mode,
    pub hops: u8,
    /// Written as the response's own `layers` and `dim`.
    #[serde(flatten)]
    pub cell: Cell,
    pub hits: Vec<Hit>,
    pub timings: SearchTimings,
}

impl SearchResponse {
    /// Given paragraphs as if retrieved for `query`, in order (the gold paragraphs of an oracle
    /// run, or a caller's own context).
    pub fn of_passages(query: &str, passages: &[Paragraph]) -> Self {
        Self {
            query: query.to_string(),
            mode: Mode::default(),
            hops: 0,
            cell: Cell::default(),
            hits: passages
                .iter()
                .enumerate()
                .map(|(i, p)| Hit {
                    rank: i + 1,
                    id: i as u64,
                    title: p.title.clone(),
                    text: p.text.clone(),
                    score: 0.0,
                    hop: 0,
                    source: p.source.clone(),
                })
                .collect(),
            timings: SearchTimings::default(),
        }
    }
}
