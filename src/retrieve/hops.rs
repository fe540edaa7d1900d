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

/// What of a seed paragraph the second hop's BM25 query holds beside the question (`--hop-query`).
/// A whole paragraph is a hundred terms, and BM25's cost grows with the terms' postings: on a
/// million documents that is most of a two-hop search (eval/scale/README.md). The dense query
/// keeps the whole paragraph ([`query`]): the encoder's cost does not grow with the corpus.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum HopQuery {
    /// The whole paragraph (what runs recorded before the rule existed used).
    #[default]
    Full,
    /// Its title and first sentence.
    Sentence,
    /// Its title and first `n` words.
    Words(usize),
    /// Its title alone.
    Title,
    /// Its title alone, without the question: BM25's cost at scale is the question's common
    /// words, whose postings span most of the corpus, and the first hop has scored those.
    SeedTitle,
}

impl HopQuery {
    pub fn is_full(&self) -> bool {
        *self == Self::Full
    }

    /// The BM25 query for `paragraph` as a seed of `question`.
    pub fn lexical(&self, question: &str, paragraph: &Paragraph) -> String {
        let text = &paragraph.text;
        let part = match *self {
            Self::Full => return query(question, paragraph),
            Self::Sentence => crate::ask::sentences::split(text)
                .first()
                .map_or("", |range| &text[range.clone()]),
            Self::Words(n) => {
                let end = text.split_whitespace().nth(n).map_or(text.len(), |word| {
                    word.as_ptr() as usize - text.as_ptr() as usize
                });
                &text[..end]
            }
            Self::Title => "",
            Self::SeedTitle => return paragraph.title.clone(),
        };
        format!("{question} {}: {part}", paragraph.title)
    }
}

impl std::str::FromStr for HopQuery {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Self> {
        match s.split_once(':') {
            None if s == "full" => Ok(Self::Full),
            None if s == "sentence" => Ok(Self::Sentence),
            None if s == "title" => Ok(Self::Title),
            None if s == "seed-title" => Ok(Self::SeedTitle),
            Some(("words", n)) => match n.parse::<usize>() {
                Ok(n) if n >= 1 => Ok(Self::Words(n)),
                _ => anyhow::bail!("--hop-query words:N needs N of 1 or more (got {n:?})"),
            },
            _ => anyhow::bail!(
                "--hop-query takes full, sentence, title, seed-title or words:N (got {s:?})"
            ),
        }
    }
}

impl std::fmt::Display for HopQuery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Full => write!(f, "full"),
            Self::Sentence => write!(f, "sentence"),
            Self::Words(n) => write!(f, "words:{n}"),
            Self::Title => write!(f, "title"),
            Self::SeedTitle => write!(f, "seed-title"),
        }
    }
}

impl serde::Serialize for HopQuery {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for HopQuery {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// One ranking from the first hop (best first) and, for each of its first `seconds.len()`
/// paragraphs in order (the seeds), the second-hop ranking found from it and the documents its
/// text names by title (`links`, [`super::links`]; empty when links are off). Every score is
/// first scaled to [0, 1] within its ranking (a seed's own entry in its second-hop ranking,
/// which its text in the query puts on top, is dropped before). A paragraph then scores its
/// first-hop score plus `weight` times its best second-hop score plus `link_weight` times the
/// best first-hop score of a seed naming it, each second-hop ranking and link counting as much
/// as its seed did in the first hop: evidence from both hops adds up, so a paragraph the
/// question names keeps its place while one only a seed leads to can rise past weak first-hop
/// ones. The first hop's best paragraph always stays first; ties fall to the smaller id. Returns the best `k` as
/// (id, score, hop), hop 2 for a paragraph that owes more to the second hop than the first.
pub fn merge(
    first: &[(u64, f32)],
    seconds: &[Vec<(u64, f32)>],
    links: &[Vec<u64>],
    (weight, link_weight): (f32, f32),
    k: usize,
) -> Vec<(u64, f32, u8)> {
    let first = min_max(first);
    let mut scores: Vec<Evidence> = first
        .iter()
        .map(|&(id, s)| Evidence {
            id,
            first: s,
            second: 0.0,
            link: 0.0,
            found_first: true,
        })
        .collect();
    // Found only by the second hop or a link: first-hop score 0.
    let entry = |scores: &mut Vec<Evidence>, id: u64| -> usize {
        scores.iter().position(|s| s.id == id).unwrap_or_else(|| {
            scores.push(Evidence {
                id,
                first: 0.0,
                second: 0.0,
                link: 0.0,
                found_first: false,
            });
            scores.len() - 1
        })
    };
    for (&(seed, lead), second) in first.iter().zip(seconds) {
        let others: Vec<(u64, f32)> = second.iter().copied().filter(|h| h.0 != seed).collect();
        for (id, score) in min_max(&others) {
            let i = entry(&mut scores, id);
            scores[i].second = scores[i].second.max(weight * lead * score);
        }
    }
    // Link weight 0 is no links at all: nothing enters the ranking through a link alone.
    let links = if link_weight > 0.0 { links } else { &[] };
    for (&(seed, lead), named) in first.iter().zip(links) {
        for &id in named.iter().filter(|&&id| id != seed) {
            let i = entry(&mut scores, id);
            scores[i].link = scores[i].link.max(link_weight * lead);
        }
    }
    let best = scores
        .iter()
        .map(Evidence::total)
        .fold(f32::NEG_INFINITY, f32::max);
    // The first hop's best stays first; the rest by total, ties by id ([`super::order`]).
    if let Some((head, rest)) = scores.split_first_mut() {
        rest.sort_by(|a, b| super::order::best_first((a.total(), a.id), (b.total(), b.id)));
        head.first = best - head.second - head.link;
    }
    scores
        .into_iter()
        .take(k)
        .map(|s| {
            let hop = if s.found_first && s.first >= s.second + s.link {
                1
            } else {
                2
            };
            (s.id, s.total(), hop)
        })
        .collect()
}

/// What the two hops say for one paragraph (each term already weighted).
struct Evidence {
    id: u64,
    /// First-hop score (0 when only the second hop found it).
    first: f32,
    /// Best second-hop score.
    second: f32,
    /// Best link score.
    link: f32,
    found_first: bool,
}

impl Evidence {
    fn total(&self) -> f32 {
        self.first + self.second + self.link
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_queries_hold_the_question_the_title_and_the_rule_s_part() {
        let seed = Paragraph {
            title: "Ed Wood".into(),
            text: "Edward D. Wood Jr. was an American filmmaker. He made cult films.".into(),
            ..Default::default()
        };
        let q = "Who directed it?";
        for (rule, want) in [
            ("full", "Who directed it? Ed Wood: Edward D. Wood Jr. was an American filmmaker. He made cult films."),
            ("sentence", "Who directed it? Ed Wood: Edward D. Wood Jr. was an American filmmaker."),
            ("words:3", "Who directed it? Ed Wood: Edward D. Wood "),
            ("words:99", "Who directed it? Ed Wood: Edward D. Wood Jr. was an American filmmaker. He made cult films."),
            ("title", "Who directed it? Ed Wood: "),
            ("seed-title", "Ed Wood"),
        ] {
            let parsed: HopQuery = rule.parse().unwrap();
            assert_eq!(parsed.to_string(), rule);
            assert_eq!(parsed.lexical(q, &seed), want, "{rule}");
        }
        for bad in ["words", "words:0", "all", "sentence:2"] {
            assert!(bad.parse::<HopQuery>().is_err(), "{bad}");
        }
    }

    fn ids(merged: &[(u64, f32, u8)]) -> Vec<u64> {
        merged.iter().map(|h| h.0).collect()
    }

    /// (id, score), best first.
    type Ranking = Vec<(u64, f32)>;

    /// A first hop and the second-hop rankings of its two seeds.
    fn two_hops() -> (Ranking, Vec<Ranking>) {
        // First hop scaled: 10 -> 1, 11 -> 0.5, 12 -> 0.
        let first = vec![(10, 0.9), (11, 0.7), (12, 0.5)];
        // From 10, itself dropped: 20 -> 1, 21 -> 0. From 11: 20 -> 1, 22 -> 0.5, 12 -> 0.
        let seconds = vec![
            vec![(20, 3.0), (10, 2.0), (21, 1.0)],
            vec![(20, 5.0), (22, 4.0), (12, 3.0)],
        ];
        (first, seconds)
    }

    #[test]
    fn evidence_from_both_hops_adds_up() {
        let (first, seconds) = two_hops();
        let merged = merge(&first, &seconds, &[], (0.8, 0.0), 6);
        // 20: 0.8 * max(1 * 1, 0.5 * 1); 22: 0.8 * 0.5 * 0.5; 12 and 21: 0 (12 the smaller id).
        assert_eq!(ids(&merged), vec![10, 20, 11, 22, 12, 21]);
        let hops: Vec<u8> = merged.iter().map(|h| h.2).collect();
        assert_eq!(hops, vec![1, 2, 1, 2, 1, 2]);
        let scores: Vec<f32> = merged.iter().map(|h| h.1).collect();
        for (got, want) in scores.iter().zip([1.0, 0.8, 0.5, 0.2, 0.0, 0.0]) {
            assert!((got - want).abs() < 1e-6, "{scores:?}");
        }
    }

    #[test]
    fn links_add_their_seeds_score() {
        // First hop 10 -> 1, 11 -> 0.5, 12 -> 0; second hop at 0.8: 20 -> 0.8, 22 -> 0.2.
        let (first, seconds) = two_hops();
        // 10 names 21 (and itself, skipped); 11 names 12 and 30, which no search found.
        let links = vec![vec![21, 10], vec![12, 30]];
        let merged = merge(&first, &seconds, &links, (0.8, 0.5), 7);
        // 21: 0.5 * 1; 12 and 30: 0.5 * 0.5. Ties by id (11 before 21).
        assert_eq!(ids(&merged), vec![10, 20, 11, 21, 12, 30, 22]);
        let hops: Vec<u8> = merged.iter().map(|h| h.2).collect();
        assert_eq!(hops, vec![1, 2, 1, 2, 2, 2, 2]);
        let scores: Vec<f32> = merged.iter().map(|h| h.1).collect();
        for (got, want) in scores.iter().zip([1.0, 0.8, 0.5, 0.5, 0.25, 0.25, 0.2]) {
            assert!((got - want).abs() < 1e-6, "{scores:?}");
        }
        // Link weight 0 is the ranking without links, scores and all.
        let without = merge(&first, &seconds, &[], (0.8, 0.0), 7);
        assert_eq!(merge(&first, &seconds, &links, (0.8, 0.0), 7), without);
        assert_eq!(ids(&without), vec![10, 20, 11, 22, 12, 21]);
    }

    #[test]
    fn the_first_hops_best_stays_first_and_nothing_repeats() {
        // First hop scaled: 1 -> 1, 2 -> 0.9, 3 -> 0.
        let first = vec![(1, 1.0), (2, 0.9), (3, 0.0)];
        // From 1: 2 -> 1, 5 -> 0. From 2: 7 -> 1, 1 -> 5/9, 8 -> 0.
        let seconds = vec![vec![(2, 1.0), (5, 0.0)], vec![(7, 9.0), (1, 5.0), (8, 0.0)]];
        let merged = merge(&first, &seconds, &[], (1.0, 0.0), 4);
        // 2 (0.9 + 1) outscores 1 (1 + 0.9 * 5/9), but 1 leads; its score is the best total.
        assert_eq!(ids(&merged), vec![1, 2, 7, 3]);
        assert!((merged[0].1 - 1.9).abs() < 1e-6 && (merged[1].1 - 1.9).abs() < 1e-6);
        assert!((merged[2].1 - 0.9).abs() < 1e-6, "{merged:?}");
        assert_eq!(merge(&first, &seconds, &[], (1.0, 0.0), 1).len(), 1);
        assert!(merge(&[], &[], &[], (1.0, 1.0), 3).is_empty());
        // Weight 0 is the first hop alone.
        assert_eq!(
            ids(&merge(&first, &seconds, &[], (0.0, 0.0), 3)),
            vec![1, 2, 3]
        );
    }

    #[test]
    fn near_ties_from_the_second_hop_fall_to_the_smaller_id() {
        // Two paragraphs only the second hop finds, scored a few 1e-5 apart the way an f32 and
        // an int8 question vector score them, each way round, and met in either order: the
        // smaller id comes first every time (not the higher float, nor the first met).
        let first = vec![(1, 1.0), (2, 0.5), (3, 0.0)];
        for (a, b) in [(0.800_03, 0.800_01), (0.800_01, 0.800_03)] {
            for seconds in [
                vec![vec![(31, a), (30, b), (40, 0.0)]],
                vec![vec![(30, b), (31, a), (40, 0.0)]],
            ] {
                let merged = merge(&first, &seconds, &[], (0.3, 0.0), 5);
                let at = |id| merged.iter().position(|h| h.0 == id).unwrap();
                assert!(at(30) < at(31), "{a} {b} {seconds:?}: {merged:?}");
            }
        }
    }

    #[test]
    fn queries_put_the_question_first() {
        let p = Paragraph {
            title: "Ed Wood".into(),
            text: "Edward Davis Wood Jr. was an American filmmaker.".into(),
            links: Vec::new(),
            source: None,
        };
        assert_eq!(
            query("Same nationality?", &p),
            "Same nationality? Ed Wood: Edward Davis Wood Jr. was an American filmmaker."
        );
    }
}
