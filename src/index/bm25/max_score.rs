//! The best k documents of a disjunction without scoring every match: MaxScore (Turtle and
//! Flood, 1995, as Lucene's `MaxScoreBulkScorer` runs it, in windows of documents).
//!
//! A question's common words ("the", "of", "was") match most of a corpus, and summing every
//! one of their postings made BM25 grow with the corpus (seconds per two-hop question at a
//! million paragraphs). Each clause has a bound on its score; once the k best so far set a
//! floor, the clauses of smallest bound whose bounds together stay under it are
//! *non-essential*: a document matching only those cannot enter, so candidates come from the
//! other clauses' postings alone, and a candidate's non-essential clauses are looked up (a
//! seek, not a scan) only while they could still lift it over the floor. Every candidate that
//! can enter is scored in full, in f64 as [`super::exact`] scores, so the top k, their scores
//! and the order of ties are exactly those of scoring every match.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use anyhow::Result;
use tantivy::query::{Bm25StatisticsProvider, Bm25Weight, Query, Scorer, Weight};
use tantivy::{DocId, DocSet, SegmentReader, Term, TERMINATED};

use crate::index::sharded;

/// Documents per window: the window's sums and matches (8 + 1 bits per document) stay in the
/// first-level cache, and postings are read in runs.
const WINDOW: u32 = 4096;

/// A bound on any document's score for a term or phrase query: tantivy's BM25 weight for its
/// terms with these statistics (as the query's own weight is made) at the largest term
/// frequency, a hair above it so that f32 rounding can never put a score over it. `None` for any
/// other query, whose scores have no such bound here.
pub fn bound(query: &dyn Query, statistics: &dyn Bm25StatisticsProvider) -> Result<Option<f64>> {
    let kind = query.downcast_ref::<tantivy::query::TermQuery>().is_some()
        || query
            .downcast_ref::<tantivy::query::PhraseQuery>()
            .is_some();
    if !kind {
        return Ok(None);
    }
    let mut terms: Vec<Term> = Vec::new();
    query.query_terms(&mut |term, _| terms.push(term.clone()));
    if terms.is_empty() {
        return Ok(None);
    }
    let weight = Bm25Weight::for_terms(statistics, &terms)?;
    Ok(Some(f64::from(weight.max_score()) * (1.0 + 1e-5) + 1e-6))
}

/// The k best (id, score) offered, best first, in [`sharded::ranking`]'s order.
pub struct Best {
    k: usize,
    /// The worst of the best on top.
    heap: BinaryHeap<Ranked>,
}

/// An (id, score) the heap orders as [`sharded::ranking`] does: greater is worse.
struct Ranked((u64, f32));

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Ranked {}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        sharded::ranking(&self.0, &other.0)
    }
}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Best {
    pub fn new(k: usize) -> Self {
        Self {
            k,
            heap: BinaryHeap::with_capacity(k + 1),
        }
    }

    pub fn offer(&mut self, id: u64, score: f32) {
        if self.k == 0 {
            return;
        }
        let ranked = Ranked((id, score));
        if self.heap.len() < self.k {
            self.heap.push(ranked);
        } else if self.heap.peek().is_some_and(|worst| ranked < *worst) {
            self.heap.pop();
            self.heap.push(ranked);
        }
    }

    /// The score below which a document cannot enter (one equal to it still can, by a lower
    /// id): none until k are held.
    pub fn floor(&self) -> Option<f32> {
        match self.k {
            0 => Some(f32::INFINITY),
            k if self.heap.len() < k => None,
            _ => self.heap.peek().map(|worst| worst.0 .1),
        }
    }

    pub fn into_sorted(self) -> Vec<(u64, f32)> {
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|ranked| ranked.0)
            .collect()
    }
}

/// Whether a document whose score is at most `bound` is kept out by `floor`.
fn below(bound: f64, floor: Option<f32>) -> bool {
    // f32 rounding is monotone: a score at most `bound` rounds to at most `bound as f32`.
    floor.is_some_and(|floor| (bound as f32) < floor)
}

/// One clause of a disjunction: a weight whose score counts `times` (a word the query repeats),
/// and a bound on what it adds to a document's score (`times` x the bound of one).
pub struct Clause<'a> {
    pub weight: &'a dyn Weight,
    pub times: f64,
    pub bound: f64,
}

/// A clause's scorer in one segment, with its [`Clause`]'s `times` and `bound`.
struct Scoring {
    scorer: Box<dyn Scorer>,
    times: f64,
    bound: f64,
}

impl Scoring {
    /// What the clause adds to the score of the document the scorer is on.
    fn score(&mut self) -> f64 {
        self.times * f64::from(self.scorer.score())
    }
}

/// Offers `best` every document of `segment` that matches at least one of `clauses` and could
/// enter, with its exact score; `id` gives a document's id, or `None` for a deleted one.
pub fn search(
    clauses: &[Clause],
    segment: &SegmentReader,
    best: &mut Best,
    id: &mut dyn FnMut(DocId) -> Result<Option<u64>>,
) -> Result<()> {
    // Smallest bound first; `prefix[i]` bounds a document's score from clauses[..i].
    let mut clauses: Vec<Scoring> = clauses
        .iter()
        .map(|c| {
            Ok(Scoring {
                scorer: c.weight.scorer(segment, 1.0)?,
                times: c.times,
                bound: c.bound,
            })
        })
        .collect::<tantivy::Result<_>>()?;
    clauses.sort_by(|a, b| a.bound.total_cmp(&b.bound));
    let prefix: Vec<f64> = std::iter::once(0.0)
        .chain(clauses.iter().scan(0.0, |sum, c| {
            *sum += c.bound;
            Some(*sum)
        }))
        .collect();
    // clauses[essential..] give the candidates.
    let mut essential = 0;
    let n = clauses.len();
    let advance_split = |essential: &mut usize, floor: Option<f32>| {
        while *essential < n && below(prefix[*essential + 1], floor) {
            *essential += 1;
        }
    };
    advance_split(&mut essential, best.floor());
    let mut sums = vec![0.0f64; WINDOW as usize];
    // One bit per document of the window: visited in order, word by word.
    let mut matched = [0u64; WINDOW as usize / 64];
    loop {
        let start = clauses[essential..]
            .iter()
            .map(|c| c.scorer.doc())
            .min()
            .unwrap_or(TERMINATED);
        if start == TERMINATED {
            return Ok(());
        }
        let end = start.saturating_add(WINDOW).min(TERMINATED);
        for clause in &mut clauses[essential..] {
            let mut doc = clause.scorer.doc();
            while doc < end {
                let slot = (doc - start) as usize;
                sums[slot] += clause.score();
                matched[slot / 64] |= 1 << (slot % 64);
                doc = clause.scorer.advance();
            }
        }
        for word in 0..matched.len() {
            while matched[word] != 0 {
                let slot = word * 64 + matched[word].trailing_zeros() as usize;
                matched[word] &= matched[word] - 1;
                let doc = start + slot as u32;
                let score = std::mem::take(&mut sums[slot]);
                let floor = best.floor();
                let Some(score) = complete(&mut clauses[..essential], &prefix, doc, score, floor)
                else {
                    continue;
                };
                if let Some(id) = id(doc)? {
                    best.offer(id, score as f32);
                    advance_split(&mut essential, best.floor());
                }
            }
        }
    }
}

/// `doc`'s whole score: `score` (its essential clauses') plus its `non_essential` clauses',
/// looked up largest bound first; `None` as soon as it cannot reach `floor`.
fn complete(
    non_essential: &mut [Scoring],
    prefix: &[f64],
    doc: DocId,
    mut score: f64,
    floor: Option<f32>,
) -> Option<f64> {
    for i in (0..non_essential.len()).rev() {
        if below(score + prefix[i + 1], floor) {
            return None;
        }
        let clause = &mut non_essential[i];
        // One made non-essential within this window was read past it already (its score is
        // in `score`): it is never on `doc`.
        if clause.scorer.doc() < doc {
            clause.scorer.seek(doc);
        }
        if clause.scorer.doc() == doc {
            score += clause.score();
        }
    }
    (!below(score, floor)).then_some(score)
}

#[cfg(test)]
mod tests {
    use tantivy::query::EnableScoring;

    use super::super::exact::ExactQuery;
    use super::super::tests::index_of;
    use super::super::{Bm25Index, QuerySyntax, ID_FIELD};
    use crate::index::sharded::top_k;

    /// Every match scored, then the best k: what MaxScore must equal.
    fn every_match(index: &Bm25Index, question: &str, k: usize) -> Vec<(u64, f32)> {
        let searcher = index.reader.searcher();
        let query = index.queries.build(question, QuerySyntax::PlainText);
        let exact = ExactQuery::new(
            query.as_ref(),
            EnableScoring::enabled_from_searcher(&searcher),
        )
        .unwrap();
        let mut hits = Vec::new();
        for segment in searcher.segment_readers() {
            let ids = segment.fast_fields().u64(ID_FIELD).unwrap();
            exact
                .for_each(segment, &mut |doc, score| {
                    hits.push((ids.first(doc).unwrap(), score as f32))
                })
                .unwrap();
        }
        top_k(hits, k)
    }

    /// `n` Zipf-like words over a small vocabulary: common words match most documents, as "the"
    /// does, and a question repeats them.
    fn words(rng: &mut fastrand::Rng, n: usize) -> String {
        (0..n)
            .map(|_| format!("w{}", (300.0 * rng.f64().powi(3)) as usize))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// 4,000 documents of such words over several segments, every 40th a copy of an earlier one
    /// (equal scores, ranked by id).
    fn zipf_index(rng: &mut fastrand::Rng) -> (tempfile::TempDir, Bm25Index) {
        let mut docs: Vec<(String, String)> = Vec::new();
        for i in 0..4000 {
            let doc = match i % 40 {
                39 => docs[rng.usize(..docs.len())].clone(),
                _ => {
                    let (t, n) = (rng.usize(1..4), rng.usize(1..80));
                    (words(rng, t), words(rng, n))
                }
            };
            docs.push(doc);
        }
        let dir = tempfile::tempdir().unwrap();
        let pairs: Vec<(&str, &str)> = docs.iter().map(|(t, x)| (t.as_str(), x.as_str())).collect();
        let (index, _) = index_of(dir.path(), &pairs);
        assert!(
            index.reader.searcher().segment_readers().len() > 1,
            "one segment only"
        );
        (dir, index)
    }

    /// The best k are the same documents with the same scores in the same order as scoring
    /// every match.
    #[test]
    fn ranks_exactly_like_scoring_every_match() {
        let mut rng = fastrand::Rng::with_seed(55);
        let (_dir, index) = zipf_index(&mut rng);
        for q in 0..80 {
            let n = rng.usize(1..60);
            let question = words(&mut rng, n);
            for k in [1, 3, 10, 50, 400] {
                let ours = index.search(&question, QuerySyntax::PlainText, k).unwrap();
                let theirs = every_match(&index, &question, k);
                assert_eq!(ours.len(), theirs.len(), "question {q}, k {k}");
                for (a, b) in ours.iter().zip(&theirs) {
                    assert!(
                        a.0 == b.0 && a.1.to_bits() == b.1.to_bits(),
                        "question {q}, k {k}: {ours:?} {theirs:?}"
                    );
                }
            }
        }
    }

    /// A word a question repeats is searched once ([`super::super::exact`] folds its clauses)
    /// and counts once per time it is asked: each document's score is, to the bit, its
    /// one-word scores added in f64 word by word, as when every repeat was a clause of its own.
    #[test]
    fn a_repeated_word_counts_once_per_time_it_is_asked() {
        let mut rng = fastrand::Rng::with_seed(58);
        let (_dir, index) = zipf_index(&mut rng);
        let searcher = index.reader.searcher();
        let scoring = EnableScoring::enabled_from_searcher(&searcher);
        // Each document's exact (f64) score for one word, by id.
        let one_word = |word: &str| {
            let query = index.queries.build(word, QuerySyntax::PlainText);
            let exact = ExactQuery::new(query.as_ref(), scoring.clone()).unwrap();
            let mut scores = std::collections::HashMap::new();
            for segment in searcher.segment_readers() {
                let ids = segment.fast_fields().u64(ID_FIELD).unwrap();
                exact
                    .for_each(segment, &mut |doc, score| {
                        scores.insert(ids.first(doc).unwrap(), score);
                    })
                    .unwrap();
            }
            scores
        };
        let mut repeated = 0;
        for q in 0..30 {
            let n = rng.usize(20..120);
            let question = words(&mut rng, n);
            let asked: Vec<&str> = question.split(' ').collect();
            let distinct: std::collections::HashSet<&str> = asked.iter().copied().collect();
            repeated += asked.len() - distinct.len();
            let mut sums: std::collections::HashMap<u64, f64> = std::collections::HashMap::new();
            for word in &asked {
                for (id, score) in one_word(word) {
                    *sums.entry(id).or_default() += score;
                }
            }
            let expected = top_k(sums.into_iter().map(|(id, s)| (id, s as f32)).collect(), 50);
            let ours = index.search(&question, QuerySyntax::PlainText, 50).unwrap();
            assert_eq!(ours.len(), expected.len(), "question {q}");
            for (a, b) in ours.iter().zip(&expected) {
                assert!(
                    a.0 == b.0 && a.1.to_bits() == b.1.to_bits(),
                    "question {q}: {ours:?} {expected:?}"
                );
            }
        }
        assert!(
            repeated > 300,
            "the questions repeat too few words: {repeated}"
        );
    }
}
