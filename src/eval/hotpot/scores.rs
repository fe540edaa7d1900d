//! HotpotQA's official answer metrics and retrieval recall.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

/// The official HotpotQA / SQuAD normalisation, in its order: lower-case, drop ASCII
/// punctuation, drop the articles a/an/the, collapse whitespace. The crate's other word
/// splitters (`ask::context::content_words`, `generate::options`' words, both on
/// [`crate::words::alphanumeric`]) differ on purpose, and this one must not follow them: it is the official script's, to the letter, so that exact
/// match and F1 compare with published numbers.
pub fn normalize_answer(s: &str) -> String {
    let lower = s.to_lowercase();
    let no_punct: String = lower
        .chars()
        .filter(|c| !c.is_ascii_punctuation())
        .collect();
    no_punct
        .split_whitespace()
        .filter(|w| !matches!(*w, "a" | "an" | "the"))
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn exact_match(prediction: &str, gold: &str) -> bool {
    normalize_answer(prediction) == normalize_answer(gold)
}

/// Whether the gold answer appears in `context` as whole words, both normalised as for exact
/// match; `None` for yes/no answers, which a context does not hold as such.
pub fn contains_answer(context: &str, gold: &str) -> Option<bool> {
    let gold = normalize_answer(gold);
    if gold.is_empty() || gold == "yes" || gold == "no" {
        return None;
    }
    let context = normalize_answer(context);
    Some(format!(" {context} ").contains(&format!(" {gold} ")))
}

/// Token-level F1 as in the official script, including its rule that a yes/no/noanswer on
/// either side scores only on an exact match.
pub fn f1_score(prediction: &str, gold: &str) -> f64 {
    let pred = normalize_answer(prediction);
    let gold = normalize_answer(gold);
    let special = ["yes", "no", "noanswer"];
    if (special.contains(&pred.as_str()) || special.contains(&gold.as_str())) && pred != gold {
        return 0.0;
    }
    let pred_tokens: Vec<&str> = pred.split_whitespace().collect();
    let gold_tokens: Vec<&str> = gold.split_whitespace().collect();
    let mut gold_counts: HashMap<&str, usize> = HashMap::new();
    for t in &gold_tokens {
        *gold_counts.entry(t).or_default() += 1;
    }
    let mut common = 0usize;
    for t in &pred_tokens {
        if let Some(c) = gold_counts.get_mut(t) {
            if *c > 0 {
                *c -= 1;
                common += 1;
            }
        }
    }
    if common == 0 {
        return 0.0;
    }
    let precision = common as f64 / pred_tokens.len() as f64;
    let recall = common as f64 / gold_tokens.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

/// Fraction of the gold titles found among the first `k` retrieved titles.
pub fn recall_at_k(retrieved: &[String], gold: &[String], k: usize) -> f64 {
    if gold.is_empty() {
        return 0.0;
    }
    let top = &retrieved[..retrieved.len().min(k)];
    gold.iter().filter(|g| top.contains(g)).count() as f64 / gold.len() as f64
}

/// Whether every gold title is among the first `k` retrieved titles.
pub fn all_in_top_k(retrieved: &[String], gold: &[String], k: usize) -> bool {
    !gold.is_empty() && recall_at_k(retrieved, gold, k) == 1.0
}

/// The cut-offs recall is reported at.
pub const RECALL_KS: [usize; 4] = [1, 2, 5, 10];

/// Retrieval quality for one question.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RetrievalScores {
    /// Fraction of supporting titles in the top k, per k.
    pub recall: BTreeMap<usize, f64>,
    /// Whether every supporting title is in the top k, per k.
    pub all_supporting: BTreeMap<usize, bool>,
}

impl RetrievalScores {
    pub fn of(retrieved: &[String], gold: &[String]) -> Self {
        Self {
            recall: RECALL_KS
                .iter()
                .map(|&k| (k, recall_at_k(retrieved, gold, k)))
                .collect(),
            all_supporting: RECALL_KS
                .iter()
                .map(|&k| (k, all_in_top_k(retrieved, gold, k)))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_found_as_whole_normalised_words() {
        let context = "Ed Wood: He was born in Poughkeepsie, New York.";
        assert_eq!(
            contains_answer(context, "poughkeepsie new york"),
            Some(true)
        );
        assert_eq!(contains_answer(context, "York City"), Some(false));
        assert_eq!(contains_answer(context, "Ed"), Some(true));
        assert_eq!(contains_answer(context, "E"), Some(false));
        assert_eq!(contains_answer(context, "yes"), None);
    }

    #[test]
    fn normalisation_follows_the_official_order() {
        assert_eq!(normalize_answer("The  Eiffel Tower!"), "eiffel tower");
        assert_eq!(normalize_answer("An apple, a day"), "apple day");
        // Punctuation goes before articles are matched: "the," becomes "the" and is dropped.
        assert_eq!(normalize_answer("the, end"), "end");
        // Only ASCII punctuation is dropped; accented letters stay.
        assert_eq!(normalize_answer("Café «Noir»"), "café «noir»");
        // Words that merely contain an article survive.
        assert_eq!(normalize_answer("Theatre anthem"), "theatre anthem");
    }

    #[test]
    fn exact_match_and_f1() {
        assert!(exact_match("the Beatles.", "Beatles"));
        assert!(!exact_match("Beatles band", "Beatles"));
        assert!((f1_score("Beatles band", "the Beatles") - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(f1_score("yes", "no"), 0.0);
        assert_eq!(f1_score("yes it is", "yes"), 0.0);
        assert_eq!(f1_score("yes", "yes"), 1.0);
        assert_eq!(f1_score("", "Paris"), 0.0);
    }

    #[test]
    fn recall_on_hand_made_rankings() {
        let titles = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let retrieved = titles(&["A", "X", "B", "Y"]);
        let gold = titles(&["A", "B"]);
        assert_eq!(recall_at_k(&retrieved, &gold, 1), 0.5);
        assert_eq!(recall_at_k(&retrieved, &gold, 2), 0.5);
        assert_eq!(recall_at_k(&retrieved, &gold, 3), 1.0);
        assert!(!all_in_top_k(&retrieved, &gold, 2));
        assert!(all_in_top_k(&retrieved, &gold, 10));
        assert_eq!(recall_at_k(&retrieved, &[], 5), 0.0);
    }

    #[test]
    fn per_question_scores_cover_every_cut_off() {
        let titles = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let scores = RetrievalScores::of(&titles(&["X", "A", "Y", "B"]), &titles(&["A", "B"]));
        assert_eq!(scores.recall[&1], 0.0);
        assert_eq!(scores.recall[&2], 0.5);
        assert_eq!(scores.recall[&5], 1.0);
        assert!(!scores.all_supporting[&2]);
        assert!(scores.all_supporting[&5]);
        assert_eq!(scores.recall.len(), RECALL_KS.len());
    }
}
