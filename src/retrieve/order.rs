//! One order for every ranking and selection: scores compared at a fixed grain, ties by id.
//!
//! An index built in bf16 or int8 (the default where the CPU has AMX or VNNI) gives scores a
//! few 1e-6 to 1e-4 away from an f32 one's, and summing scaled rankings (fusion, the second
//! hop, the sentence scores) turns exact ties and near-ties into differences of that size. An
//! order that compared the raw floats, or kept "first seen" order on a tie, then depended on
//! the machine that built the index. Scores equal at [`GRAIN`] are a tie here, and a tie goes
//! to the smaller id (a document's position in the corpus, or a sentence's place in the
//! context), which is the same everywhere. A difference straddling a grain boundary can still
//! fall either way, but only for scores that differ by about the grain itself.

use std::cmp::Ordering;

/// Scores closer than this are compared as equal (after rounding to a multiple of it).
/// Retrieval and sentence scores lie in [0, 5]; 1e-4 is above the precisions' differences
/// and far below any difference a weight means.
pub const GRAIN: f32 = 1e-4;

/// A score rounded to `grain`, as an integer so that equality is exact.
pub fn quantized(score: f32, grain: f32) -> i64 {
    if score.is_nan() {
        return i64::MIN;
    }
    (f64::from(score) / f64::from(grain)).round() as i64
}

/// Best first: the higher score at [`GRAIN`], then the smaller id.
pub fn best_first<I: Ord>(a: (f32, I), b: (f32, I)) -> Ordering {
    best_first_at(GRAIN, a, b)
}

/// [`best_first`] at another grain, for scores whose meaningful differences are smaller
/// (reciprocal ranks deep in a list differ by about 1e-5).
pub fn best_first_at<I: Ord>(grain: f32, a: (f32, I), b: (f32, I)) -> Ordering {
    quantized(b.0, grain)
        .cmp(&quantized(a.0, grain))
        .then(a.1.cmp(&b.1))
}

/// Sorts `(id, score)` pairs best first at `grain` ([`best_first_at`]).
pub fn sort_ranking(ranking: &mut [(u64, f32)], grain: f32) {
    ranking.sort_by(|a, b| best_first_at(grain, (a.1, a.0), (b.1, b.0)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_ties_fall_to_the_smaller_id() {
        // The same two documents as two precisions score them: the order is the same.
        let mut f32_scores = vec![(9, 0.812_33), (4, 0.812_31)];
        let mut bf16_scores = vec![(4, 0.812_34), (9, 0.812_32)];
        sort_ranking(&mut f32_scores, GRAIN);
        sort_ranking(&mut bf16_scores, GRAIN);
        assert_eq!(f32_scores[0].0, 4);
        assert_eq!(bf16_scores[0].0, 4);
        // A real difference still decides.
        let mut apart = vec![(4, 0.80), (9, 0.81)];
        sort_ranking(&mut apart, GRAIN);
        assert_eq!(apart[0].0, 9);
    }

    #[test]
    fn ids_of_any_order_and_odd_scores() {
        assert_eq!(best_first((1.0, (0, 2)), (1.0, (0, 1))), Ordering::Greater);
        assert_eq!(best_first((1.0, 5u64), (1.00004, 6u64)), Ordering::Less);
        // A finer grain tells apart what 1e-4 does not (sums of deep reciprocal ranks).
        let (deep, deeper) = (0.012_43, 0.012_41);
        assert_eq!(best_first((deeper, 1u64), (deep, 2u64)), Ordering::Less);
        assert_eq!(
            best_first_at(1e-6, (deeper, 1u64), (deep, 2u64)),
            Ordering::Greater
        );
        // NaN sorts last.
        assert_eq!(
            best_first((f32::NAN, 0u64), (-1e9, 1u64)),
            Ordering::Greater
        );
    }
}
