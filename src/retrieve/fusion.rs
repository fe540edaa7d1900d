//! Combining a dense and a lexical ranking of the same question into one.
//!
//! Reciprocal-rank fusion looks only at ranks; the convex combination also uses how far ahead
//! each document is, which is what lets a paragraph that BM25 is sure of (a rare name in the
//! question) beat one both rankings hold half-heartedly (Bruch et al., 2023, "An analysis of
//! fusion functions for hybrid retrieval").

use std::collections::HashMap;

/// The usual constant of reciprocal-rank fusion (Cormack et al., 2009).
const RRF_K: f32 = 60.0;
/// Reciprocal ranks 200 deep differ by 1.5e-5; a rounding of the sums' order, by about 1e-9.
const RRF_GRAIN: f32 = 1e-6;

/// Fuses rankings by summing `1 / (RRF_K + rank)` per document; ties by id ([`super::order`]).
pub fn reciprocal_rank_fusion(rankings: &[Vec<(u64, f32)>]) -> Vec<(u64, f32)> {
    let mut fused = Fused::default();
    for ranking in rankings {
        for (rank, &(id, _)) in ranking.iter().enumerate() {
            fused.add(id, 1.0 / (RRF_K + rank as f32 + 1.0));
        }
    }
    fused.ranked(RRF_GRAIN)
}

/// `weight * dense + (1 - weight) * lexical`, each ranking's scores first scaled to [0, 1] by
/// its own minimum and maximum; a document missing from a ranking counts as that ranking's
/// worst. Ties by id ([`super::order`]).
pub fn convex_fusion(dense: &[(u64, f32)], lexical: &[(u64, f32)], weight: f32) -> Vec<(u64, f32)> {
    let mut fused = Fused::default();
    for (ranking, w) in [(dense, weight), (lexical, 1.0 - weight)] {
        for (id, score) in min_max(ranking) {
            fused.add(id, w * score);
        }
    }
    fused.ranked(super::order::GRAIN)
}

/// Scores scaled to [0, 1] within the ranking (all 1 when they are equal).
pub fn min_max(ranking: &[(u64, f32)]) -> Vec<(u64, f32)> {
    let (lo, hi) = ranking
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &(_, s)| {
            (lo.min(s), hi.max(s))
        });
    let span = hi - lo;
    ranking
        .iter()
        .map(|&(id, s)| (id, if span > 0.0 { (s - lo) / span } else { 1.0 }))
        .collect()
}

/// Scores summed per document.
#[derive(Default)]
struct Fused {
    scores: HashMap<u64, f32>,
    order: Vec<u64>,
}

impl Fused {
    fn add(&mut self, id: u64, score: f32) {
        let order = &mut self.order;
        *self.scores.entry(id).or_insert_with(|| {
            order.push(id);
            0.0
        }) += score;
    }

    /// Best first, ties by id: which ranking saw a document first must not decide.
    fn ranked(self, grain: f32) -> Vec<(u64, f32)> {
        let mut out: Vec<(u64, f32)> = self
            .order
            .into_iter()
            .map(|id| (id, self.scores[&id]))
            .collect();
        super::order::sort_ranking(&mut out, grain);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rrf_rewards_documents_both_rankings_agree_on() {
        let dense = vec![(1, 0.9), (2, 0.8), (3, 0.7)];
        let lexical = vec![(3, 12.0), (4, 9.0), (1, 5.0)];
        let fused = reciprocal_rank_fusion(&[dense, lexical]);
        let ids: Vec<u64> = fused.iter().map(|h| h.0).collect();
        // 1: 1/61 + 1/63; 3: 1/63 + 1/61 (tie, smaller id first); 2: 1/62; 4: 1/62.
        assert_eq!(ids, vec![1, 3, 2, 4]);
        assert!((fused[0].1 - (1.0 / 61.0 + 1.0 / 63.0)).abs() < 1e-6);
    }

    #[test]
    fn convex_fusion_weighs_scaled_scores() {
        // Dense scaled: 1 -> 1, 2 -> 0.5, 3 -> 0. Lexical scaled: 3 -> 1, 4 -> 0.4, 1 -> 0.
        let dense = vec![(1, 0.9), (2, 0.8), (3, 0.7)];
        let lexical = vec![(3, 12.0), (4, 9.0), (1, 7.0)];
        let fused = convex_fusion(&dense, &lexical, 0.3);
        let expect = [(3, 0.7), (1, 0.3), (4, 0.28), (2, 0.15)];
        assert_eq!(fused.len(), expect.len());
        for (got, want) in fused.iter().zip(expect) {
            assert_eq!(got.0, want.0, "{fused:?}");
            assert!((got.1 - want.1).abs() < 1e-5, "{fused:?}");
        }
        // All weight on one side reproduces that side's order.
        let ids = |v: Vec<(u64, f32)>| v.into_iter().map(|h| h.0).collect::<Vec<_>>();
        assert_eq!(ids(convex_fusion(&dense, &lexical, 1.0))[..3], [1, 2, 3]);
        assert_eq!(ids(convex_fusion(&dense, &lexical, 0.0))[..3], [3, 4, 1]);
    }

    #[test]
    fn equal_scores_scale_to_one() {
        assert_eq!(min_max(&[(7, 2.0), (8, 2.0)]), vec![(7, 1.0), (8, 1.0)]);
        assert!(min_max(&[]).is_empty());
    }
}
