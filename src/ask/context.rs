//! The context a generator reads: the retrieved paragraphs' best sentences within a token
//! budget, not the paragraphs whole. Prompt evaluation is nearly all of an answer's time on a
//! CPU, and most of a paragraph is not the evidence.
//!
//! Every sentence of the retrieved paragraphs is scored against the question (the encoder's
//! cosine at the retrieval depth, the share of the question's words it or its title holds, its
//! paragraph's rank, and whether it opens the paragraph, which in Wikipedia says who or what the
//! paragraph is about); the best are kept while they fit, each paragraph with its title, the
//! paragraphs in rank order and the sentences in document order within each. A kept sentence
//! that names another retrieved paragraph's title raises that paragraph's sentences: the second
//! hop of a bridge question ("the inventor that developed the Hornsby engine" -> "Herbert
//! Akroyd Stuart") is the paragraph the first hop's evidence names. A paragraph whose title the
//! question itself names gets its best sentence before any other: in "Were Scott Derrickson and
//! Ed Wood of the same nationality?" each named person's paragraph holds half the evidence,
//! and without this the title words alone ("Wood") let a footballer's and a film's sentences
//! fill the budget before "Ed Wood ... was an American filmmaker".

use std::ops::Range;

use anyhow::Result;

use crate::corpus::Paragraph;
use crate::index::links::Links;
use crate::retrieve::order;

mod scoring;

pub use scoring::{content_words, lexical_overlap, sentence_score, SentenceWeights};
/// A paragraph cut into sentences, with each sentence's score, the other paragraphs (by
/// position in the list) whose titles it names, and whether the question names its title.
#[derive(Debug, Clone)]
pub struct ScoredParagraph<'p> {
    pub paragraph: &'p Paragraph,
    pub sentences: Vec<Range<usize>>,
    pub scores: Vec<f32>,
    pub names: Vec<Vec<usize>>,
    pub in_question: bool,
}

/// Which sentences of each paragraph went into the context, and the context itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    /// Per paragraph (in the order given), per sentence.
    pub kept: Vec<Vec<bool>>,
    /// The paragraphs with a kept sentence, in the order given, holding only those sentences.
    pub passages: Vec<Paragraph>,
    /// Tokens of the rendered context, as `measure` counted them.
    pub tokens: usize,
}

/// The paragraphs (by position) whose titles `question` names, as the second hop's title links
/// find them (disambiguation dropped: "Ed Wood" names "Ed Wood (film)" too).
pub fn named_by(question: &str, paragraphs: &[Paragraph]) -> Result<Vec<usize>> {
    let links = links_of(paragraphs)?;
    let mut named: Vec<usize> = links
        .mentioned(question, u64::MAX)
        .into_iter()
        .map(|n| n as usize)
        .collect();
    named.sort_unstable();
    Ok(named)
}

fn links_of(paragraphs: &[Paragraph]) -> Result<Links> {
    Links::new((0u64..).zip(paragraphs.iter().map(|p| p.title.clone())))
}

/// Per paragraph, per sentence: the other paragraphs (by position) whose titles the sentence
/// names, as the second hop's title links find them.
pub fn names(
    paragraphs: &[Paragraph],
    sentences: &[Vec<Range<usize>>],
) -> Result<Vec<Vec<Vec<usize>>>> {
    let links = links_of(paragraphs)?;
    Ok(paragraphs
        .iter()
        .zip(sentences)
        .enumerate()
        .map(|(seed, (p, ranges))| {
            ranges
                .iter()
                .map(|r| {
                    let named = links.mentioned(&p.text[r.clone()], seed as u64);
                    named.into_iter().map(|n| n as usize).collect()
                })
                .collect()
        })
        .collect())
}

/// The best sentences that fit in `budget` tokens. `count` gives a sentence's tokens; `measure`
/// the tokens of a rendered context (so a paragraph's header costs `measure` of the paragraph
/// without text). First each paragraph the question names gets its best sentence (in rank
/// order, while they fit), then each of the first `floor` paragraphs in rank order that has
/// none yet (a bridge's two paragraphs, when retrieval ranks them first, each hold half the
/// evidence); then sentences are taken best first while they fit, each kept sentence adding
/// `link` to the sentences of the paragraphs it names (once per paragraph).
/// Scores are compared at [`order::GRAIN`], ties going to the first in rank and document order,
/// so that an index built in another precision chooses alike. Since pieces counted apart can
/// tokenize differently together, the rendered context is measured at the end and the last
/// kept sentences are dropped until it fits: the budget is never exceeded.
pub fn select(
    scored: &[ScoredParagraph],
    budget: usize,
    floor: usize,
    link: f32,
    count: impl Fn(&str) -> usize,
    measure: impl Fn(&[Paragraph]) -> usize,
) -> Selection {
    let mut open: Vec<(usize, usize)> = scored
        .iter()
        .enumerate()
        .flat_map(|(p, s)| (0..s.sentences.len()).map(move |i| (p, i)))
        .collect();
    let mut kept: Vec<Vec<bool>> = scored
        .iter()
        .map(|s| vec![false; s.sentences.len()])
        .collect();
    // What opening each paragraph costs: its title and layout, without text.
    let headers: Vec<usize> = scored
        .iter()
        .map(|s| {
            measure(&[Paragraph {
                title: s.paragraph.title.clone(),
                text: String::new(),
                links: Vec::new(),
                source: None,
            }])
        })
        .collect();
    let mut bonus = vec![0.0f32; scored.len()];
    let mut taken = Vec::new();
    let mut used = 0;
    // The best of `candidates` (positions in `open`): the highest score at the grain, then the
    // first in rank and document order.
    let best =
        |open: &[(usize, usize)], bonus: &[f32], candidates: &mut dyn Iterator<Item = usize>| {
            candidates.min_by(|&a, &b| {
                let key = |j: usize| {
                    let (p, i) = open[j];
                    (scored[p].scores[i] + bonus[p], (p, i))
                };
                order::best_first(key(a), key(b))
            })
        };
    let named = (0..scored.len()).filter(|&p| scored[p].in_question);
    let floored = (0..floor.min(scored.len())).filter(|&p| !scored[p].in_question);
    let mut first_sentence_of = named.chain(floored);
    loop {
        let chosen = match first_sentence_of.next() {
            Some(p) => best(
                &open,
                &bonus,
                &mut (0..open.len()).filter(|&j| open[j].0 == p),
            ),
            None if !open.is_empty() => best(&open, &bonus, &mut (0..open.len())),
            None => break,
        };
        let Some(chosen) = chosen else { continue };
        let (p, i) = open.remove(chosen);
        let s = &scored[p];
        let opened = kept[p].iter().any(|&k| k);
        let header = if opened { 0 } else { headers[p] };
        let cost = header + count(&s.paragraph.text[s.sentences[i].clone()]) + 1;
        if used + cost <= budget {
            used += cost;
            kept[p][i] = true;
            taken.push((p, i));
            for &named in &s.names[i] {
                bonus[named] = link;
            }
        }
    }
    loop {
        let passages = render(scored, &kept);
        let tokens = if passages.is_empty() {
            0
        } else {
            measure(&passages)
        };
        match taken.pop() {
            Some((p, i)) if tokens > budget => kept[p][i] = false,
            _ => {
                return Selection {
                    kept,
                    passages,
                    tokens,
                }
            }
        }
    }
}

/// The kept sentences of each paragraph that has any, joined in document order.
fn render(scored: &[ScoredParagraph], kept: &[Vec<bool>]) -> Vec<Paragraph> {
    scored
        .iter()
        .zip(kept)
        .filter(|(_, k)| k.iter().any(|&k| k))
        .map(|(s, k)| Paragraph {
            title: s.paragraph.title.clone(),
            text: s
                .sentences
                .iter()
                .zip(k)
                .filter(|(_, &k)| k)
                .map(|(r, _)| &s.paragraph.text[r.clone()])
                .collect::<Vec<_>>()
                .join(" "),
            links: Vec::new(),
            source: s.paragraph.source.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ask::sentences;

    fn words(text: &str) -> usize {
        text.split_whitespace().count()
    }

    /// Like the chat prompt: "Doc n(Title: T) text" per paragraph, a line each.
    fn measure(passages: &[Paragraph]) -> usize {
        passages
            .iter()
            .enumerate()
            .map(|(i, p)| words(&format!("Doc {}(Title: {}) {}", i + 1, p.title, p.text)))
            .sum()
    }

    fn paragraphs() -> Vec<Paragraph> {
        vec![
            Paragraph {
                title: "Ed Wood".into(),
                text: "Ed Wood was an American filmmaker. He made cheap films. He died in 1978."
                    .into(),
                links: Vec::new(),
                source: None,
            },
            Paragraph {
                title: "Scott Derrickson".into(),
                text: "Scott Derrickson is an American director. He directed Sinister.".into(),
                links: Vec::new(),
                source: None,
            },
        ]
    }

    fn scored<'p>(paragraphs: &'p [Paragraph], scores: &[&[f32]]) -> Vec<ScoredParagraph<'p>> {
        paragraphs
            .iter()
            .zip(scores)
            .map(|(p, s)| ScoredParagraph {
                paragraph: p,
                sentences: sentences::split(&p.text),
                scores: s.to_vec(),
                names: vec![Vec::new(); s.len()],
                in_question: false,
            })
            .collect()
    }

    #[test]
    fn keeps_the_best_sentences_with_titles_in_document_order() {
        let paragraphs = paragraphs();
        let scored = scored(&paragraphs, &[&[0.9, 0.1, 0.8], &[0.95, 0.2]]);
        // Headers cost 4 words; sentences 6, 4, 4 and 6, 3 words, plus 1 each.
        let selection = select(&scored, 30, 0, 0.0, words, measure);
        assert_eq!(
            selection.kept,
            vec![vec![true, false, true], vec![true, false]]
        );
        assert_eq!(
            selection.passages[0].text,
            "Ed Wood was an American filmmaker. He died in 1978."
        );
        assert_eq!(selection.passages[0].title, "Ed Wood");
        assert_eq!(selection.passages[1].title, "Scott Derrickson");
        assert_eq!(selection.tokens, measure(&selection.passages));
        assert!(selection.tokens <= 30);
    }

    #[test]
    fn a_kept_sentence_raises_the_paragraphs_it_names() {
        let paragraphs = paragraphs();
        let mut scored = scored(&paragraphs, &[&[0.9, 0.5, 0.6], &[0.55, 0.2]]);
        // "Ed Wood was an American filmmaker." named Scott Derrickson.
        scored[0].names[0] = vec![1];
        // Headers cost 4 words; sentences 6, 4, 4 and 6, 3 words, plus 1 each. Without the
        // link, Ed Wood's three sentences fit (21); with it, Scott Derrickson's first sentence
        // (0.55 + 0.1) comes before Ed Wood's third and fills the budget (22).
        let without = select(&scored, 22, 0, 0.0, words, measure);
        assert_eq!(
            without.kept,
            vec![vec![true, true, true], vec![false, false]]
        );
        let with = select(&scored, 22, 0, 0.1, words, measure);
        assert_eq!(with.kept, vec![vec![true, false, false], vec![true, false]]);
        assert_eq!(with.passages[1].title, "Scott Derrickson");
        assert!(with.tokens <= 22);
        // The link counts only from a kept sentence.
        scored[0].names[0].clear();
        scored[1].names[1] = vec![0];
        assert_eq!(
            select(&scored, 22, 0, 0.1, words, measure).kept,
            without.kept
        );
    }

    #[test]
    fn a_paragraph_the_question_names_gets_its_best_sentence_first() {
        let paragraphs = paragraphs();
        let mut scored = scored(&paragraphs, &[&[0.9, 0.8, 0.7], &[0.3, 0.2]]);
        // Headers cost 4 words; sentences 6, 4, 4 and 6, 3 words, plus 1 each. By score alone,
        // Ed Wood's three sentences fill a budget of 22 words.
        let by_score = select(&scored, 22, 0, 0.0, words, measure);
        assert_eq!(
            by_score.kept,
            vec![vec![true, true, true], vec![false, false]]
        );
        // Named by the question, Scott Derrickson's best sentence comes first.
        scored[1].in_question = true;
        let named = select(&scored, 22, 0, 0.0, words, measure);
        assert_eq!(
            named.kept,
            vec![vec![true, false, false], vec![true, false]]
        );
        // Without room for it (11 words), it is left out like any sentence that does not fit.
        let tight = select(&scored, 10, 0, 0.0, words, measure);
        assert_eq!(
            tight.kept,
            vec![vec![false, true, false], vec![false, false]]
        );
    }

    #[test]
    fn the_floor_gives_each_best_ranked_paragraph_its_best_sentence_first() {
        let paragraphs = paragraphs();
        let mut scored = scored(&paragraphs, &[&[0.9, 0.8, 0.7], &[0.3, 0.2]]);
        // Headers cost 4 words; sentences 6, 4, 4 and 6, 3 words, plus 1 each. By score alone,
        // Ed Wood's three sentences fill a budget of 22 words.
        let by_score = select(&scored, 22, 0, 0.0, words, measure);
        assert_eq!(
            by_score.kept,
            vec![vec![true, true, true], vec![false, false]]
        );
        // A floor of 1 is the best-ranked paragraph alone, which had its best sentence anyway.
        assert_eq!(select(&scored, 22, 1, 0.0, words, measure), by_score);
        // A floor of 2: Scott Derrickson's best sentence before Ed Wood's second and third.
        let floored = select(&scored, 22, 2, 0.0, words, measure);
        assert_eq!(
            floored.kept,
            vec![vec![true, false, false], vec![true, false]]
        );
        // A floor past the paragraphs there are is all of them.
        assert_eq!(select(&scored, 22, 9, 0.0, words, measure), floored);
        // The question naming a paragraph puts it first; the floor adds nothing twice.
        scored[1].in_question = true;
        let tight = select(&scored, 11, 2, 0.0, words, measure);
        assert_eq!(
            tight.kept,
            vec![vec![false, false, false], vec![true, false]]
        );
    }

    #[test]
    fn near_ties_go_to_the_first_in_rank_and_document_order() {
        let paragraphs = paragraphs();
        // Apart by less than the grain: the first paragraph's sentence is the tie's winner,
        // whichever of the two a precision scores higher.
        for (a, b) in [(0.50001, 0.50003), (0.50003, 0.50001)] {
            let scored = scored(&paragraphs, &[&[0.0, a, 0.0], &[b, 0.0]]);
            // Room for one header and one sentence of 4 to 6 words.
            let selection = select(&scored, 11, 0, 0.0, words, measure);
            assert_eq!(
                selection.kept,
                vec![vec![false, true, false], vec![false, false]]
            );
        }
    }

    #[test]
    fn the_question_names_paragraphs_by_title() {
        let mut paragraphs = paragraphs();
        paragraphs.push(Paragraph {
            title: "Ed Wood (film)".into(),
            text: "Ed Wood is a 1994 film.".into(),
            links: Vec::new(),
            source: None,
        });
        paragraphs.push(Paragraph {
            title: "Chris Wood (footballer)".into(),
            text: "Chris Wood is a footballer.".into(),
            links: Vec::new(),
            source: None,
        });
        let question = "Were Scott Derrickson and Ed Wood of the same nationality?";
        assert_eq!(named_by(question, &paragraphs).unwrap(), vec![0, 1, 2]);
        assert!(named_by("Who is he?", &paragraphs).unwrap().is_empty());
    }

    #[test]
    fn sentences_name_the_other_paragraphs_titles() {
        let mut paragraphs = paragraphs();
        paragraphs[0]
            .text
            .push_str(" Scott Derrickson admired him.");
        paragraphs[1].title = "Scott Derrickson (director)".into();
        paragraphs[1].text.push_str(" Unlike Ed Wood, he is alive.");
        let sentences: Vec<_> = paragraphs
            .iter()
            .map(|p| sentences::split(&p.text))
            .collect();
        let names = names(&paragraphs, &sentences).unwrap();
        // A paragraph does not name itself, and a disambiguated title is named without it.
        assert_eq!(names[0], vec![vec![], vec![], vec![], vec![1]]);
        assert_eq!(names[1], vec![vec![], vec![], vec![0]]);
    }

    #[test]
    fn the_budget_is_never_exceeded() {
        let paragraphs = paragraphs();
        let scored = scored(&paragraphs, &[&[0.5, 0.4, 0.3], &[0.2, 0.1]]);
        for budget in 0..60 {
            let selection = select(&scored, budget, 0, 0.0, words, measure);
            assert!(selection.tokens <= budget, "{budget}: {selection:?}");
        }
        // A counter that underestimates every piece still ends within the budget.
        for budget in 0..60 {
            let selection = select(&scored, budget, 0, 0.0, |_| 0, measure);
            assert!(selection.tokens <= budget, "{budget}: {selection:?}");
        }
        let all = select(&scored, 1000, 0, 0.0, words, measure);
        assert!(all.kept.iter().flatten().all(|&k| k));
        assert_eq!(all.passages, paragraphs);
    }
}
