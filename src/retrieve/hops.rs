//! The second hop of multi-hop retrieval (Xiong et al., 2021, "Answering complex open-domain
//! questions with multi-hop dense retrieval"): a HotpotQA question names one paragraph and
//! needs a second that only the first leads to, so each of the best first-hop paragraphs is
//! appended to the question and searched for again, and the two hops merge into one ranking.

use super::fusion::min_max;
use crate::corpus::Paragraph;

/// The second-hop query for a first-hop paragraph: the question first, so that truncation to
/// the encoder's length cuts the paragraph, never the question.
pub fn query(question: &str, paragraph: &Paragraph) -> String {
    format!("{question} {}: {}", paragraph.title, paragraph.text)
}

/// One ranking from the first hop (best first) and, for each of its first `seconds.len()`
/// paragraphs in order (the seeds), the second-hop ranking found from it. Every score is first
/// scaled to [0, 1] within its ranking (a seed's own entry in its second-hop ranking, which
/// its text in the query puts on top, is dropped before). A paragraph then scores its
/// first-hop score plus `weight` times its best second-hop score, each second-hop ranking
/// counting as much as its seed did in the first hop: evidence from both hops adds up, so a
/// paragraph the question names keeps its place while one only a seed leads to can rise past
/// weak first-hop ones. The first hop's best paragraph always stays first. Returns the best `k`
/// as (id, score, hop), hop 2 for a paragraph that owes more to the second hop than the first.
pub fn merge(
    first: &[(u64, f32)],
    seconds: &[Vec<(u64, f32)>],
    weight: f32,
    k: usize,
) -> Vec<(u64, f32, u8)> {
    let first = min_max(first);
    // Per paragraph: first-hop score (0 when only the second hop found it), best weighted
    // second-hop score, and whether the first hop found it; in first-seen order.
    let mut scores: Vec<(u64, f32, f32, bool)> =
        first.iter().map(|&(id, s)| (id, s, 0.0, true)).collect();
    for (&(seed, lead), second) in first.iter().zip(seconds) {
        let others: Vec<(u64, f32)> = second.iter().copied().filter(|h| h.0 != seed).collect();
        for (id, score) in min_max(&others) {
            let reached = weight * lead * score;
            match scores.iter_mut().find(|s| s.0 == id) {
                Some(entry) => entry.2 = entry.2.max(reached),
                None => scores.push((id, 0.0, reached, false)),
            }
        }
    }
    let total = |s: &(u64, f32, f32, bool)| s.1 + s.2;
    let best = scores.iter().map(total).fold(f32::NEG_INFINITY, f32::max);
    // The first hop's best stays first; the rest by total, ties in first-seen order (a stable
    // sort).
    if let Some((head, rest)) = scores.split_first_mut() {
        rest.sort_by(|a, b| total(b).total_cmp(&total(a)));
        head.1 = best - head.2;
    }
    scores
        .into_iter()
        .take(k)
        .map(|s| {
            let hop = if s.3 && s.1 >= s.2 { 1 } else { 2 };
            (s.0, total(&s), hop)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(merged: &[(u64, f32, u8)]) -> Vec<u64> {
        merged.iter().map(|h| h.0).collect()
    }

    #[test]
    fn evidence_from_both_hops_adds_up() {
        // First hop scaled: 10 -> 1, 11 -> 0.5, 12 -> 0.
        let first = vec![(10, 0.9), (11, 0.7), (12, 0.5)];
        // From 10, itself dropped: 20 -> 1, 21 -> 0. From 11: 20 -> 1, 22 -> 0.5, 12 -> 0.
        let seconds = vec![
            vec![(20, 3.0), (10, 2.0), (21, 1.0)],
            vec![(20, 5.0), (22, 4.0), (12, 3.0)],
        ];
        let merged = merge(&first, &seconds, 0.8, 6);
        // 20: 0.8 * max(1 * 1, 0.5 * 1); 22: 0.8 * 0.5 * 0.5; 12 and 21: 0 (12 seen first).
        assert_eq!(ids(&merged), vec![10, 20, 11, 22, 12, 21]);
        let hops: Vec<u8> = merged.iter().map(|h| h.2).collect();
        assert_eq!(hops, vec![1, 2, 1, 2, 1, 2]);
        let scores: Vec<f32> = merged.iter().map(|h| h.1).collect();
        for (got, want) in scores.iter().zip([1.0, 0.8, 0.5, 0.2, 0.0, 0.0]) {
            assert!((got - want).abs() < 1e-6, "{scores:?}");
        }
    }

    #[test]
    fn the_first_hops_best_stays_first_and_nothing_repeats() {
        // First hop scaled: 1 -> 1, 2 -> 0.9, 3 -> 0.
        let first = vec![(1, 1.0), (2, 0.9), (3, 0.0)];
        // From 1: 2 -> 1, 5 -> 0. From 2: 7 -> 1, 1 -> 5/9, 8 -> 0.
        let seconds = vec![vec![(2, 1.0), (5, 0.0)], vec![(7, 9.0), (1, 5.0), (8, 0.0)]];
        let merged = merge(&first, &seconds, 1.0, 4);
        // 2 (0.9 + 1) outscores 1 (1 + 0.9 * 5/9), but 1 leads; its score is the best total.
        assert_eq!(ids(&merged), vec![1, 2, 7, 3]);
        assert!((merged[0].1 - 1.9).abs() < 1e-6 && (merged[1].1 - 1.9).abs() < 1e-6);
        assert!((merged[2].1 - 0.9).abs() < 1e-6, "{merged:?}");
        assert_eq!(merge(&first, &seconds, 1.0, 1).len(), 1);
        assert!(merge(&[], &[], 1.0, 3).is_empty());
        // Weight 0 is the first hop alone.
        assert_eq!(ids(&merge(&first, &seconds, 0.0, 3)), vec![1, 2, 3]);
    }

    #[test]
    fn queries_put_the_question_first() {
        let p = Paragraph {
            title: "Ed Wood".into(),
            text: "Edward Davis Wood Jr. was an American filmmaker.".into(),
        };
        assert_eq!(
            query("Same nationality?", &p),
            "Same nationality? Ed Wood: Edward Davis Wood Jr. was an American filmmaker."
        );
    }
}
