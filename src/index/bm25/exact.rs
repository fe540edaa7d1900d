//! A parsed query's BM25 scores that do not depend on which documents share a segment.
//!
//! tantivy's union adds a document's term scores in f32, in an order that depends on the other
//! documents of its segment (a posting list that runs out leaves the union early); a shard and
//! the single index of the same corpus then score a document a bit apart and order equal
//! scores differently. Here each clause is scored on its own (tantivy's BM25 weight for a term
//! or phrase, with the caller's statistics) and a document's clause scores are added in f64,
//! where BM25's term scores (f32, whose magnitudes lie far within f64's 53 bits of each other)
//! add up exactly: the sum is the same in any order, so the same in any shard.

use std::collections::HashMap;

use anyhow::Result;
use tantivy::query::{BooleanQuery, EnableScoring, Occur, Query, TermQuery, Weight};
use tantivy::{DocId, SegmentReader, Term};

use super::max_score::{self, Best, Clause};

/// A query as a tree of boolean clauses over tantivy weights, built once per search and
/// evaluated per segment.
pub enum ExactQuery {
    /// A term, a phrase, or anything else tantivy scores by itself, with a bound on its score
    /// where there is one ([`max_score::bound`]).
    Leaf {
        weight: Box<dyn Weight>,
        bound: Option<f64>,
        /// The term of a one-term query: the same term asked again joins this leaf.
        term: Option<Term>,
        /// How many `Should` clauses of its boolean query ask for it; its score counts that
        /// many times. A second-hop query holds a whole paragraph, whose repeated words ("the"
        /// five times, the title's words) would each walk the same postings. Its f32 score
        /// added `times` times in f64 is exactly `times` x it, so scores and rankings are
        /// those of the clauses asked one by one.
        times: u32,
    },
    /// tantivy's boolean semantics: every `Must`, no `MustNot`, and at least `min_should`
    /// `Should` clauses (at least one when nothing is required); the score is the sum of the
    /// matching `Must` and `Should` clauses.
    Boolean {
        clauses: Vec<(Occur, ExactQuery)>,
        min_should: usize,
    },
}

impl ExactQuery {
    pub fn new(query: &dyn Query, scoring: EnableScoring) -> Result<Self> {
        let Some(boolean) = query.downcast_ref::<BooleanQuery>() else {
            let bound = match scoring {
                EnableScoring::Enabled {
                    statistics_provider,
                    ..
                } => max_score::bound(query, statistics_provider)?,
                EnableScoring::Disabled { .. } => None,
            };
            return Ok(Self::Leaf {
                weight: query.weight(scoring)?,
                bound,
                term: query
                    .downcast_ref::<TermQuery>()
                    .map(|query| query.term().clone()),
                times: 1,
            });
        };
        let required = boolean.clauses().iter().any(|c| c.0 == Occur::Must);
        let min_should = boolean
            .get_minimum_number_should_match()
            .max(usize::from(!required));
        let mut clauses = Vec::new();
        for (occur, clause) in boolean.clauses() {
            match (occur, Self::new(clause.as_ref(), scoring)?) {
                // A word of the question is a disjunction over the fields; where any one
                // clause is enough (or none is needed), its clauses join this one's, so that a
                // question is one disjunction, evaluated in one pass.
                (
                    Occur::Should,
                    Self::Boolean {
                        clauses: inner,
                        min_should: 1,
                    },
                ) if min_should <= 1 && inner.iter().all(|c| c.0 == Occur::Should) => {
                    clauses.extend(inner)
                }
                (occur, clause) => clauses.push((*occur, clause)),
            }
        }
        merge_repeated(&mut clauses);
        Ok(Self::Boolean {
            clauses,
            min_should,
        })
    }

    /// How many clauses of its boolean query this one stands for.
    fn times(&self) -> u32 {
        match self {
            Self::Leaf { times, .. } => *times,
            Self::Boolean { .. } => 1,
        }
    }

    /// Offers `best` each document of `segment` that matches and could be among the best, with
    /// its score; `id` gives a document's id, or `None` for a deleted one. A disjunction of
    /// terms and phrases (any question in plain text) skips what cannot enter
    /// ([`max_score`]); anything else is scored whole.
    pub fn search(
        &self,
        segment: &SegmentReader,
        best: &mut Best,
        id: &mut dyn FnMut(DocId) -> Result<Option<u64>>,
    ) -> Result<()> {
        if let Some(clauses) = self.bounded_disjunction() {
            return max_score::search(&clauses, segment, best, id);
        }
        let mut failed = None;
        self.for_each(segment, &mut |doc, score| match id(doc) {
            Ok(Some(id)) => best.offer(id, score as f32),
            Ok(None) => {}
            Err(e) => {
                failed.get_or_insert(e);
            }
        })?;
        failed.map_or(Ok(()), Err)
    }

    /// The clauses with their bounds, if this is a disjunction of bounded leaves.
    fn bounded_disjunction(&self) -> Option<Vec<Clause<'_>>> {
        let Self::Boolean {
            clauses,
            min_should: 1,
        } = self
        else {
            return None;
        };
        clauses
            .iter()
            .map(|(occur, clause)| match (occur, clause) {
                (
                    Occur::Should,
                    Self::Leaf {
                        weight,
                        bound,
                        times,
                        ..
                    },
                ) => Some(Clause {
                    weight: weight.as_ref(),
                    times: f64::from(*times),
                    bound: f64::from(*times) * (*bound)?,
                }),
                _ => None,
            })
            .collect()
    }

    /// Calls `matched` with each document of `segment` that matches, ascending, and its score.
    pub fn for_each(
        &self,
        segment: &SegmentReader,
        matched: &mut dyn FnMut(DocId, f64),
    ) -> tantivy::Result<()> {
        let (clauses, min_should) = match self {
            Self::Leaf { weight, times, .. } => {
                let times = f64::from(*times);
                return weight.for_each(segment, &mut |doc, score| {
                    matched(doc, times * f64::from(score))
                });
            }
            Self::Boolean {
                clauses,
                min_should,
            } => (clauses, *min_should),
        };
        // Dense per document: one pass over the postings, none over a sort (12 + 8 bytes per
        // document of the segment, for the length of one search).
        let documents = segment.max_doc() as usize;
        let mut sums = vec![0.0f64; documents];
        let mut counts = vec![Counts::default(); documents];
        for (occur, clause) in clauses {
            let times = clause.times();
            clause.for_each(segment, &mut |doc, score| {
                let count = &mut counts[doc as usize];
                match occur {
                    Occur::Must => count.must += 1,
                    Occur::Should => count.should += times,
                    Occur::MustNot => count.excluded = true,
                }
                sums[doc as usize] += score;
            })?;
        }
        let required = clauses.iter().filter(|c| c.0 == Occur::Must).count() as u32;
        let min_should = min_should as u32;
        for (doc, (count, &sum)) in counts.iter().zip(&sums).enumerate() {
            if !count.excluded && count.must == required && count.should >= min_should {
                matched(doc as DocId, sum);
            }
        }
        Ok(())
    }
}

/// Folds each `Should` term leaf asked again into its first occurrence ([`ExactQuery::Leaf`]'s
/// `times`), keeping the clauses' order.
fn merge_repeated(clauses: &mut Vec<(Occur, ExactQuery)>) {
    let mut first: HashMap<Term, usize> = HashMap::new();
    let mut kept: Vec<(Occur, ExactQuery)> = Vec::with_capacity(clauses.len());
    for (occur, clause) in clauses.drain(..) {
        if let (
            Occur::Should,
            ExactQuery::Leaf {
                term: Some(term), ..
            },
        ) = (occur, &clause)
        {
            if let Some(&at) = first.get(term) {
                if let ExactQuery::Leaf { times, .. } = &mut kept[at].1 {
                    *times += 1;
                }
                continue;
            }
            first.insert(term.clone(), kept.len());
        }
        kept.push((occur, clause));
    }
    *clauses = kept;
}

/// How many of a boolean query's clauses a document matched.
#[derive(Clone, Copy, Default)]
struct Counts {
    must: u32,
    should: u32,
    excluded: bool,
}

#[cfg(test)]
mod tests {
    use tantivy::collector::TopDocs;

    use super::super::tests::index_of;
    use super::super::QuerySyntax;

    /// Query syntax a question may hold (required, excluded, phrases, groups, fields) matches
    /// what tantivy's own search matches, with its scores.
    #[test]
    fn matches_and_scores_like_tantivy() {
        let dir = tempfile::tempdir().unwrap();
        let docs = [
            (
                "Paris",
                "Paris is the capital of France, on the river Seine.",
            ),
            ("Seine", "The Seine flows through Paris to the sea."),
            ("Danube", "The Danube flows through many capitals."),
            ("Cats", "Cats of Paris are running and jumping."),
            ("Dogs", "Dogs are not cats."),
        ];
        let (index, _) = index_of(dir.path(), &docs);
        let searcher = index.reader.searcher();
        for (question, syntax) in [
            "which river flows through paris?",
            "+paris -cats river",
            "+flows +capitals",
            "\"flows through\" sea",
            "(cats OR dogs) AND running",
            "title:seine paris",
            "-paris",
            "nothing here",
        ]
        .into_iter()
        .flat_map(|q| [(q, QuerySyntax::Tantivy), (q, QuerySyntax::PlainText)])
        {
            let query = index.queries.build(question, syntax);
            let theirs = searcher.search(&query, &TopDocs::with_limit(10)).unwrap();
            let ours = index.search(question, syntax, 10).unwrap();
            assert_eq!(ours.len(), theirs.len(), "{question}: {ours:?} {theirs:?}");
            let mut theirs: Vec<(u64, f32)> = theirs
                .iter()
                .map(|(score, address)| {
                    let segment = searcher.segment_reader(address.segment_ord);
                    let ids = segment.fast_fields().u64(super::super::ID_FIELD).unwrap();
                    (ids.first(address.doc_id).unwrap(), *score)
                })
                .collect();
            theirs.sort_by_key(|h| h.0);
            let mut ours = ours.clone();
            ours.sort_by_key(|h| h.0);
            for (a, b) in ours.iter().zip(&theirs) {
                assert_eq!(a.0, b.0, "{question}: {ours:?} {theirs:?}");
                assert!((a.1 - b.1).abs() < 1e-5, "{question}: {ours:?} {theirs:?}");
            }
        }
    }
}
